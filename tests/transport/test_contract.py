"""The contract every plugin keeps beyond moving batches: the special messages (broadcast and
shutdown notice), the sequence-gap rule, and exact ``stats()`` counts."""

from __future__ import annotations

import threading

import grpc
import msgpack
import pytest

from tests.helpers import eventually
from tests.transport.conftest import Harness, Receiver
from tests.transport.raw_sender import SENDER, GrpcRawSender, ZmqRawSender
from tuplemesh.config import Config
from tuplemesh.netutil import free_ports
from tuplemesh.transport import make_context
from tuplemesh.transport.base import Binding, TaskMessage

TOPO = "topo-1"


def test_capabilities_are_declared_by_every_plugin():
    caps = {name: make_context(name).capabilities for name in ("local", "grpc", "zmq")}
    assert caps["local"].in_process and caps["local"].reports_congestion
    assert caps["grpc"].shares_server and caps["grpc"].reports_congestion and not caps["grpc"].in_process
    assert caps["zmq"].reports_congestion and not caps["zmq"].shares_server and not caps["zmq"].in_process


def test_broadcast_and_shutdown_notice(harness: Harness, port: int):
    """A no-task message arrives as task None (not 0); a batch ending with the shutdown notice
    delivers what precedes it, then the binding receives nothing more."""
    rx = Receiver()
    binding = harness.server().bind(TOPO, port, rx)
    conn = harness.client().connect(TOPO, "127.0.0.1", port)
    conn.send([(None, b"to all"), (3, b"x"), (0, b"task zero")])
    conn.send([(4, b"before"), (-1, b"")])
    rx.wait_for(4, 10)
    assert rx.messages == [(None, b"to all"), (3, b"x"), (0, b"task zero"), (4, b"before")]
    stats = eventually(lambda: binding.stats().shutdown_messages == 1 and binding.stats())
    assert stats.received_batches == 2 and stats.received_tuples == 4
    assert stats.broadcast_messages == (None if harness.name == "local" else 1)
    conn.send([(5, b"after")])
    if harness.name == "local":
        # the receive thread ended: the batch waits in the mailbox, delivered to nobody
        assert eventually(lambda: harness.server().pending(TOPO, port) == 1)  # type: ignore[attr-defined]
    else:
        # refused, never acknowledged: the sender keeps it and tries again
        eventually(lambda: conn.stats().sent_batches >= 4, message="the refused batch was not resent")
        assert conn.stats().unacked_batches == 1
    assert len(rx.messages) == 4 and binding.stats().received_batches == 2


def test_stats_count_a_known_exchange_exactly(harness: Harness, port: int):
    batches: list[list[TaskMessage]] = [
        [(1, b"ab"), (2, b"cde")],
        [(1, b"f" * 100)],
        [(3, b""), (3, b"g"), (None, b"h")],
    ]
    rx = Receiver()
    binding = harness.server().bind(TOPO, port, rx)
    conn = harness.client().connect(TOPO, "127.0.0.1", port)
    for batch in batches:
        conn.send(batch)
    rx.wait_for(6, 10)
    network = harness.name != "local"
    framed = sum(len(msgpack.packb(b)) for b in batches) if network else 0
    sent = eventually(lambda: conn.stats().unacked_batches == 0 and conn.stats())
    # A loaded machine can delay an ack past zmq's resend timer: a resend is a transmission of
    # its own, discarded by the receiver as a duplicate, so the exact accounting allows for it.
    resent = sent.resent_batches
    assert (sent.sent_batches - resent, sent.sent_tuples, sent.sent_bytes) == (3, 6, framed)
    assert (sent.lost_on_close, sent.unknown_tasks, sent.retargets) == (0, 0, 0)
    offset = harness.conf["zmq.port.offset"] if harness.name == "zmq" else 0
    assert sent.state == "READY" and sent.address.endswith(f":{port + offset}")
    got = binding.stats()
    assert (got.received_batches, got.received_tuples, got.received_bytes) == (3, 6, framed)
    assert got.received_tuples_from == ({0: 6} if network else {})
    assert got.received_bytes_from == ({0: framed} if network else {})
    assert (got.duplicate_batches, got.rejected_batches, got.rejected_frames, got.sequence_gaps) == (
        resent,
        0,
        0,
        0,
    )
    assert got.broadcast_messages == (1 if network else None)
    assert got.shutdown_messages == 0
    conn.close()
    assert conn.stats().state == "CLOSED"


def test_lost_on_close_counts_every_unacknowledged_tuple(harness: Harness, port: int):
    """Nobody is bound: closing gives up after messaging.close.timeout.secs and counts the loss.
    The local transport loses nothing: its mailbox keeps the batches for a later binding."""
    conf = harness.conf.with_overrides({"messaging.close.timeout.secs": 0.2})
    client = harness.client()
    client.prepare(conf)
    conn = client.connect(TOPO, "127.0.0.1", port)
    conn.send([(1, b"a"), (2, b"b"), (3, b"c")])
    conn.send([(4, b"d")])
    conn.close()
    stats = conn.stats()
    if harness.name == "local":
        assert stats.lost_on_close == 0
        rx = Receiver()
        harness.server().bind(TOPO, port, rx)
        rx.wait_for(4, 10)
    else:
        assert (stats.lost_on_close, stats.unacked_batches, stats.state) == (4, 2, "CLOSED")


