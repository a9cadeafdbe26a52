"""Flow control at saturation: what full load does to latency, checkpoints, rescales and memory.

Every figure beside a baseline from the same run (the machine is shared and noisy: read ratios).

1. Latency: const spout -> null bolt on 2 worker processes over grpc, the spouts flat out;
   p50/p99/p999 emit-to-execute of the tuples that crossed workers (``bench.e2e.measure``),
   beside the same topology paced at half the max rate, runs alternating.
2. Checkpoints: the stateful word count (``examples.stateful_wordcount``, sqlite, 2 workers) on
   default settings with the spouts flat out: from starting the workers to the first committed
   checkpoint, against the checkpoint interval, and checkpoints started against committed in a
   window; beside the same topology paced (``PACED`` sentences/s per spout task).
3. Rescale: the same at full load rescaled 2 -> 3 by ``Admin.Rebalance``: the spouts' pause, and
   whether the counts are exact (``Admin.Drain`` afterwards: the counts must be exactly those of
   the sentences before each spout's position); beside the paced live rescale.
4. Memory: worker RSS under a flood of 15 MiB batches from a peer and under a spout of 1 MiB
   tuples (``bench.flood``), against the same worker's idle RSS measured first in the same run.
"""

from __future__ import annotations

import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

from bench import e2e
from bench.flood import MIB, SINK_TASK, TUPLES_PER_BATCH, sink_executed
from bench.records import Record
from examples.wordcount import CORPUS
from tests.fault.harness import (
    SpoutProgress,
    head,
    proc_status,
    reports,
    rescale_pause,
    spouting,
    start_worker,
    wait_settled,
    write_config,
)
from tests.transport.raw_sender import GrpcRawSender
from tests.worker.conftest import Mesh, start_mesh, wait_serving
from tuplemesh.config import Config
from tuplemesh.cpus import own_shares
from tuplemesh.launcher import stop_processes
from tuplemesh.netutil import free_ports
from tuplemesh.serialization import MsgpackSerializer
from tuplemesh.state.coordinator import CHECKPOINT_COUNTER
from tuplemesh.state.stores import open_store
from tuplemesh.v1 import admin_pb2

PART = "flow"
WORDCOUNT = "examples.stateful_wordcount:topology"
WORDCOUNT_NAME = "stateful-wordcount"
#: sentences/s per spout task of the paced baselines (as the rescale benchmark paces them)
PACED = 1000.0
INTERVAL_S = Config({})["topology.state.checkpoint.interval.ms"] / 1000
RSS_TARGET_MIB = 512
#: 15 MiB batches a flooding peer has unacknowledged at most: 240 MiB, more than the receive
#: ceiling and the transport's buffers together, so the ceiling (not this bound) holds it back
UNACKED = 16
BEFORE, AFTER = 2, 3
SENTENCES = len(CORPUS)  # per repeat


def _pct_ms(value: float) -> float:
    return round(value, 3)


#: the half-rate run's baseline: every batch its own stream message (messaging.coalesce.ms 0)
UNCOALESCED = {"TUPLEMESH_MESSAGING_COALESCE_MS": "0"}


