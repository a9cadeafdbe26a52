"""`SendWindow`: credit, byte limit, ack, resend order, drain and close."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.helpers import eventually
from tuplemesh.config import Config
from tuplemesh.core.budget import ByteBudget
from tuplemesh.core.stats import BindingStats, PeerSnapshot, ReceiveSnapshot, TransferTotals, WorkerSnapshot
from tuplemesh.errors import TransportError
from tuplemesh.metrics import WorkerCollector
from tuplemesh.netutil import free_ports
from tuplemesh.server.status_proto import snapshot_from_proto, snapshot_to_proto
from tuplemesh.topology.user_metrics import UserMetrics
from tuplemesh.transport import make_context
from tuplemesh.transport.framing import pack_within, unpack_batch
from tuplemesh.transport.session import ACK_BYTES, ACK_TUPLES
from tuplemesh.transport.settings import TransportSettings
from tuplemesh.transport.window import (
    MAX_IN_FLIGHT_BYTES,
    MAX_IN_FLIGHT_TUPLES,
    MIN_IN_FLIGHT_BYTES,
    MIN_IN_FLIGHT_TUPLES,
    MOST_COALESCED_TUPLES,
    InFlightTimeLimit,
    SendWindow,
    WindowedConnection,
)


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


def test_the_time_limit_is_the_throughput_times_round_trip_and_target_once_batches_come_back_late():
    limit = InFlightTimeLimit(0.020)
    assert limit.limit == MAX_IN_FLIGHT_TUPLES  # nothing measured: slots and bytes alone bound it
    limit.acknowledged(1_000, age=0.005, waited=False, now=10.000)
    limit.acknowledged(2_000, age=0.005, waited=False, now=10.025)  # 3,000 tuples in 25 ms
    assert round(limit.rate) == 120_000 and limit.limit == MAX_IN_FLIGHT_TUPLES  # back in time: kept
    assert limit.floor == 0.005  # the round trip with nothing queued
    limit.acknowledged(1_500, age=0.300, waited=False, now=10.030)  # 300 ms in flight: too much
    assert limit.limit == 3_000  # 120,000 tuples/s x (5 ms round trip + 20 ms)
    limit.acknowledged(10, age=0.300, waited=True, now=10.031)
    assert limit.limit == 3_000  # still late: never grows


def test_the_byte_limit_is_the_byte_throughput_times_round_trip_and_target_above_its_floor():
    """Large tuples: 1,024 tuples of 1 MiB would pass the tuple floor as a gigabyte in flight."""
    limit = InFlightTimeLimit(0.020)
    assert limit.bytes_limit == MAX_IN_FLIGHT_BYTES  # nothing measured yet
    mib = 1 << 20
    limit.acknowledged(10, age=0.005, waited=False, now=10.000, nbytes=10 * mib)
    limit.acknowledged(30, age=0.005, waited=False, now=10.025, nbytes=30 * mib)  # 40 MiB in 25 ms
    assert round(limit.byte_rate) == 1600 * mib and limit.bytes_limit == MAX_IN_FLIGHT_BYTES
    limit.acknowledged(10, age=0.300, waited=False, now=10.030, nbytes=10 * mib)  # 300 ms: late
    assert limit.bytes_limit == 40 * mib  # 1,600 MiB/s x (5 ms round trip + 20 ms)
    assert limit.limit == MIN_IN_FLIGHT_TUPLES  # 1,600 tuples/s x 25 ms is 40: the tuple floor
    limit.acknowledged(1, age=0.001, waited=True, now=10.031, nbytes=mib)  # early, and waited
    assert limit.bytes_limit == 50 * mib + 1  # grown by a quarter
    slow = InFlightTimeLimit(0.020)
    slow.acknowledged(1, age=0.001, waited=False, now=1.0, nbytes=1000)
    slow.acknowledged(1, age=0.5, waited=False, now=1.5, nbytes=1000)  # 4 kB/s and late
    assert slow.bytes_limit == MIN_IN_FLIGHT_BYTES  # never below one mebibyte


def test_a_window_sized_by_time_blocks_at_its_byte_limit_letting_the_batch_that_crosses_it_go():
    window = SendWindow(batches=32, max_bytes=64 << 20, address="peer", target_seconds=60.0)
    assert window.time_limit is not None and window.time_limited_bytes == 0  # nothing measured
    window.time_limit.bytes_limit = 3 << 20
    window.add(lambda seq: "a", 2 << 20, tuples=2)
    assert not window.full  # below the limit: no need to ask for an acknowledgement
    window.add(lambda seq: "b", 2 << 20, tuples=2)  # crosses the limit: goes out all the same
    assert window.full  # at the limit: the sender asks (a joined batch is counted a little high)
    blocked = threading.Thread(target=window.add, args=(lambda seq: "c", 1, 1), daemon=True)
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive() and len(window) == 2 and window.unacked_bytes == 4 << 20
    window.ack(1)
    blocked.join(5)
    assert not blocked.is_alive() and window.waits == 1
    # it waited and the ack came back early: grown, and reported
    assert window.time_limited_bytes == int((3 << 20) * 1.25) + 1
    assert MIN_IN_FLIGHT_BYTES >= ACK_BYTES  # a receiver acknowledges within the byte limit
    # a limit not below the window's own bytes holds nothing back: reported as none
    window.time_limit.bytes_limit = 64 << 20
    assert window.time_limited_bytes == 0


def test_a_batch_joins_the_open_one_only_below_the_byte_limit():
    def packed(payload: bytes) -> bytes:
        [(part, _)] = pack_within([(1, payload)], 16 << 20)
        return part

    window = SendWindow(batches=32, max_bytes=64 << 20, address="peer", target_seconds=60.0)
    assert window.time_limit is not None
    window.time_limit.bytes_limit = 3 << 20
    assert window.add_packed(packed(b"x" * (2 << 20)), 1, 16 << 20) == 1
    assert window.add_packed(packed(b"z"), 1, 16 << 20) == 1  # joins: below the limit
    assert window.add_packed(packed(b"y" * (2 << 20)), 1, 16 << 20) == 1  # joins: still below
    assert window.coalesced == 2 and len(window) == 1
    last = packed(b"w")
    blocked = threading.Thread(target=window.add_packed, args=(last, 1, 16 << 20), daemon=True)
    blocked.start()  # 4 MiB in flight: past the limit, so it neither joins nor goes
    blocked.join(0.2)
    assert blocked.is_alive() and window.coalesced == 2 and len(window) == 1
    window.ack(1)
    blocked.join(5)
    assert not blocked.is_alive() and window.get(2) == (2, last)


def test_the_round_trip_is_the_shortest_age_of_the_last_one_to_two_seconds():
    limit = InFlightTimeLimit(0.020)
    limit.acknowledged(10, age=0.002, waited=False, now=1.0)
    limit.acknowledged(10, age=0.050, waited=False, now=1.5)
    assert limit.floor == 0.002
    limit.acknowledged(10, age=0.010, waited=False, now=2.1)  # a new period: the last one's kept
    assert limit.floor == 0.002
    limit.acknowledged(10, age=0.012, waited=False, now=3.2)  # and the one before is forgotten
    assert limit.floor == 0.010


def test_the_time_limit_grows_only_while_the_sender_waits_and_batches_come_back_early():
    limit = InFlightTimeLimit(0.020)
    limit.limit = 4_000
    limit.acknowledged(100, age=0.001, waited=False, now=1.0)
    assert limit.limit == 4_000  # the window was not what held the sender back
    limit.acknowledged(100, age=0.001, waited=True, now=1.001)
    assert limit.limit == 5_001
    limit.acknowledged(100, age=0.015, waited=True, now=1.002)  # past half the target: holds
    assert limit.limit == 5_001


def test_the_time_limit_never_drops_below_its_minimum_and_halves_before_any_rate_is_known():
    limit = InFlightTimeLimit(0.020)
    limit.limit = 10_000
    limit.acknowledged(10, age=0.001, waited=False, now=5.0)
    limit.acknowledged(10, age=1.0, waited=False, now=5.001)  # no rate yet: halve
    assert limit.limit == 5_000
    limit.acknowledged(10, age=1.0, waited=False, now=5.5)  # 30 tuples in 0.5 s: 0.6 tuples
    assert limit.limit == MIN_IN_FLIGHT_TUPLES


def test_a_window_sized_by_time_blocks_at_its_tuple_limit_and_reports_it():
    # a target far above the test's waits: the ack below comes back early
    window = SendWindow(batches=32, max_bytes=1 << 20, address="peer", target_seconds=60.0)
    assert window.time_limited_tuples == 0  # nothing measured yet
    assert window.time_limit is not None
    window.time_limit.limit = 1_500
    window.add(lambda seq: "a", 1, tuples=1_000)
    window.add(lambda seq: "b", 1, tuples=1_000)  # goes out: 1,000 in flight is below the limit
    blocked = threading.Thread(target=window.add, args=(lambda seq: "c", 1, 1_000), daemon=True)
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive() and len(window) == 2  # 2,000 tuples in flight, 1,500 allowed
    window.ack(1)
    blocked.join(5)
    assert not blocked.is_alive() and window.unacked_tuples == 2_000 and window.waits == 1
    assert window.time_limited_tuples == 1_876  # it waited and the ack came back early: grown
    assert SendWindow(batches=4, max_bytes=100, address="peer").time_limit is None  # target 0


def test_a_window_full_by_its_tuple_limit_needs_no_ack_asked_for():
    """Receivers acknowledge every ACK_TUPLES tuples: a window held at its tuple limit (never
    below that) gets an acknowledgement without asking for one on every batch."""
    assert MIN_IN_FLIGHT_TUPLES >= ACK_TUPLES
    window = SendWindow(batches=32, max_bytes=1 << 20, address="peer", target_seconds=0.020)
    assert window.time_limit is not None
    window.time_limit.limit = MIN_IN_FLIGHT_TUPLES
    window.add(lambda seq: "a", 1, tuples=2 * MIN_IN_FLIGHT_TUPLES)
    assert not window.full  # not full by count or credit: no ack asked for


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


def test_waits_for_room_are_counted_once_per_waiting_batch_with_their_time():
    window = SendWindow(batches=2, max_bytes=10, address="peer")
    window.add(lambda seq: "a", 4, tuples=3)
    window.add(lambda seq: "b", 5, tuples=2)  # there was room: not a wait
    assert (window.waits, window.wait_seconds) == (0, 0.0)
    assert (window.unacked_tuples, window.unacked_bytes) == (5, 9)
    blocked = _add_in_thread(window, "c", 1)  # a third batch: past the batch limit
    blocked.join(0.2)
    assert blocked.is_alive() and window.waits == 0  # counted once its wait is over
    window.ack(1)
    blocked.join(5)
    assert not blocked.is_alive()
    assert window.waits == 1 and window.wait_seconds > 0
    assert (window.unacked_tuples, window.unacked_bytes) == (2, 6)
    first = window.wait_seconds
    window.ack(0, credit=5)  # the receiver allows more batches: now the bytes bound
    blocked = _add_in_thread(window, "d", 5)  # 6 + 5 > 10
    blocked.join(0.2)
    assert blocked.is_alive()
    window.ack(2)
    blocked.join(5)
    assert not blocked.is_alive()
    assert window.waits == 2 and window.wait_seconds > first
    assert (window.unacked_tuples, window.unacked_bytes) == (0, 6)


class HeldConnection(WindowedConnection):
    """A windowed connection with no sending thread: what it sends stays in flight until acked."""

    def _item(self, sequence: int, packed: bytes) -> bytes:
        return packed


def _snapshot(peer: PeerSnapshot) -> WorkerSnapshot:
    return WorkerSnapshot(
        "t", 0, 2, 1.0, (), (), (peer,), BindingStats(), ReceiveSnapshot(), TransferTotals()
    )


class Observed:
    """What the collector reads of a worker, here one fixed snapshot."""

    def __init__(self, snapshot: WorkerSnapshot) -> None:
        self.user_metrics = UserMetrics()
        self._snapshot = snapshot

    def snapshot(self, feature_sections: bool = True) -> WorkerSnapshot:
        return self._snapshot


def test_a_connection_reports_its_batches_in_flight_and_its_waits_on_metrics_and_in_admin():
    settings = TransportSettings.from_config(Config({"messaging.window.batches": 1}))
    connection = HeldConnection(settings, "t", "peer:1")
    first, second = [(1, b"x" * 10), (2, b"y" * 20)], [(3, b"z" * 30)]
    sizes = [len(packed) for batch in (first, second) for packed, _ in pack_within(batch, 1 << 20)]
    connection.send(first)
    assert (connection.stats().unacked_tuples, connection.stats().unacked_bytes) == (2, sizes[0])
    blocked = threading.Thread(target=connection.send, args=(second,), daemon=True)
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()  # one batch in flight fills a window of messaging.window.batches: 1
    connection.window.ack(1)
    blocked.join(5)
    stats = connection.stats()
    assert (stats.unacked_batches, stats.unacked_tuples, stats.unacked_bytes) == (1, 1, sizes[1])
    assert stats.window_waits == 1 and stats.window_wait_seconds > 0

    snapshot = _snapshot(
        PeerSnapshot(worker=1, transferred_tuples=3, transferred_batches=2, connection=stats)
    )
    registry = CollectorRegistry()
    registry.register(WorkerCollector(Observed(snapshot)))
    labels = {"worker": "0", "peer": "1"}
    assert registry.get_sample_value("tuplemesh_peer_unacked_batches", labels) == 1
    assert registry.get_sample_value("tuplemesh_peer_unacked_tuples", labels) == 1
    assert registry.get_sample_value("tuplemesh_peer_unacked_bytes", labels) == sizes[1]
    assert registry.get_sample_value("tuplemesh_peer_window_waits_total", labels) == 1
    seconds = registry.get_sample_value("tuplemesh_peer_window_wait_seconds_total", labels)
    assert seconds == stats.window_wait_seconds
    # Admin carries the same four numbers, and reads back as they were
    status = snapshot_to_proto(snapshot)
    (peer,) = status.peers
    assert (peer.unacked_tuples, peer.unacked_bytes, peer.window_waits) == (1, sizes[1], 1)
    assert peer.window_wait_seconds == stats.window_wait_seconds
    assert snapshot_from_proto(status).peers[0].connection == stats


def _packed(*pairs: tuple[int, bytes]) -> bytes:
    return next(pack_within(list(pairs), 1 << 20))[0]


def test_batches_join_the_open_one_until_the_sender_takes_it():
    window = SendWindow(batches=4, max_bytes=1 << 20, address="peer")
    assert window.add_packed(_packed((1, b"a")), 1, 1 << 20) == 1
    assert window.add_packed(_packed((2, b"b"), (3, b"c")), 2, 1 << 20) == 1  # joined
    assert (len(window), window.unacked_tuples, window.coalesced) == (1, 3, 1)
    position, item = window.get(1)
    assert position == 1 and unpack_batch(item)[0] == [(1, b"a"), (2, b"b"), (3, b"c")]
    # taken: it is frozen (a resend carries the same bytes), the next batch is one of its own
    assert window.add_packed(_packed((4, b"d")), 1, 1 << 20) == 2
    assert window.get(1) == (1, item) and unpack_batch(window.get(2)[1])[0] == [(4, b"d")]
    assert (window.next_seq, window.coalesced) == (3, 1)


def test_a_batch_joins_only_within_the_message_bytes_the_tuples_and_the_window_bytes():
    one = _packed((1, b"x" * 10))
    window = SendWindow(batches=8, max_bytes=1 << 20, address="peer")
    assert [window.add_packed(one, 1, 2 * len(one)) for _ in range(3)] == [1, 1, 2]  # two fit
    window = SendWindow(batches=8, max_bytes=1 << 20, address="peer")
    assert window.add_packed(one, MOST_COALESCED_TUPLES - 1, 1 << 20) == 1
    assert window.add_packed(one, 1, 1 << 20) == 1  # exactly the most tuples a batch joins to
    assert window.add_packed(one, 1, 1 << 20) == 2
    window = SendWindow(batches=8, max_bytes=2 * len(one) + 1, address="peer")
    assert [window.add_packed(one, 1, 1 << 20) for _ in range(2)] == [1, 1]
    assert window.unacked_bytes == 2 * len(one)
    blocked = threading.Thread(target=window.add_packed, args=(one, 1, 1 << 20), daemon=True)
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive()  # joining never passes the window's bytes: it waits like add
    window.ack(1)
    blocked.join(5)
    assert not blocked.is_alive() and window.next_seq == 3 and window.coalesced == 1


def test_traced_items_and_a_batch_behind_the_open_one_close_it():
    window = SendWindow(batches=8, max_bytes=1 << 20, address="peer")
    window.add_packed(_packed((1, b"a")), 1, 1 << 20)
    assert window.add(lambda seq: (b"traced", {}), 5, 1) == 2  # not packed bytes: its own
    assert window.add_packed(_packed((2, b"b")), 1, 1 << 20) == 3  # 1 is closed, 2 is no batch
    assert window.coalesced == 0


def _held_sender() -> tuple[SendWindow, threading.Thread, list[tuple[int, Any] | None]]:
    """A window with an open batch, and a sending thread that holds it (the pace ends in ten
    minutes) and puts what it takes in the list."""
    window = SendWindow(batches=8, max_bytes=1 << 20, address="peer")
    window.add_packed(_packed((1, b"a")), 1, 1 << 20)
    got: list[tuple[int, Any] | None] = []
    far = time.monotonic() + 600
    sender = threading.Thread(target=lambda: got.append(window.next_to_send(1, lambda: True, None, far)))
    sender.start()
    sender.join(0.2)
    return window, sender, got


def test_the_open_batch_is_held_until_the_pace_passes_or_something_closes_it():
    window, sender, got = _held_sender()
    assert sender.is_alive()  # held: the link sent a message less than the pace ago
    window.add_packed(_packed((2, b"b")), 1, 1 << 20)  # joins while held
    window.add(lambda seq: "behind", 1, 1)  # a batch behind it: the held one goes at once
    sender.join(5)
    assert not sender.is_alive() and got[0] is not None
    assert got[0][0] == 1 and unpack_batch(got[0][1])[0] == [(1, b"a"), (2, b"b")]
    # a pace that passed holds nothing, and an idle link's first batch is never held
    assert window.next_to_send(2, lambda: True, None, time.monotonic() - 1) == (2, "behind")
    window.add_packed(_packed((3, b"c")), 1, 1 << 20)
    assert window.next_to_send(3, lambda: True, None, 0.0)[0] == 3


def test_draining_sends_a_held_batch_at_once():
    window, sender, got = _held_sender()
    assert sender.is_alive()
    drained = threading.Thread(target=window.drain, args=(30.0,), daemon=True)
    drained.start()
    sender.join(5)
    assert not sender.is_alive() and got[0] is not None and got[0][0] == 1
    window.ack(1)
    drained.join(5)
    assert not drained.is_alive()


class _CountingCondition(threading.Condition):
    """A condition that counts its ``notify_all`` calls: how often waiting threads were woken."""

    def __init__(self) -> None:
        super().__init__()
        self.notified = 0

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()


def _paced_sender(
    pace_ends: float,
) -> tuple[SendWindow, _CountingCondition, threading.Thread, list[tuple[int, Any] | None]]:
    """An empty window, and a sending thread that sent a message less than its pace ago and now
    waits for the batch at 1 (the pace ends at ``pace_ends``), putting what it takes in the list."""
    window = SendWindow(batches=8, max_bytes=1 << 20, address="peer")
    window.cond = counting = _CountingCondition()
    got: list[tuple[int, Any] | None] = []
    sender = threading.Thread(
        target=lambda: got.append(window.next_to_send(1, lambda: True, None, pace_ends)), daemon=True
    )
    sender.start()
    eventually(lambda: window._paced_seq == 1, message="the sender waiting out its pace")
    return window, counting, sender, got


def test_a_sender_waiting_out_its_pace_is_not_woken_by_a_batch_it_would_only_hold():
    window, counting, sender, got = _paced_sender(time.monotonic() + 600)
    woken = counting.notified
    window.add_packed(_packed((1, b"a")), 1, 1 << 20)  # the batch it waits for, open: held
    window.add_packed(_packed((2, b"b")), 1, 1 << 20)  # joins it
    assert counting.notified == woken and sender.is_alive() and window.coalesced == 1
    window.add(lambda seq: "behind", 1, 1)  # a batch behind it: the held one goes at once
    sender.join(5)
    assert counting.notified == woken + 1 and not sender.is_alive() and got[0] is not None
    assert got[0][0] == 1 and unpack_batch(got[0][1])[0] == [(1, b"a"), (2, b"b")]


def test_a_sender_waiting_out_its_pace_sends_the_open_batch_once_the_pace_ends():
    pace_ends = time.monotonic() + 0.3
    window, _, sender, got = _paced_sender(pace_ends)
    window.add_packed(_packed((1, b"a")), 1, 1 << 20)
    sender.join(10)
    assert not sender.is_alive() and got[0] is not None and got[0][0] == 1
    assert time.monotonic() >= pace_ends  # it woke by itself, not before the pace ended


def test_a_sender_waiting_out_its_pace_with_nothing_queued_keeps_its_timeout():
    window = SendWindow(batches=8, max_bytes=1 << 20, address="peer")
    # the pace ends in ten minutes, the timeout (an ack probe, say) in 50 ms: nothing came
    assert window.next_to_send(1, lambda: True, 0.05, time.monotonic() + 600) is None


def test_a_sender_waiting_out_its_pace_sends_a_batch_that_cannot_grow_at_once():
    window, _, sender, got = _paced_sender(time.monotonic() + 600)
    window.add(lambda seq: "its own", 1, 1)  # not open to joins: nothing to wait for
    sender.join(5)
    assert not sender.is_alive() and got == [(1, "its own")]


def test_the_receivers_byte_grant_lowers_the_byte_limit_and_one_batch_always_fits():
    window = SendWindow(batches=10, max_bytes=100, address="peer")
    assert (window.granted_bytes, window.byte_limit) == (0, 100)  # no grant heard yet
    window.add(lambda seq: "a", 10)
    window.ack(0, granted_bytes=15)  # no batch acknowledged; the receiver's room shrank
    assert (window.granted_bytes, window.byte_limit) == (15, 15)
    assert window.full  # another batch of 10 would pass 15: the sender asks for an ack at once
    blocked = _add_in_thread(window, "b", 10)  # 10 + 10 > 15
    blocked.join(0.2)
    assert blocked.is_alive()
    window.ack(1, granted_bytes=1)  # a full receiver: a batch at a time, whatever its size
    blocked.join(5)
    assert not blocked.is_alive() and window.unacked_bytes == 10
    window.ack(2, granted_bytes=1000)  # more than the window's own bytes: those bound it
    assert window.byte_limit == 100 and not window.full
    window.ack(2)  # a receiver that grants nothing (no ceiling): the window's bytes again
    assert (window.granted_bytes, window.byte_limit) == (0, 100)


def test_a_granted_limit_keeps_batches_from_joining_the_open_one_past_it():
    window = SendWindow(batches=10, max_bytes=1 << 20, address="peer")
    window.add(lambda seq: "a", 10)
    window.ack(1, granted_bytes=30)
    first = _packed((1, b"x" * 10))
    assert window.add_packed(first, 1, 1 << 20) == 2
    assert window.add_packed(first, 1, 1 << 20) == 2  # joins: within the grant
    joined = window.unacked_bytes
    blocked = threading.Thread(
        target=window.add_packed, args=(_packed((2, b"y" * 30)), 1, 1 << 20), daemon=True
    )
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive() and window.unacked_bytes == joined  # neither joined nor added
    window.ack(2, granted_bytes=30)
    blocked.join(5)
    assert not blocked.is_alive()


class SlowReceiver:
    """on_batch that takes 10 ms a batch, as executors that fall behind; keeps the payloads."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []

    def __call__(self, batch: list[Any]) -> list[int]:
        time.sleep(0.01)  # deliberate: a receiver slower than its sender
        self.payloads.extend(payload for _, payload in batch)
        return []