def test_retarget_follows_the_peer_and_resends(harness: Harness, port: int):
    """The peer moves to another port: what it never acknowledged goes to the new address."""
    conf = harness.conf.with_overrides({"messaging.close.timeout.secs": 5.0})
    client = harness.client()
    client.prepare(conf)
    conn = client.connect(TOPO, "127.0.0.1", port)  # nobody is bound here
    conn.send([(1, b"waiting")])
    moved = free_ports(1)[0]
    rx = Receiver()
    harness.server().bind(TOPO, moved, rx)
    conn.retarget("127.0.0.1", moved)
    conn.send([(2, b"after")])
    rx.wait_for(1 if harness.name == "local" else 2, 10)
    if harness.name == "local":
        # in-process: the first batch stays in the old port's mailbox (nothing was in flight)
        assert rx.messages == [(2, b"after")]
    else:
        assert rx.messages == [(1, b"waiting"), (2, b"after")]
    assert conn.stats().retargets == 1
    conn.close()


def _raw(plugin: str, port: int) -> GrpcRawSender | ZmqRawSender:
    return GrpcRawSender(port, TOPO) if plugin == "grpc" else ZmqRawSender(port, TOPO)


def _bound(plugin: str, port: int, window: int = 4) -> tuple[Binding, Receiver]:
    context = make_context(plugin)
    # a mesh of SENDER + 1 workers: the raw sender's id is one of its members
    context.prepare(
        Config(
            {
                "messaging.transport": plugin,
                "messaging.window.batches": window,
                "topology.workers": SENDER + 1,
            }
        )
    )
    rx = Receiver()
    return context.bind(TOPO, port, rx), rx


def test_gap_is_neither_delivered_nor_acknowledged_grpc(port: int):
    """grpc: a gap ends the stream; a new stream resending from the missing batch is delivered."""
    binding, rx = _bound("grpc", port)
    first = GrpcRawSender(port, TOPO)
    first.send(1, [(1, b"one")])
    eventually(lambda: first.acks == [(1, False)])
    first.send(3, [(1, b"three")])
    assert first.ended.wait(10) and first.error is not None and first.error.name == "OUT_OF_RANGE"
    assert rx.messages == [(1, b"one")]
    second = GrpcRawSender(port, TOPO)  # the sender resends from its oldest unacknowledged batch
    second.send(2, [(1, b"two")])
    second.send(3, [(1, b"three")])
    eventually(lambda: second.acks == [(2, False), (3, False)])
    assert rx.messages == [(1, b"one"), (1, b"two"), (1, b"three")]
    stats = binding.stats()
    assert (stats.sequence_gaps, stats.received_batches, stats.received_tuples_from) == (1, 3, {SENDER: 3})
    first.close()
    second.close()
    binding.close()


def test_gap_is_neither_delivered_nor_acknowledged_zmq(port: int):
    """zmq: a gap is answered once with a gap ack at the last delivered sequence (the sender
    rewinds); later batches past the gap are refused silently until the missing one comes."""
    binding, rx = _bound("zmq", port)
    raw = ZmqRawSender(port, TOPO)
    raw.send(1, [(1, b"one")])
    eventually(lambda: raw.read_acks() == [(1, False)])
    raw.send(3, [(1, b"three")])
    raw.send(4, [(1, b"four")])
    eventually(lambda: raw.read_acks() == [(1, False), (1, True)])
    for sequence, body in ((2, b"two"), (3, b"three"), (4, b"four")):
        raw.send(sequence, [(1, body)])
    eventually(lambda: len(raw.read_acks()) == 5)
    assert raw.acks == [(1, False), (1, True), (2, False), (3, False), (4, False)]
    assert [p for _, p in rx.messages] == [b"one", b"two", b"three", b"four"]
    stats = binding.stats()
    assert (stats.sequence_gaps, stats.received_batches) == (2, 4)
    raw.close()
    binding.close()


def test_zmq_restarted_receiver_starts_at_the_senders_oldest_batch(port: int):
    """A receiver with no memory of the session takes nothing before ``first_unacked``."""
    binding, rx = _bound("zmq", port)
    raw = ZmqRawSender(port, TOPO)
    raw.send(6, [(1, b"six")], first_unacked=5)
    raw.send(5, [(1, b"five")], first_unacked=5)
    raw.send(6, [(1, b"six")], first_unacked=5)
    eventually(lambda: raw.read_acks() == [(0, True), (5, False), (6, False)])
    assert rx.messages == [(1, b"five"), (1, b"six")]
    assert binding.stats().sequence_gaps == 1
    raw.close()
    binding.close()