def latency(seconds: float, runs: int) -> list[Record]:
    """Full load beside half the max rate, alternating, and the half rate again without
    coalescing (what a busy link's pacing buys), all as ``tuplemesh run`` places its workers
    (each on CPUs of its own where there are enough); and both again with the workers sharing
    every core (``--no-pin-cpus``); medians over ``runs``."""
    full: list[dict[str, Any]] = []
    half: list[dict[str, Any]] = []
    half_uncoalesced: list[dict[str, Any]] = []
    full_shared: list[dict[str, Any]] = []
    half_shared: list[dict[str, Any]] = []
    for _ in range(runs):
        full.append(e2e.measure("grpc", seconds))
        rate = full[-1]["rate"] / 2 / 2  # two spout tasks
        half.append(e2e.measure("grpc", seconds, rate=rate))
        half_uncoalesced.append(e2e.measure("grpc", seconds, rate=rate, env=UNCOALESCED))
        full_shared.append(e2e.measure("grpc", seconds, pin_cpus=False))
        half_shared.append(e2e.measure("grpc", seconds, rate=rate, pin_cpus=False))

    def median(results: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in results)

    extra: dict[str, Any] = {"workers pinned (as tuplemesh run places them here)": own_shares(2) is not None}
    for key in ("p50_ms", "p99_ms", "p999_ms"):
        name = key.removesuffix("_ms")
        f, h = median(full, key), median(half, key)
        extra[f"{name} cross-worker emit-to-execute ms, full load"] = _pct_ms(f)
        extra[f"{name} cross-worker emit-to-execute ms, half rate"] = _pct_ms(h)
        extra[f"{name} full load / half rate"] = round(f / h, 2) if h else None
    extra["batches coalesced, half rate / messaging.coalesce.ms 0"] = (
        f"{sum(r['coalesced_batches'] for r in half)} / "
        f"{sum(r['coalesced_batches'] for r in half_uncoalesced)}"
    )
    for key in ("p50_ms", "p99_ms"):
        name = key.removesuffix("_ms")
        h, u = median(half, key), median(half_uncoalesced, key)
        extra[f"{name} cross-worker ms, half rate, messaging.coalesce.ms 0"] = _pct_ms(u)
        extra[f"{name} half rate: coalescing on / off"] = round(h / u, 2) if u else None
    extra["latency samples, full load / half rate"] = (
        f"{sum(r['latency_samples'] for r in full)} / {sum(r['latency_samples'] for r in half)}"
    )
    extra["worker RSS MB (max), full load"] = round(max(r["max_rss_mb"] for r in full), 1)
    shared: dict[str, Any] = {}
    for key in ("p50_ms", "p99_ms", "p999_ms"):
        name = key.removesuffix("_ms")
        f, h, placed = median(full_shared, key), median(half_shared, key), median(half, key)
        shared[f"{name} cross-worker emit-to-execute ms, full load, sharing cores"] = _pct_ms(f)
        shared[f"{name} cross-worker emit-to-execute ms, half rate, sharing cores"] = _pct_ms(h)
        shared[f"{name} half rate: sharing cores / placed"] = round(h / placed, 2) if placed else None
    for name, runs_of in (("full load", (full_shared, full)), ("half rate", (half_shared, half))):
        cores = [median(r, "cores_per_worker") for r in runs_of]
        shared[f"cores per worker, {name}: sharing cores / placed"] = (
            round(cores[0] / cores[1], 2) if cores[1] else None
        )
    return [
        Record(
            PART,
            "const spout -> null bolt, 2 worker processes over grpc, spouts flat out: executed tuples/s",
            "tuples",
            median(full, "rate"),
            {"the same at half the max rate": median(half, "rate")},
            "cross-worker p99 <= 100 ms at full load, <= 5 ms at half rate",
            extra,
        ),
        Record(
            PART,
            "the same, the workers sharing every core (--no-pin-cpus), spouts flat out: executed tuples/s",
            "tuples",
            median(full_shared, "rate"),
            {"the same, placed as tuplemesh run does": median(full, "rate")},
            "",
            shared,
        ),
    ]


def _wordcount_config(directory: Path, repeat: int, rate: float, **extra: Any) -> Path:
    """The stateful word count on default settings (checkpoint interval, queues, timeouts), with
    a fresh sqlite store."""
    run = time.monotonic_ns()
    return write_config(
        directory / f"flow-{run}.yaml",
        **{
            "wordcount.repeat": repeat,
            "wordcount.rate": rate,
            "topology.state.backend": "sqlite",
            "topology.state.sqlite.path": str(directory / f"flow-{run}.sqlite"),
            **extra,
        },
    )


