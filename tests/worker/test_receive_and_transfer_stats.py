"""The receive path's special messages and the transfer path's loss counts, without a cluster."""

from __future__ import annotations

import logging
import threading
from typing import Any

from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import TransportError
from tuplemesh.transport.base import Capabilities, TaskMessage
from tuplemesh.transport.stats import ConnectionStats
from tuplemesh.worker.receive import ReceivePath
from tuplemesh.worker.transfer import TransferPath


def test_broadcast_goes_to_every_inbox_in_arrival_order():
    first: RingBuffer[Any] = RingBuffer.multi_producer(8)
    second: RingBuffer[Any] = RingBuffer.multi_producer(8)
    receive = ReceivePath(0, {1: first, 2: first, 3: second}, log_interval=0)
    assert receive.on_batch([(1, b"a"), (None, b"all"), (3, b"c")]) == []
    assert list(first.get(0)) == [(1, b"a"), (None, b"all")]
    assert list(second.get(0)) == [(None, b"all"), (3, b"c")]
    assert (receive.received, receive.unknown) == (3, 0)


def test_a_broadcast_with_no_inbox_is_counted_and_its_warning_formats(caplog):
    receive = ReceivePath(4, {}, log_interval=0)
    with caplog.at_level(logging.WARNING):
        assert receive.on_batch([(None, b"all"), (9, b"x")]) == [9]
        assert receive.on_batch([(None, b"all")]) == []
    assert receive.unknown == 3
    assert "worker 4: 2 message(s) for tasks it does not own, e.g. task 9 (2 in total)" in caplog.text
    assert (
        "worker 4: 1 message(s) for tasks it does not own, e.g. a broadcast (no executor here)" in caplog.text
    )


class _HeldConnection:
    """A connection whose ``send`` blocks until released, then refuses (a peer that never
    acknowledges, then a connection aborted by the halting transfer path)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def send(self, batch: list[TaskMessage]) -> None:
        self.entered.set()
        self.release.wait(10)
        raise TransportError("connection closed; batch not accepted")

    def retarget(self, host: str, port: int) -> None:
        raise AssertionError("not moved in this test")

    def abort(self) -> None:
        self.release.set()

    def close(self) -> None:
        self.release.set()

    def stats(self) -> ConnectionStats:
        return ConnectionStats(address="held", state="READY")


class _HeldContext:
    capabilities = Capabilities()

    def __init__(self) -> None:
        self.connection = _HeldConnection()

    def prepare(self, conf: Any) -> None: ...

    def bind(self, *args: Any) -> Any:
        raise AssertionError("the transfer path never binds")

    def connect(
        self,
        topology_id: str,
        host: str,
        port: int,
        on_congestion: Any = None,
        receiver: int = -1,
        epoch: str = "",
        held: Any = None,
    ) -> _HeldConnection:
        return self.connection

    def term(self) -> None: ...


def test_halted_transfer_counts_refused_and_stranded_tuples_exactly(caplog):
    context = _HeldContext()
    ring: RingBuffer[Any] = RingBuffer.multi_producer(16)
    transfer = TransferPath(ring, context, "t", {1: ("127.0.0.1", 7001)}, {1}, 1, 0, False)
    transfer.start()
    ring.put((1, [(5, b"x")] * 3, 0))
    assert context.connection.entered.wait(5)  # the transfer thread is stuck in that send
    ring.put((1, [(5, b"y")] * 2, 0))
    ring.put((1, [(5, b"z")] * 4, 0))
    transfer.halt()  # aborts the connection: the stuck send is refused at once
    assert transfer.join(5)
    transfer.close_connections()
    stats = transfer.stats()
    assert (stats.sent_batches, stats.sent_tuples, stats.lost_tuples, stats.stranded_tuples) == (0, 0, 3, 6)
    assert "transfer thread halted with 6 tuple(s) not sent (lost)" in caplog.text


class _Hops:
    """A HopTracer that records its receive spans; ``fails``: ``receive`` raises."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.started: list[int] = []
        self.ended = 0

    def transfer(self, peer: int, tuples: int, emits: Any) -> Any:
        raise AssertionError("not sending here")

    def receive(self, tuples: int) -> tuple[Any, Any]:
        if self.fails:
            raise RuntimeError("a bug in the tracer")
        self.started.append(tuples)

        def end() -> None:
            self.ended += 1

        return f"context {len(self.started)}", end


def test_a_received_batch_is_one_span_whose_context_its_inbox_batches_carry():
    first: RingBuffer[Any] = RingBuffer.multi_producer(8)
    second: RingBuffer[Any] = RingBuffer.multi_producer(8)
    hops = _Hops()
    receive = ReceivePath(0, {1: first, 3: second}, log_interval=0, max_held_bytes=1000, tracer=hops)
    assert receive.on_batch([(1, b"aa"), (3, b"c"), (1, b"b")]) == []
    assert (hops.started, hops.ended) == ([3], 1)  # one span per received batch, ended once
    assert [first.get(0).trace, second.get(0).trace] == ["context 1", "context 1"]


def test_a_failing_tracer_costs_the_batch_nothing():
    ring: RingBuffer[Any] = RingBuffer.multi_producer(8)
    receive = ReceivePath(0, {1: ring}, log_interval=0, max_held_bytes=100, tracer=_Hops(fails=True))
    for sequence in range(3):  # 60 bytes each: a reservation left behind would hold up the next
        done = threading.Thread(target=receive.on_batch, args=([(1, b"x" * 60)],), daemon=True)
        done.start()
        done.join(10)
        assert not done.is_alive(), "the receive path waits on bytes nobody holds"
        batch = ring.get(sequence)
        assert list(batch) == [(1, b"x" * 60)] and batch.trace is None  # delivered, untraced
        assert receive.reclaim() == 0  # nothing held beyond what the inbox holds (no consumer here)
    assert receive.received == 3
