"""SpoutTracker: open trees, verdicts, timeouts in emit order, max spout pending per task."""

from __future__ import annotations

import time

from tuplemesh.acking import SpoutTracker


def test_finish_closes_an_open_tree_once() -> None:
    tracker = SpoutTracker(timeout_secs=30.0, max_pending=0)
    tracker.track(101, task=1, msg_id="m1")
    tracker.track(102, task=2, msg_id="m2")
    assert len(tracker) == 2
    assert tracker.finish(101) == (1, "m1")
    assert tracker.finish(101) is None  # a second verdict (or one after a timeout) is ignored
    assert tracker.finish(999) is None
    assert len(tracker) == 1


def test_expired_returns_trees_past_their_deadline_oldest_first_and_stops_at_a_young_one() -> None:
    tracker = SpoutTracker(timeout_secs=10.0, max_pending=0)
    tracker.track(1, task=1, msg_id="a")
    tracker.track(2, task=1, msg_id="b")
    start = time.monotonic()
    assert tracker.expired(start) == []
    tracker.track(3, task=2, msg_id="c")
    # a and b were tracked before `start`, c after: a cut-off between them expires exactly two
    assert tracker.expired(start + 10.0) == [(1, "a"), (1, "b")]
    assert len(tracker) == 1
    assert tracker.finish(1) is None  # expired trees are closed
    assert tracker.expired(time.monotonic() + 10.0) == [(2, "c")]
    assert len(tracker) == 0


def test_max_pending_is_per_task_and_freed_by_verdicts_and_timeouts() -> None:
    tracker = SpoutTracker(timeout_secs=5.0, max_pending=2)
    tracker.track(1, task=7, msg_id="a")
    assert tracker.may_emit(7)
    tracker.track(2, task=7, msg_id="b")
    assert not tracker.may_emit(7)
    assert tracker.may_emit(8)  # another task's limit is its own
    tracker.finish(2)
    assert tracker.may_emit(7)
    tracker.track(3, task=7, msg_id="c")
    assert not tracker.may_emit(7)
    assert tracker.expired(time.monotonic() + 5.0) == [(7, "a"), (7, "c")]
    assert tracker.may_emit(7)


def test_no_limit_when_max_pending_is_zero() -> None:
    tracker = SpoutTracker(timeout_secs=5.0, max_pending=0)
    for root in range(1000):
        tracker.track(root, task=1, msg_id=root)
    assert tracker.may_emit(1) and len(tracker) == 1000


def test_completed_at_once_queues_acks_without_opening_a_tree() -> None:
    tracker = SpoutTracker(timeout_secs=5.0, max_pending=1)
    tracker.completed_at_once(1, "x")
    tracker.completed_at_once(2, "y")
    assert tracker.acked_at_once == [(1, "x"), (2, "y")]
    assert len(tracker) == 0 and tracker.may_emit(1)