def _statuses(mesh: Mesh) -> list[admin_pb2.WorkerStatus]:
    request = admin_pb2.GetStatusRequest()
    return [mesh.admin(i).GetStatus(request, timeout=10.0) for i in range(len(mesh.ports))]


def _started(config: Path) -> int:
    """Checkpoints the coordinator started (ids it drew from the store), rollbacks' included."""
    store = open_store(Config.load(config, env={}))
    try:
        return store.counter(WORDCOUNT_NAME, CHECKPOINT_COUNTER)
    finally:
        store.close()


def checkpoint_window(directory: Path, rate: float, window: float, repeat: int) -> dict[str, Any]:
    """Starts the word count and follows its checkpoints for ``window`` s once every worker
    serves; the first commit is timed from the start (process start included)."""
    config = _wordcount_config(directory, repeat, rate)
    started = time.monotonic()
    mesh = start_mesh(WORDCOUNT, 2, config)
    serving = time.monotonic()
    first: float | None = None
    committed = abandoned = 0
    longest = 0.0
    try:
        while time.monotonic() - serving < window:  # a loaded machine may take seconds to start them
            checkpoints = [s.checkpoints for s in _statuses(mesh) if s.HasField("checkpoints")]
            now_committed = sum(c.committed for c in checkpoints)
            if now_committed > committed:
                if first is None:
                    first = time.monotonic() - started
                longest = max([longest, *(c.last_duration_seconds for c in checkpoints)])
            committed, abandoned = now_committed, sum(c.abandoned for c in checkpoints)
            time.sleep(0.1)
        if sum(e.emitted for s in _statuses(mesh) for e in s.executors if e.spout) == 0:
            raise RuntimeError("the spouts emitted nothing in the window")
        started_checkpoints = _started(config)
    finally:
        for index in range(len(mesh.procs)):  # measured: killed, not drained
            mesh.kill(index)
    return {
        "first": first,
        "serving": serving - started,
        "committed": committed,
        "abandoned": abandoned,
        "started": started_checkpoints,
        "longest": longest,
    }


def _checkpoint_figures(r: dict[str, Any]) -> str:
    first = "none" if r["first"] is None else f"{r['first']:.1f} s ({r['first'] / INTERVAL_S:.1f} intervals)"
    return (
        f"first committed {first} after start (workers serving at {r['serving']:.1f} s, the window "
        "runs from then); "
        f"started {r['started']} / committed {r['committed']} / abandoned {r['abandoned']}; "
        f"longest trigger to commit seen {r['longest']:.2f} s"
    )


def checkpoints(directory: Path, window: float, repeat: int) -> Record:
    full = checkpoint_window(directory, 0.0, window, repeat)
    paced = checkpoint_window(directory, PACED, window, repeat)
    return Record(
        PART,
        f"stateful word count, 2 workers, default settings, spouts flat out: checkpoints committed "
        f"per second in the first {window:g} s of serving (interval {INTERVAL_S:g} s)",
        "checkpoints",
        full["committed"] / window,
        {f"the same paced at {PACED:g} sentences/s per spout": paced["committed"] / window},
        f"every checkpoint commits within 2 intervals ({2 * INTERVAL_S:g} s)",
        {
            "full load": _checkpoint_figures(full),
            "paced": _checkpoint_figures(paced),
            "first commit / interval, full load": None
            if full["first"] is None
            else round(full["first"] / INTERVAL_S, 2),
            "longest trigger to commit / interval, full load": round(full["longest"] / INTERVAL_S, 2),
        },
    )


def _mesh() -> Mesh:
    ports = free_ports(2 * AFTER)
    return Mesh(ports[:AFTER], [None] * AFTER, ports[AFTER:], [None] * AFTER)  # type: ignore[list-item]


