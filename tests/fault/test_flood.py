"""Floods of large tuples, faster than the bolt takes them, on default settings: the workers'
memory stays bounded by their ceilings on bytes (``topology.receive.max.bytes`` for what they
received, ``topology.transfer.max.bytes`` for what they queued for others), the senders are held
back instead, and every tuple is executed exactly once. Real worker processes, over grpc and zmq.

A flood from a peer comes from a hand-framed sender, which ignores congestion reports as a
careless peer would, so only the ceiling holds it; a flood from a spout goes through the whole
data path. The flood topologies are in ``bench.flood``, shared with the flow benchmark, which
measures the workers' memory under the same floods."""

from __future__ import annotations

import json
import threading
import time

import grpc
import pytest

from bench.flood import BIG_TUPLES, CEILING, MIB, SINK_TASK, TUPLES_PER_BATCH, sink_executed
from tests.fault.harness import proc_status
from tests.helpers import eventually
from tests.transport.raw_sender import GrpcRawSender, ZmqRawSender
from tests.worker.conftest import start_mesh
from tuplemesh.config import Config
from tuplemesh.serialization import MsgpackSerializer
from tuplemesh.v1 import admin_pb2

BATCHES = 60  # 900 MiB, several times the ceiling


@pytest.mark.parametrize("transport", ["grpc", "zmq"])
def test_a_flood_of_15_mib_batches_stays_under_the_ceiling_and_loses_nothing(transport: str, tmp_path):
    gate = tmp_path / "gate"
    env = {"TUPLEMESH_MESSAGING_TRANSPORT": transport, "FLOOD_GATE": str(gate)}
    mesh = start_mesh("bench.flood:topology", 2, env=env)
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
        # the sink is stalled: the worker fills up to its ceiling, then holds the sender back
        eventually(
            lambda: samples and samples[-1][1] > CEILING - 2 * TUPLES_PER_BATCH * len(payload),
            timeout=60,
            message="the worker holds what it may",
        )
        time.sleep(1.0)  # deliberate: the flood keeps pushing against the full worker meanwhile
        gate.touch()
        eventually(
            lambda: sink_executed(admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10)) >= total,
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
    assert sink_executed(status) == total  # each tuple once: nothing dropped, nothing twice
    assert status.receive_held_bytes_capacity == CEILING
    assert status.receive_ceiling_waits > 0  # the ceiling, not luck, held the flood back
    batch_bytes = TUPLES_PER_BATCH * len(payload)
    assert max(held for _, held in samples) <= CEILING + batch_bytes
    # 900 MiB of batches were sent; unbounded, the worker grew by about that much (several GiB
    # in a longer flood). Bounded: the ceiling, a batch or two being decoded or in the transport's
    # hands (zmq's pipe is bounded by the ceiling too), and the interpreter.
    peak = max(rss for rss, _ in samples)
    assert peak < 512 * MIB, f"worker RSS reached {peak // MIB} MiB under a {CEILING // MIB} MiB ceiling"


@pytest.mark.parametrize("transport", ["grpc", "zmq"])
def test_a_spout_of_1_mib_tuples_keeps_both_workers_bounded_and_loses_nothing(transport: str):
    mesh = start_mesh("bench.flood:big_topology", 2, env={"TUPLEMESH_MESSAGING_TRANSPORT": transport})
    admins = [mesh.admin(0), mesh.admin(1)]
    peaks = [0, 0]
    # the byte limits the sender's window to worker 1 was sized to (by time) while it flooded
    byte_limits: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for index in (0, 1):
                peaks[index] = max(peaks[index], proc_status(mesh.procs[index].pid)[0])
            try:  # a status call late on a loaded machine costs one sample, not the RSS sampling
                peers = admins[0].GetStatus(admin_pb2.GetStatusRequest(), timeout=10).peers
            except grpc.RpcError:
                peers = []
            byte_limits.extend(p.window_limit_bytes for p in peers if p.window_limit_bytes)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        sink = admins[1]
        eventually(
            lambda: sink_executed(sink.GetStatus(admin_pb2.GetStatusRequest(), timeout=10)) >= BIG_TUPLES,
            timeout=180,
            interval=0.2,
            message="every big tuple executed",
        )
        statuses = [a.GetStatus(admin_pb2.GetStatusRequest(include_reports=True), timeout=10) for a in admins]
    finally:
        done.set()
        sampler.join(15)
        codes = mesh.stop()
    assert codes == [0, 0]
    assert sink_executed(statuses[1]) == BIG_TUPLES
    [report] = json.loads(statuses[1].reports_json)["sink"].values()
    assert report == {"distinct": BIG_TUPLES, "twice": 0}  # every number once
    sender = statuses[0]
    assert sender.transfer_held_bytes_capacity == Config({})["topology.transfer.max.bytes"]
    # what was in flight to the slow sink was sized by time, in bytes (the tuple limit's floor,
    # 1,024 tuples, is a gigabyte of these), within the window's own bytes
    window_bytes = Config({})["messaging.window.bytes"]
    assert byte_limits and min(byte_limits) < window_bytes, byte_limits
    assert all(limit >= MIB for limit in byte_limits), byte_limits  # never below its floor
    # 600 MiB went through; unbounded, the sending worker grew by gigabytes in such a flood
    for index, peak in enumerate(peaks):
        assert peak < 512 * MIB, f"worker {index} RSS reached {peak // MIB} MiB"
