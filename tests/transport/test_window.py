"""`SendWindow`: credit, byte limit, ack, resend order, drain and close."""

from __future__ import annotations

import threading

import pytest

from tests.helpers import eventually
from tuplemesh.errors import TransportError
from tuplemesh.transport.window import SendWindow


def _add_in_thread(window: SendWindow, item: str, size: int = 1) -> threading.Thread:
    thread = threading.Thread(target=window.add, args=(lambda seq: item, size), daemon=True)
    thread.start()
    return thread


def test_sequences_start_at_one_and_items_are_kept_in_order():
    window = SendWindow(batches=4, max_bytes=100, address="peer")
    assert [window.add(lambda seq: f"item{seq}", 1, tuples=2) for _ in range(3)] == [1, 2, 3]
    assert (len(window), window.oldest, window.next_seq, window.unacked_tuples) == (3, 1, 4, 6)
    assert window.get(1) == (1, "item1") and window.get(3) == (3, "item3") and window.get(4) is None


def test_add_blocks_at_the_batch_limit_until_an_ack():
    window = SendWindow(batches=2, max_bytes=100, address="peer")
    window.add(lambda seq: "a", 1)
    window.add(lambda seq: "b", 1)
    blocked = _add_in_thread(window, "c")
    blocked.join(0.2)
    assert blocked.is_alive() and len(window) == 2
    assert window.ack(1) == 1
    blocked.join(5)
    assert not blocked.is_alive() and window.unacked_tuples == 0 and len(window) == 2


def test_receiver_credit_lowers_the_limit():
    window = SendWindow(batches=4, max_bytes=100, address="peer")
    window.add(lambda seq: "a", 1)
    window.ack(0, credit=1)  # nothing released; the receiver allows one batch in flight
    blocked = _add_in_thread(window, "b")
    blocked.join(0.2)
    assert blocked.is_alive()
    window.ack(1, credit=1)
    blocked.join(5)
    assert not blocked.is_alive() and window.get(2) == (2, "b")


def test_byte_limit_blocks_but_one_oversized_batch_always_fits():
    window = SendWindow(batches=10, max_bytes=10, address="peer")
    assert window.add(lambda seq: "big", 50) == 1  # an empty window takes any batch
    blocked = _add_in_thread(window, "small", 1)
    blocked.join(0.2)
    assert blocked.is_alive()
    window.ack(1)
    blocked.join(5)
    assert not blocked.is_alive()
    window.add(lambda seq: "fits", 9)
    blocked = _add_in_thread(window, "over", 1)  # 1 + 9 + 1 > 10
    blocked.join(0.2)
    assert blocked.is_alive()
    window.ack(2)
    blocked.join(5)
    assert not blocked.is_alive()


def test_ack_is_cumulative_and_get_skips_what_was_acknowledged():
    window = SendWindow(batches=8, max_bytes=100, address="peer")
    for name in "abcde":
        window.add(lambda seq, name=name: name, 1, tuples=1)
    assert window.ack(3) == 3
    assert window.ack(2) == 0  # an older ack releases nothing
    assert (window.oldest, window.unacked_tuples) == (4, 2)
    assert window.get(1) == (4, "d")  # a sender still at 1 resumes at the oldest unacknowledged


def test_rewind_resends_from_the_oldest_in_order():
    window = SendWindow(batches=8, max_bytes=100, address="peer")
    for name in "abcd":
        window.add(lambda seq, name=name: name, 1)
    window.ack(1)
    position, again = window.rewind(5)  # everything was sent; the peer missed batch 2
    assert (position, again) == (2, 3)
    resent = []
    while (found := window.get(position)) is not None:
        resent.append(found[1])
        position = found[0] + 1
    assert resent == ["b", "c", "d"]


def test_next_to_send_waits_for_a_batch_and_stops_when_not_alive():
    window = SendWindow(batches=4, max_bytes=100, address="peer")
    alive = [True]
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(window.next_to_send(1, lambda: alive[0])))
    thread.start()
    window.add(lambda seq: "a", 1)
    thread.join(5)
    assert got == [(1, "a")]
    thread = threading.Thread(target=lambda: got.append(window.next_to_send(2, lambda: alive[0])))
    thread.start()
    alive[0] = False
    window.wake()
    thread.join(5)
    assert got == [(1, "a"), None]


def test_drain_returns_what_stayed_unacknowledged_and_closes():
    window = SendWindow(batches=4, max_bytes=100, address="peer-a")
    window.add(lambda seq: "a", 1, tuples=3)
    window.add(lambda seq: "b", 1, tuples=2)
    window.ack(1)
    assert window.drain(0.05) == 1
    assert window.unacked_tuples == 2
    with pytest.raises(TransportError, match="peer-a is closed"):
        window.add(lambda seq: "c", 1)


def test_drain_returns_zero_once_everything_is_acknowledged():
    window = SendWindow(batches=4, max_bytes=100, address="peer")
    window.add(lambda seq: "a", 1, tuples=1)
    threading.Timer(0.05, window.ack, args=(1,)).start()
    assert window.drain(5) == 0
    assert window.closed


def test_close_wakes_a_blocked_producer_with_an_error():
    window = SendWindow(batches=1, max_bytes=100, address="peer")
    window.add(lambda seq: "a", 1)
    errors: list[Exception] = []

    def add() -> None:
        try:
            window.add(lambda seq: "b", 1)
        except TransportError as exc:
            errors.append(exc)

    thread = threading.Thread(target=add)
    thread.start()
    window.drain(0)
    thread.join(5)
    eventually(lambda: len(errors) == 1)