def rescale_round(directory: Path, rate: float, settle: float, repeat: int = 1_000_000) -> dict[str, Any]:
    """Live rescale 2 -> 3 while the spouts run at ``rate`` (0: flat out; ``repeat`` large enough
    that they never finish): the pause, and (only with ``settle`` > 0) whether the counts are
    exact once the mesh is drained afterwards (allowed ``settle`` s for the backlog)."""
    # Admin.Drain on: how the exactness check stops the spouts where they are
    config = _wordcount_config(directory, repeat, rate, **{"admin.drain.enabled": True})
    mesh = _mesh()
    result: dict[str, Any] = {"pause": None, "exact": None, "error": "", "emitted": 0}
    result.update(call=None, resumed=None, counted=0)
    try:
        for index in range(BEFORE):
            start_worker(mesh, WORDCOUNT, index, BEFORE, config)
        for index in range(BEFORE):
            wait_serving(mesh, index)
        with SpoutProgress([mesh.address(i) for i in range(AFTER)]) as progress:
            _until(lambda: progress.emitting(0, spouting(mesh, BEFORE)), 60)
            time.sleep(2.0)  # a steady flow (and, paced, a few checkpoints) before the change
            before = _statuses(head(mesh, BEFORE))
            result["emitted"] = sum(e.emitted for s in before for e in s.executors if e.spout)
            if any(s.spouts_finished for s in before):
                result["error"] = "the spouts finished before the rescale: raise the repeat"
                return result
            start_worker(mesh, WORDCOUNT, AFTER - 1, AFTER, config)  # waits to be included
            try:
                called = time.monotonic()
                reply = mesh.admin(0).Rebalance(admin_pb2.RebalanceRequest(workers=AFTER), timeout=60)
                result["call"] = time.monotonic() - called
                if not reply.epoch.startswith(f"1/{AFTER}/"):
                    raise RuntimeError(f"rebalanced to epoch {reply.epoch!r}")
                result["pause"] = rescale_pause(mesh, progress, 0, 1, AFTER)
                result["resumed"] = time.monotonic() - called
            except (AssertionError, RuntimeError, grpc.RpcError) as exc:
                result["error"] = f"rescale: {str(exc).splitlines()[0]}"
                return result
        if settle:
            try:
                result["counted"] = _drain_and_check(mesh, settle)
                result["exact"] = True
            except AssertionError as exc:
                result["exact"] = False
                result["error"] = f"after the rescale: {str(exc).splitlines()[0]}"
    finally:
        stop_processes([p for p in mesh.procs if p is not None and p.poll() is None], 60)
    return result


def _drain_and_check(mesh: Mesh, settle: float) -> int:
    """Admin.Drain every worker (the spouts stop where they are, everything queued is counted),
    then the counts must be exactly those of the sentences before each spout's position: every
    sentence counted once across the rescale. The sentences counted."""
    for index in range(len(mesh.ports)):
        # the worker that joined may still be swapping the server it waited with (Admin refuses
        # Drain there) for its own, the port closed in between: drain it once it serves
        wait_serving(mesh, index, timeout=settle)
        mesh.admin(index).Drain(admin_pb2.DrainRequest(), timeout=30)
    wait_settled(mesh, settle, drained=True)
    merged = reports(mesh)
    expected: Counter[str] = Counter()
    sentences = 0
    step = len(merged["sentences"])
    for spout in merged["sentences"]:
        # task i emits sentences i, i + step, ... and its position is the next one it would emit
        per_corpus_index = Counter(
            i % SENTENCES for i in range(spout["position"] % step, spout["position"], step)
        )
        for j, times in per_corpus_index.items():
            expected.update({word: n * times for word, n in Counter(CORPUS[j].split()).items()})
            sentences += times
    counts: dict[str, int] = {}
    for report in merged["count"]:
        assert not counts.keys() & report["counts"].keys(), "a word counted by two tasks"
        counts.update(report["counts"])
    assert counts == dict(expected), "the counts differ from the sentences the spouts emitted"
    return sentences