@pytest.mark.parametrize("plugin", ["grpc", "zmq"])
def test_a_refused_batch_acknowledges_every_batch_delivered_before_it(plugin: str, port: int):
    """A draining worker refuses a running peer's batch; the ones it delivered before must be
    acknowledged, or the sender resends them to the worker's successor and they count twice."""
    binding, rx = _bound(plugin, port, window=64)  # acknowledges every 16th batch unasked
    raw = _raw(plugin, port)
    for sequence in (1, 2, 3):
        raw.send(sequence, [(1, str(sequence).encode())], ack_requested=False)
    rx.wait_for(3)
    assert raw.read_acks() == []  # delivered, not yet acknowledged
    binding.admit(lambda sender: f"draining; worker {sender} is not")
    raw.send(4, [(1, b"4")], ack_requested=True)
    eventually(lambda: raw.read_acks() == [(3, False)], message=lambda: f"acks {raw.acks}")
    if isinstance(raw, GrpcRawSender):
        assert raw.ended.wait(10) and raw.error is grpc.StatusCode.UNAVAILABLE
    assert rx.messages == [(1, b"1"), (1, b"2"), (1, b"3")]
    assert binding.stats().received_batches == 3
    raw.close()
    binding.close()


@pytest.mark.parametrize("plugin", ["grpc", "zmq"])
def test_resent_batches_are_counted_as_duplicates_and_delivered_once(plugin: str, port: int):
    binding, rx = _bound(plugin, port)
    raw = _raw(plugin, port)
    acks = raw.read_acks
    for sequence in (1, 2, 1, 2):  # a resend after a reconnect repeats what was not acked
        raw.send(sequence, [(1, str(sequence).encode())])
    eventually(lambda: len(acks()) == 4)
    assert [sequence for sequence, _ in acks()] == [1, 2, 2, 2]
    assert rx.messages == [(1, b"1"), (1, b"2")]
    stats = binding.stats()
    assert (stats.duplicate_batches, stats.received_batches, stats.sequence_gaps) == (2, 2, 0)
    raw.close()
    binding.close()


def test_an_ack_probe_acknowledges_what_was_delivered_and_delivers_nothing(port: int):
    """grpc: an empty batch with sequence 0 (a sender that idles with batches it did not ask to
    have acknowledged) is answered with the ack of the last delivered batch; it is no batch."""
    binding, rx = _bound("grpc", port, window=32)  # acknowledges every 8th batch unasked
    raw = GrpcRawSender(port, TOPO)
    raw.probe()  # nothing delivered yet: no ack
    raw.send(1, [(1, b"one")], ack_requested=False)
    raw.send(2, [(1, b"two")], ack_requested=False)
    raw.probe()
    eventually(lambda: raw.acks == [(2, False)])
    raw.send(3, [(1, b"three")])
    eventually(lambda: raw.acks == [(2, False), (3, False)])
    assert rx.messages == [(1, b"one"), (1, b"two"), (1, b"three")]
    stats = binding.stats()
    assert (stats.received_batches, stats.duplicate_batches, stats.sequence_gaps) == (3, 0, 0)
    assert (stats.rejected_batches, stats.rejected_frames) == (0, 0)
    raw.close()
    binding.close()


@pytest.mark.parametrize("plugin", ["grpc", "zmq"])
def test_batches_in_flight_and_waits_for_window_room_are_counted_exactly(plugin: str, port: int):
    """Nobody is bound at first: what is sent stays in flight, a window of 4 batches fills and
    the fifth send waits; once a receiver binds, everything is acknowledged and that one wait is
    counted."""
    conf = Config(
        {
            "messaging.transport": plugin,
            "messaging.window.batches": 4,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
            "messaging.coalesce.ms": 0,  # counts batches through the window
        }
    )
    harness = Harness(plugin, conf)
    try:
        conn = harness.client().connect(TOPO, "127.0.0.1", port)
        batches: list[list[TaskMessage]] = [[(task, b"x" * task)] * task for task in (1, 2, 3, 4)]
        for batch in batches:
            conn.send(batch)
        stats = conn.stats()
        framed = sum(len(msgpack.packb(b)) for b in batches)
        assert (stats.unacked_batches, stats.unacked_tuples, stats.unacked_bytes) == (4, 10, framed)
        assert (stats.window_waits, stats.window_wait_seconds) == (0, 0.0)  # each found room
        fifth = threading.Thread(target=conn.send, args=([(5, b"five")],), daemon=True)
        fifth.start()
        fifth.join(0.3)
        assert fifth.is_alive() and conn.stats().unacked_batches == 4  # waiting for room
        rx = Receiver()
        binding = harness.server().bind(TOPO, port, rx)
        rx.wait_for(11, 30)
        fifth.join(10)
        assert not fifth.is_alive()
        done = eventually(lambda: conn.stats().unacked_batches == 0 and conn.stats())
        assert (done.unacked_tuples, done.unacked_bytes, done.window_waits) == (0, 0, 1)
        assert done.window_wait_seconds > 0
        conn.close()
        binding.close()
    finally:
        harness.close()
