"""Checkpointed state: what checkpoints cost a stateful word count, and how long a restore takes.

1. The stateful word count (``examples.stateful_wordcount``'s spout and count bolt, balanced over
   2 worker processes on grpc, state in sqlite) with a checkpoint every second, beside the same
   topology whose checkpoint interval is longer than the run (checkpointing off), in the same
   run, runs alternating; and the same shape without state for scale. Rate: words counted per
   CPU second of both workers in the steady state (on a shared machine the wall-clock rate
   follows the scheduler's share; this follows the runtime's cost), words/s beside it.
   Unthrottled spouts keep every queue full, so a checkpoint's barriers wait behind the backlog:
   every case runs with short queues (``SHORT_QUEUES``), and the trigger-to-commit time of the
   last checkpoint is reported.
2. Restore after a worker death: 2 workers, a stateful bolt task per worker holding ~100k keys,
   committed; one worker is SIGKILLed and started again. Measured from the kill until every
   task of the mesh has restored its state (the rollback), process start included.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench.procstat import cpu_seconds
from bench.records import Record
from examples.stateful_wordcount import ReplayableSentenceSpout, StatefulCountBolt
from examples.wordcount import CountBolt, SplitBolt, expected_counts
from tests.fault.harness import write_config
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.launcher import is_serving
from tuplemesh.state import KeyValueState, ReplayableSpout, StatefulBolt
from tuplemesh.topology import OutputFieldsDeclarer, Topology, TopologyBuilder, Tuple
from tuplemesh.v1 import admin_pb2

SPOUTS, SPLITTERS, COUNTERS = 2, 4, 4
KEY_TASKS = 2
#: Every throughput case runs with short queues. At saturation a barrier waits behind whatever
#: is queued ahead of it: with the default 1024-slot rings no checkpoint commits within a 10 s
#: window, with these one takes 2-3 s, so the window sees checkpoints complete.
SHORT_QUEUES = {"topology.executor.receive.buffer.size": 16, "topology.transfer.buffer.size": 64}


def _repeat() -> int:
    return int(os.environ["STATE_BENCH_REPEAT"])


def stateful() -> Topology:
    """The stateful word count a worker process runs here (``STATE_BENCH_REPEAT`` repeats)."""
    b = TopologyBuilder("bench-state-wordcount")
    b.set_spout("sentences", ReplayableSentenceSpout(_repeat()), parallelism=SPOUTS)
    b.set_bolt("split", SplitBolt(), parallelism=SPLITTERS).shuffle_grouping("sentences")
    b.set_bolt("count", StatefulCountBolt(), parallelism=COUNTERS).fields_grouping("split", ["word"])
    return b.build()


def stateless() -> Topology:
    """The same shape without state: the plain count bolt, no checkpoint protocol at all."""
    b = TopologyBuilder("bench-state-plain")
    b.set_spout("sentences", ReplayableSentenceSpout(_repeat()), parallelism=SPOUTS)
    b.set_bolt("split", SplitBolt(), parallelism=SPLITTERS).shuffle_grouping("sentences")
    b.set_bolt("count", CountBolt(), parallelism=COUNTERS).fields_grouping("split", ["word"])
    return b.build()


class KeySpout(ReplayableSpout):
    """Emits keys ``k<i>`` for its share of ``range(STATE_BENCH_KEYS)``, as fast as it can."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["key"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit
        self.step, self.first = len(context.component_tasks), context.task_index
        self.total = int(os.environ["STATE_BENCH_KEYS"])
        self.next = self.first

    def position(self) -> Any:
        return self.next

    def rewind(self, position: Any) -> None:
        self.next = self.first if position is None else int(position)

    def next_tuple(self) -> None:
        for _ in range(256):
            if self.next >= self.total:
                return
            self.emit([f"k{self.next}"])
            self.next += self.step

    def is_finished(self) -> bool:
        return self.next >= self.total


class KeyBolt(StatefulBolt):
    """Keeps every key it saw in its state; reports how many, and how often it was (re)stored."""

    def init_state(self, state: KeyValueState) -> None:
        self.state = state
        self.inits = getattr(self, "inits", 0) + 1

    def execute(self, tup: Tuple) -> None:
        self.state[tup.values[0]] = 1

    def report(self) -> Any:
        state = getattr(self, "state", None)
        return {"keys": 0 if state is None else len(state), "inits": getattr(self, "inits", 0)}


def keys() -> Topology:
    b = TopologyBuilder("bench-state-keys")
    b.set_spout("keys", KeySpout(), parallelism=KEY_TASKS)
    b.set_bolt("store", KeyBolt(), parallelism=KEY_TASKS).fields_grouping("keys", ["key"])
    return b.build()


def _statuses(mesh: Mesh, reports: bool = False) -> list[admin_pb2.WorkerStatus]:
    request = admin_pb2.GetStatusRequest(include_reports=reports)
    return [mesh.admin(i).GetStatus(request, timeout=10.0) for i in range(len(mesh.ports))]


def _counted(mesh: Mesh) -> int:
    return sum(e.executed for s in _statuses(mesh) for e in s.executors if e.component == "count")


def _committed(mesh: Mesh) -> int:
    return sum(s.checkpoints.committed for s in _statuses(mesh) if s.HasField("checkpoints"))


def _config(directory: Path, interval_ms: int, **extra: Any) -> Path:
    """A config with a fresh sqlite store: every run starts from empty state."""
    run = time.monotonic_ns()
    return write_config(
        directory / f"state-{run}.yaml",
        **{
            "topology.state.backend": "sqlite",
            "topology.state.sqlite.path": str(directory / f"state-{run}.sqlite"),
            "topology.state.checkpoint.interval.ms": interval_ms,
            **extra,
        },
    )