def _until(condition: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except grpc.RpcError:
            pass  # a worker not serving yet
        time.sleep(0.05)
    raise RuntimeError(f"the spouts did not start emitting within {timeout:g} s")


def rescale(directory: Path, settle: float) -> Record:
    full = rescale_round(directory, 0.0, settle)
    paced = rescale_round(directory, PACED, 0.0)  # only the pause
    extra: dict[str, Any] = {
        "pause at full load, s": None if full["pause"] is None else round(full["pause"], 2),
        f"pause paced at {PACED:g} sentences/s per spout, s": None
        if paced["pause"] is None
        else round(paced["pause"], 2),
        "counts exact after the full-load rescale": full["exact"],
    }
    for name, r in (("full load", full), ("paced", paced)):
        if r["resumed"] is not None:
            extra[f"Rebalance call returned / every spout emitting again, s after the call, {name}"] = (
                f"{r['call']:.2f} / {r['resumed']:.2f}"
            )
    extra["sentences emitted before the rescale, full load"] = full["emitted"]
    extra["sentences counted, drained after the full-load rescale"] = full["counted"]
    for name, r in (("full load", full), ("paced", paced)):
        if r["error"]:
            extra[f"failed, {name}"] = r["error"]
    return Record(
        PART,
        f"stateful word count, default settings, spouts flat out, {BEFORE} -> {AFTER} workers by "
        "Admin.Rebalance: pauses per second (1 / pause)",
        "pauses",
        1 / full["pause"] if full["pause"] else 0.0,
        {"the same paced": 1 / paced["pause"]} if paced["pause"] else {},
        "pause <= 2 s, counts exact",
        extra,
    )


class RssSampler:
    """Peak RSS of some processes, sampled every 50 ms from a thread while in a ``with``."""

    def __init__(self, pids: list[int]) -> None:
        self.pids = pids
        self.peaks = [0] * len(pids)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            for index, pid in enumerate(self.pids):
                self.peaks[index] = max(self.peaks[index], proc_status(pid)[0])
            time.sleep(0.05)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def idle_rss(pids: list[int], seconds: float = 1.0) -> list[int]:
    """Each process's largest RSS over ``seconds`` of doing nothing."""
    with RssSampler(pids) as sampler:
        time.sleep(seconds)
    return sampler.peaks


def _wait_executed(admin: Any, total: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while sink_executed(admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10)) < total:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the sink did not execute {total} flooded tuples within {timeout:g} s")
        time.sleep(0.2)


def peer_flood(directory: Path, seconds: float) -> dict[str, Any]:
    """A peer sends 15 MiB batches into worker 0's gated sink for ``seconds`` (at most
    ``UNACKED`` unacknowledged), then the gate opens and every tuple is executed."""
    gate = directory / f"gate-{time.monotonic_ns()}"
    mesh = start_mesh("bench.flood:topology", 2, env={"FLOOD_GATE": str(gate)})
    admin = mesh.admin(0)
    payload = MsgpackSerializer().serialize(1, 0, ["x" * MIB])
    sender = GrpcRawSender(mesh.ports[0], "flood")  # as a member, at worker 0's epoch
    sent = 0
    try:
        [idle] = idle_rss([mesh.procs[0].pid])
        with RssSampler([mesh.procs[0].pid]) as sampler:
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                acked = max((s for s, _ in sender.read_acks()), default=0)
                if sent - acked >= UNACKED:  # held back: wait (this process's memory stays bounded)
                    time.sleep(0.01)
                    continue
                sent += 1
                sender.send(sent, [(SINK_TASK, payload)] * TUPLES_PER_BATCH)
            flooded = time.monotonic() - start
            gate.touch()
            _wait_executed(admin, sent * TUPLES_PER_BATCH, 180)
        status = admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10)
    finally:
        sender.close()
        mesh.stop()
    return {
        "idle": idle,
        "peak": sampler.peaks[0],
        "bytes": sent * TUPLES_PER_BATCH * MIB,
        "seconds": flooded,
        "ceiling_waits": status.receive_ceiling_waits,
    }


