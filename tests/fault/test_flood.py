"""A peer floods a worker with large batches faster than its bolt takes them: the worker's memory
stays under its ceiling on received bytes (``topology.receive.max.bytes``), the sender is held
back instead, and every tuple is executed exactly once. Real worker processes, over grpc and zmq;
the flood comes from a hand-framed sender, which ignores congestion reports as a careless peer
would, so only the ceiling holds it."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from tests.fault.harness import proc_status
from tests.helpers import eventually
from tests.transport.raw_sender import GrpcRawSender, ZmqRawSender
from tests.worker.conftest import start_mesh
from tuplemesh.config import Config
from tuplemesh.serialization import MsgpackSerializer
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.v1 import admin_pb2

MIB = 1024 * 1024
CEILING = Config({})["topology.receive.max.bytes"]  # the default: the flood meets default settings
BATCHES = 60  # 900 MiB, several times the ceiling
TUPLES_PER_BATCH = 15  # of 1 MiB each: 15 MiB batches, near the largest message a transport takes
#: The sink task on worker 0: components are numbered in name order ("idle" 1, "sink" 2 and 3)
#: and executors placed round-robin (idle -> 0, sink task 2 -> 1, sink task 3 -> 0).
SINK_TASK = 3


class IdleSpout(Spout):
    """Emits nothing: the flood comes from outside."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["blob"])

    def next_tuple(self) -> None:
        return None


class SlowSink(Bolt):
    """Takes a millisecond per tuple: far slower than the flood arrives."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        time.sleep(0.001)  # deliberate: the slow consumer
        self.count += 1


def topology() -> Any:
    b = TopologyBuilder("flood")
    b.set_spout("idle", IdleSpout())
    b.set_bolt("sink", SlowSink(), parallelism=2).shuffle_grouping("idle")
    return b.build()


def _sink_executed(status: admin_pb2.WorkerStatus) -> int:
    return sum(e.executed for e in status.executors if e.component == "sink")


@pytest.mark.parametrize("transport", ["grpc", "zmq"])
def test_a_flood_of_15_mib_batches_stays_under_the_ceiling_and_loses_nothing(transport: str):
    env = {"TUPLEMESH_MESSAGING_TRANSPORT": transport}
    mesh = start_mesh("tests.fault.test_flood:topology", 2, env=env)
    admin = mesh.admin(0)
    payload = MsgpackSerializer().serialize(1, 0, ["x" * MIB])
    sender = (GrpcRawSender if transport == "grpc" else ZmqRawSender)(mesh.ports[0], "flood")
    samples: list[tuple[int, int]] = []  # (worker RSS, bytes held as the worker reports them)
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            status = admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10)
            samples.append((proc_status(mesh.procs[0].pid)[0], status.receive_held_bytes))
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        for sequence in range(1, BATCHES + 1):  # as fast as the transport takes them
            sender.send(sequence, [(SINK_TASK, payload)] * TUPLES_PER_BATCH)
        total = BATCHES * TUPLES_PER_BATCH
        eventually(
            lambda: _sink_executed(admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10)) >= total,
            timeout=180,
            interval=0.2,
            message="every flooded tuple executed",
        )
        eventually(lambda: max((s for s, _ in sender.read_acks()), default=0) == BATCHES, timeout=30)
        status = admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10)
    finally:
        done.set()
        sampler.join(15)
        sender.close()
        codes = mesh.stop()
    assert codes == [0, 0]
    assert _sink_executed(status) == total  # each tuple once: nothing dropped, nothing twice
    assert status.receive_held_bytes_capacity == CEILING
    assert status.receive_ceiling_waits > 0  # the ceiling, not luck, held the flood back
    batch_bytes = TUPLES_PER_BATCH * len(payload)
    assert max(held for _, held in samples) <= CEILING + batch_bytes
    # 900 MiB of batches were sent; unbounded, the worker grew by about that much (several GiB
    # in a longer flood). Bounded: the ceiling, a batch or two being decoded or in the transport's
    # hands (zmq's pipe is bounded by the ceiling too), and the interpreter.
    peak = max(rss for rss, _ in samples)
    assert peak < 512 * MIB, f"worker RSS reached {peak // MIB} MiB under a {CEILING // MIB} MiB ceiling"