def measure(target: str, config: Path, repeat: int, window: float) -> dict[str, float]:
    """Steady-state words/s of one run on 2 worker processes, words per CPU second of both
    workers (what the runtime costs, whatever share of the machine the run got), and the
    checkpoints committed in the window."""
    mesh = start_mesh(target, 2, config, env={"STATE_BENCH_REPEAT": str(repeat)})
    try:
        time.sleep(1.5)  # warm-up: connections up, the first rollback done, caches hot
        pids = [p.pid for p in mesh.procs]
        count0, committed0, cpu0, t0 = _counted(mesh), _committed(mesh), _cpu(pids), time.monotonic()
        time.sleep(window)
        count1, committed1, cpu1, t1 = _counted(mesh), _committed(mesh), _cpu(pids), time.monotonic()
        if count1 >= sum(expected_counts(repeat).values()):
            raise RuntimeError(f"{target} ended inside the window: raise its repeat")
        durations = [
            s.checkpoints.last_duration_seconds for s in _statuses(mesh) if s.HasField("checkpoints")
        ]
    finally:
        # measured: killed, not drained (a drain would first count the whole backlog the spouts
        # emitted ahead); exactness under kills is what tests/fault proves
        for index in range(len(mesh.procs)):
            mesh.kill(index)
    return {
        "rate": (count1 - count0) / (t1 - t0),
        "per_cpu": (count1 - count0) / (cpu1 - cpu0),
        "checkpoints": committed1 - committed0,
        "duration": max(durations, default=0.0),
    }


def _cpu(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def throughput(directory: Path, quick: bool) -> Record:
    # windows long enough for several checkpoints, each as long as its barriers queue
    repeat, window, runs = (100_000, 8.0, 2) if quick else (250_000, 15.0, 3)
    cases = {
        "on": ("bench.state:stateful", 1000),
        "off": ("bench.state:stateful", 3_600_000),  # longer than the run: no checkpoint taken
        "stateless": ("bench.state:stateless", 1000),
    }
    results: dict[str, list[dict[str, float]]] = {name: [] for name in cases}
    for _ in range(runs):  # alternating, so a load change on the machine hits every case alike
        for name, (target, interval) in cases.items():
            config = _config(directory, interval, **SHORT_QUEUES)
            results[name].append(measure(target, config, repeat, window))

    def median(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    return Record(
        "state",
        "stateful word count, checkpoint every 1 s, 2 workers over grpc, sqlite: words per CPU second",
        "tuples",
        median("on", "per_cpu"),
        {
            "the same with checkpointing off": median("off", "per_cpu"),
            "the same shape without state": median("stateless", "per_cpu"),
        },
        ">= 0.9x checkpointing off",
        {
            "words/s, checkpoints on": round(median("on", "rate")),
            "words/s, checkpoints off": round(median("off", "rate")),
            "words/s, without state": round(median("stateless", "rate")),
            "checkpoints committed per window": median("on", "checkpoints"),
            "last checkpoint's trigger to commit, s (barriers queue behind the backlog)": round(
                median("on", "duration"), 2
            ),
        },
    )


def _key_reports(mesh: Mesh, index: int) -> list[dict[str, int]]:
    status = mesh.admin(index).GetStatus(admin_pb2.GetStatusRequest(include_reports=True), timeout=10.0)
    return list(json.loads(status.reports_json).get("store", {}).values()) if status.reports_json else []


def _wait(condition: Any, timeout: float, what: str) -> float:
    """Poll ``condition`` every 10 ms; the monotonic time it first held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return time.monotonic()
        except Exception:  # a worker not serving yet
            pass
        time.sleep(0.01)
    raise RuntimeError(f"not within {timeout:g} s: {what}")


def restore(directory: Path, quick: bool) -> Record:
    per_task = 100_000
    total = per_task * KEY_TASKS
    mesh = start_mesh("bench.state:keys", 2, _config(directory, 500), env={"STATE_BENCH_KEYS": str(total)})
    try:
        _wait(lambda: all(s.spouts_finished and s.idle for s in _statuses(mesh)), 300, "every key stored")
        before = [_key_reports(mesh, i) for i in range(2)]
        held = [r["keys"] for reports in before for r in reports]
        committed = _committed(mesh)
        _wait(lambda: _committed(mesh) >= committed + 2, 60, "a checkpoint with every key committed")
        inits0 = [r["inits"] for r in _key_reports(mesh, 0)]
        killed = time.monotonic()
        mesh.kill(1)
        mesh.restart(1, wait=False)
        health = mesh.health(1)
        serving = _wait(lambda: is_serving(health), 60, "worker 1 serving")

        def restored() -> bool:
            survivor, restarted = _key_reports(mesh, 0), _key_reports(mesh, 1)
            return (
                [r["inits"] for r in survivor] == [n + 1 for n in inits0]
                and sorted(r["keys"] for r in survivor + restarted) == sorted(held)
                and all(r["inits"] == 1 for r in restarted)
            )

        done = _wait(restored, 60, "every task restored")
    finally:
        mesh.stop()
    took = done - killed
    return Record(
        "state",
        f"restore after a worker death, {min(held):,}-{max(held):,} keys per task (sqlite): "
        "keys restored per second, kill to every task restored",
        "keys",
        sum(held) / took,
        {},
        "<= 2 s from the kill for 100k keys per task",
        {
            "kill -> every task restored, s": round(took, 3),
            "new process serving -> every task restored, s": round(done - serving, 3),
            "keys per task": held,
        },
    )


def run(quick: bool = False) -> list[Record]:
    with tempfile.TemporaryDirectory(prefix="tuplemesh-bench-state-") as tmp:
        directory = Path(tmp)
        return [throughput(directory, quick), restore(directory, quick)]
