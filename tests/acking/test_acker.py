"""AckerBolt: XOR tree completion in any message order, fails, verdicts per spout task, expiry."""

from __future__ import annotations

import itertools
import time
from typing import Any

from tuplemesh.acking import ACKING_STREAM, VERDICT_STREAM, AckerBolt
from tuplemesh.topology import Fields, Tuple

FIELDS = Fields(["inits", "acks", "fails"])


class Verdicts:
    """Records the acker's emit_direct calls."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, Any, str]] = []

    def emit_direct(self, task: int, values: Any, anchors: Any = None, stream: str = "default") -> None:
        self.sent.append((task, values, stream))


def make(timeout: float = 30.0) -> tuple[AckerBolt, Verdicts]:
    acker, verdicts = AckerBolt(), Verdicts()
    acker.prepare({"topology.message.timeout.secs": timeout}, None, verdicts)
    return acker, verdicts


def box(inits: Any = (), acks: Any = (), fails: Any = ()) -> Tuple:
    return Tuple((list(inits), list(acks), list(fails)), 4, "split", ACKING_STREAM, FIELDS)


def test_a_tree_completes_when_every_edge_was_xored_in_twice() -> None:
    acker, verdicts = make()
    e1, e2, e3 = 0x11, 0x2200, 0x330000
    acker.execute(box(inits=[7, e1 ^ e2, 3]))  # the spout's root delivered twice
    acker.execute(box(acks=[7, e1 ^ e3]))  # bolt acks e1, emitted e3 anchored to it
    assert verdicts.sent == [] and acker.report()["pending"] == 1
    acker.execute(box(acks=[7, e2, 7, e3]))  # both remaining edges acked in one box
    assert verdicts.sent == [(3, [[7], []], VERDICT_STREAM)]
    assert acker.report() == {"pending": 0, "completed": 1, "failed": 0, "expired": 0}


def test_acks_that_overtake_the_init_wait_for_it() -> None:
    acker, verdicts = make()
    acker.execute(box(acks=[9, 0x5]))  # the value is 0 only by accident: no init yet, no verdict
    acker.execute(box(acks=[9, 0x5]))
    assert verdicts.sent == [] and acker.report()["pending"] == 1
    acker.execute(box(inits=[9, 0x0, 2]))
    assert verdicts.sent == [(2, [[9], []], VERDICT_STREAM)]


def test_a_fail_decides_the_tree_at_once_and_later_messages_start_nothing_new() -> None:
    acker, verdicts = make()
    acker.execute(box(inits=[5, 0xF, 1, 6, 0xE, 1], fails=[5]))
    assert verdicts.sent == [(1, [[], [5]], VERDICT_STREAM)]
    acker.execute(box(acks=[6, 0xE]))
    assert verdicts.sent[1] == (1, [[6], []], VERDICT_STREAM)
    assert acker.report() == {"pending": 0, "completed": 1, "failed": 1, "expired": 0}


def test_one_verdict_tuple_per_spout_task_per_box() -> None:
    acker, verdicts = make()
    acker.execute(box(inits=[1, 0xA, 3, 2, 0xB, 4, 3, 0xC, 3]))
    acker.execute(box(acks=[1, 0xA, 2, 0xB, 3, 0xC]))
    assert sorted(verdicts.sent) == [(3, [[1, 3], []], VERDICT_STREAM), (4, [[2], []], VERDICT_STREAM)]


def test_trees_older_than_the_timeout_are_forgotten_at_the_next_sweep(monkeypatch: Any) -> None:
    acker, verdicts = make(timeout=1.0)
    # a clock 1.5 s on at every read: every tree is past its timeout at the first sweep
    reads = itertools.count(1)
    start = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: start + 1.5 * next(reads))
    acker.execute(box(inits=[1, 0xA, 3]))
    assert acker.report()["expired"] == 1 and acker.report()["pending"] == 0
    acker.execute(box(acks=[1, 0xA]))  # a late ack: no init will come, so it only expires too
    assert verdicts.sent == []
    assert acker.report() == {"pending": 0, "completed": 0, "failed": 0, "expired": 2}