def _most_in_flight(transport: str, grant: int | None) -> tuple[int, int, list[bytes]]:
    """Send 60 batches of 10 kB to a slow receiver that grants ``grant`` bytes to each sender
    (None: no grant); (most unacknowledged bytes seen once the first ack came, the grant the
    sender last heard, what the receiver got)."""
    conf = Config(
        {
            "messaging.transport": transport,
            "messaging.window.batches": 32,
            "topology.receiver.buffer.size": 32,
            "messaging.coalesce.ms": 0,
            "storm.messaging.netty.min_wait_ms": 20,
        }
    )
    server, client = make_context(transport), make_context(transport)
    server.prepare(conf)
    client.prepare(conf)
    port = free_ports(1)[0]
    receiver = SlowReceiver()
    try:
        server.bind("grant", port, receiver, None, None if grant is None else (lambda senders: grant))
        connection = client.connect("grant", "127.0.0.1", port)
        connection.send([(1, b"0" + b"-" * 10_000)])
        eventually(lambda: connection.stats().unacked_batches == 0, timeout=30)  # the first ack
        most = 0
        for n in range(1, 60):
            connection.send([(1, str(n).encode() + b"-" * 10_000)])
            most = max(most, connection.stats().unacked_bytes)
        eventually(lambda: len(receiver.payloads) == 60, timeout=60)
        heard = connection.stats().granted_bytes
        connection.close()
        return most, heard, receiver.payloads
    finally:
        client.term()
        server.term()