def spout_flood(directory: Path, tuples: int) -> dict[str, Any]:
    """Worker 0's spout emits ``tuples`` 1 MiB tuples to worker 1's sink, once both workers'
    idle RSS was measured; the bytes in flight to worker 1 are sampled meanwhile."""
    go = directory / f"start-{time.monotonic_ns()}"
    mesh = start_mesh(
        "bench.flood:big_topology", 2, env={"FLOOD_START": str(go), "FLOOD_BIG_TUPLES": str(tuples)}
    )
    pids = [p.pid for p in mesh.procs]
    sender, sink = mesh.admin(0), mesh.admin(1)
    in_flight: list[int] = []
    try:
        idle = idle_rss(pids)
        with RssSampler(pids) as sampler:
            start = time.monotonic()
            go.touch()
            deadline = start + 180
            while sink_executed(sink.GetStatus(admin_pb2.GetStatusRequest(), timeout=10)) < tuples:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the sink did not execute {tuples} flooded tuples within 180 s")
                peers = sender.GetStatus(admin_pb2.GetStatusRequest(), timeout=10).peers
                in_flight.extend(p.unacked_bytes for p in peers)  # worker 1, the only peer
                time.sleep(0.2)
            took = time.monotonic() - start
    finally:
        mesh.stop()
    return {
        "idle": idle,
        "peak": sampler.peaks,
        "bytes": tuples * MIB,
        "seconds": took,
        "in_flight": in_flight or [0],
    }


def _mib(value: int) -> float:
    return round(value / MIB, 1)


def memory(directory: Path, flood_seconds: float, big_tuples: int) -> list[Record]:
    peer = peer_flood(directory, flood_seconds)
    spout = spout_flood(directory, big_tuples)
    target = f"peak worker RSS < {RSS_TARGET_MIB} MiB on default settings"
    return [
        Record(
            PART,
            f"a peer floods 15 MiB batches into a stalled sink for {flood_seconds:g} s: bytes/s sent",
            "bytes",
            peer["bytes"] / peer["seconds"],
            {},
            target,
            {
                "receiving worker RSS MiB, idle / peak": f"{_mib(peer['idle'])} / {_mib(peer['peak'])}",
                "peak / idle": round(peer["peak"] / peer["idle"], 2),
                "flooded MiB": _mib(peer["bytes"]),
                "times the ceiling held the flood back": peer["ceiling_waits"],
            },
        ),
        Record(
            PART,
            f"a spout emits {big_tuples} tuples of 1 MiB to a sink on the other worker: bytes/s executed",
            "bytes",
            spout["bytes"] / spout["seconds"],
            {},
            target,
            {
                "sending worker RSS MiB, idle / peak": f"{_mib(spout['idle'][0])} / {_mib(spout['peak'][0])}",
                "sending peak / idle": round(spout["peak"][0] / spout["idle"][0], 2),
                "receiving worker RSS MiB, idle / peak": (
                    f"{_mib(spout['idle'][1])} / {_mib(spout['peak'][1])}"
                ),
                "receiving peak / idle": round(spout["peak"][1] / spout["idle"][1], 2),
                "MiB in flight to the sink's worker, median / max": (
                    f"{_mib(int(statistics.median(spout['in_flight'])))} / {_mib(max(spout['in_flight']))}"
                ),
            },
        ),
    ]


def run(quick: bool = False) -> list[Record]:
    with tempfile.TemporaryDirectory(prefix="tuplemesh-bench-flow-") as tmp:
        directory = Path(tmp)
        return [
            *latency(2.0 if quick else 5.0, 1 if quick else 3),
            checkpoints(directory, 15.0 if quick else 40.0, 1_000_000),
            rescale(directory, 300.0),
            *memory(directory, 5.0 if quick else 15.0, 200 if quick else 600),
        ]
