"""How often a receiver acknowledges: every ``credit // 4`` batches, `ACK_TUPLES` tuples or
`ACK_BYTES` bytes, whichever comes first (a sender sizes its window from the ages its
acknowledgements show: batches of large tuples must not wait for a thousand more tuples)."""

from __future__ import annotations

from tuplemesh.transport.session import ACK_BYTES, ACK_TUPLES, ReceiverSession, StreamState


def _session(credit: int) -> tuple[ReceiverSession, list[int]]:
    delivered: list[int] = []
    session = ReceiverSession("t", lambda batch: delivered.extend(t for t, _ in batch) or [], credit, 60.0)
    return session, delivered


def _acked_at(session: ReceiverSession, batches: int, tuples: int, size: int) -> list[int]:
    """Deliver ``batches`` batches of ``tuples`` tuples and ``size`` framed bytes each; the
    sequences acknowledged."""
    stream = StreamState()
    acked = []
    for sequence in range(1, batches + 1):
        ack = session.receive(stream, 0, 1, sequence, [(1, b"x")] * tuples, size, False)
        if ack is not None:
            acked.append(ack.sequence)
    return acked


def test_batches_of_a_few_small_tuples_are_acknowledged_every_quarter_of_the_credit():
    session, delivered = _session(credit=32)
    assert _acked_at(session, 20, tuples=2, size=100) == [8, 16]
    assert len(delivered) == 40


def test_many_tuples_are_acknowledged_every_ack_tuples_however_few_batches_they_took():
    session, _ = _session(credit=32)
    per_batch = ACK_TUPLES // 2
    assert _acked_at(session, 6, tuples=per_batch, size=100) == [2, 4, 6]


def test_large_batches_are_acknowledged_every_ack_bytes_however_few_tuples_they_hold():
    session, _ = _session(credit=32)
    # a tuple of a quarter of ACK_BYTES per batch: acknowledged every fourth batch, not every
    # eighth (credit // 4) nor every 1,024th tuple
    assert _acked_at(session, 8, tuples=1, size=ACK_BYTES // 4) == [4, 8]
    session, _ = _session(credit=32)
    assert _acked_at(session, 3, tuples=1, size=ACK_BYTES + 1) == [1, 2, 3]  # each one alone
