"""`DuplicateFilter`: each (sender, session) delivers every sequence once, in order."""

from __future__ import annotations

from tuplemesh.transport import dedupe
from tuplemesh.transport.dedupe import DuplicateFilter, Verdict


def _deliver(f: DuplicateFilter, key: tuple[int, int], sequence: int, first_unacked: int = 0) -> Verdict:
    with f.lock(key):
        verdict, _ = f.judge(key, sequence, first_unacked)
        if verdict is Verdict.DELIVER:
            f.delivered(key, sequence)
        return verdict


def test_in_order_delivers_and_a_repeat_is_a_duplicate():
    f = DuplicateFilter()
    assert [_deliver(f, (1, 9), s) for s in (1, 2, 3, 2, 3)] == [Verdict.DELIVER] * 3 + [
        Verdict.DUPLICATE
    ] * 2
    assert (f.duplicates, f.gaps) == (2, 0)
    assert f.judge((1, 9), 1) == (Verdict.DUPLICATE, 3)


def test_a_skipped_sequence_is_a_gap_until_the_missing_one_arrives():
    f = DuplicateFilter()
    assert _deliver(f, (1, 9), 1) is Verdict.DELIVER
    assert f.judge((1, 9), 3) == (Verdict.GAP, 1)
    assert [_deliver(f, (1, 9), s) for s in (2, 3)] == [Verdict.DELIVER, Verdict.DELIVER]
    assert f.gaps == 1


def test_sessions_are_apart_a_new_session_starts_again():
    f = DuplicateFilter()
    assert [_deliver(f, (1, 9), s) for s in (1, 2)] == [Verdict.DELIVER] * 2
    # a restarted sender (new session) restarts at 1; the other sender is independent
    assert _deliver(f, (1, 10), 1) is Verdict.DELIVER
    assert _deliver(f, (2, 9), 1) is Verdict.DELIVER
    assert _deliver(f, (1, 9), 2) is Verdict.DUPLICATE  # the old session still remembers
    assert f.duplicates == 1


def test_a_receiver_without_memory_starts_at_the_senders_oldest():
    f = DuplicateFilter()
    assert f.judge((1, 9), 6, first_unacked=5) == (Verdict.GAP, None)
    assert _deliver(f, (1, 9), 5, first_unacked=5) is Verdict.DELIVER
    assert _deliver(f, (1, 9), 6, first_unacked=5) is Verdict.DELIVER
    assert f.gaps == 1


def test_oldest_sessions_are_forgotten_first(monkeypatch):
    monkeypatch.setattr(dedupe, "SESSIONS_REMEMBERED", 2)
    f = DuplicateFilter()
    for session in (1, 2, 3):
        _deliver(f, (1, session), 1)
    assert _deliver(f, (1, 1), 1) is Verdict.DELIVER  # forgotten: a resend is taken again
    assert _deliver(f, (1, 3), 1) is Verdict.DUPLICATE