@pytest.mark.parametrize("transport", ["grpc", "zmq"])
def test_a_sender_keeps_no_more_bytes_in_flight_than_its_receiver_grants(transport: str):
    grant = 25_000  # two of these batches, not three
    most, heard, payloads = _most_in_flight(transport, grant)
    assert heard == grant
    assert 10_000 < most <= grant, most
    assert [int(p.split(b"-")[0]) for p in payloads] == list(range(60))  # all of it, in order
    # the control: granting nothing, the same sender runs further ahead of the same receiver
    ungranted, heard, payloads = _most_in_flight(transport, None)
    assert heard == 0 and len(payloads) == 60
    assert ungranted > grant, ungranted


def test_a_window_holds_its_bytes_under_the_worker_ceiling_until_the_peer_acknowledges_them():
    """Unacknowledged batches count against the worker's ceiling on outgoing bytes: an executor
    asking for room waits until an acknowledgement brings them back; what a closed window still
    held is given back once, not again by a late acknowledgement."""
    [(first, _)] = pack_within([(1, b"x" * 30)], 1000)
    [(second, _)] = pack_within([(1, b"y" * 10)], 1000)
    joined = len(first) + len(second)
    budget = ByteBudget(100)
    window = SendWindow(batches=8, max_bytes=1000, address="peer", held=budget)
    window.add(lambda seq: "a", 30)
    window.add_packed(first, 1, most_bytes=1000)
    window.add_packed(second, 1, most_bytes=1000)  # joins the open batch: held too
    assert joined == 50 and (len(window), window.unacked_bytes, budget.used) == (2, 80, 80)
    asked = threading.Thread(target=budget.acquire, args=(60,), daemon=True)
    asked.start()
    asked.join(0.2)
    assert asked.is_alive()  # 80 held + 60 asked for > 100: the executor waits
    assert window.ack(1) == 1 and budget.used == 50  # 30 back: 50 + 60 still too many
    asked.join(0.2)
    assert asked.is_alive()
    assert window.ack(2) == 1  # the joined batch: 50 back, and the executor takes its 60
    asked.join(5)
    assert not asked.is_alive() and budget.used == 60
    window.add(lambda seq: "b", 50)  # a window never waits on the ceiling: the batch is handed over
    assert budget.used == 110
    window.abort()  # 50 unacknowledged: the worker holds them no longer
    assert budget.used == 60
    window.ack(3)  # late: given back already
    assert budget.used == 60 and window.unacked_bytes == 0


def test_a_drained_window_gives_back_what_the_peer_never_acknowledged():
    budget = ByteBudget(0)
    window = SendWindow(batches=8, max_bytes=1000, address="peer", held=budget)
    window.add(lambda seq: "a", 7)
    window.add(lambda seq: "b", 9)
    window.ack(1)
    assert budget.used == 9
    assert window.drain(0.05) == 1  # one batch given up (counted lost by its connection)
    assert budget.used == 0
