"""End-to-end benchmark over worker processes: const spout -> null bolt on 2 workers.

Max rate: both spouts emit as fast as they can for a fixed time; the rate is the null bolts'
executed count over that time (read through Admin, as an operator would), with the cross-worker
latency percentiles at that full load (``bench.flow`` puts them beside a half-rate run). Latency:
the same topology paced at half the max rate; p50/p99/p999 of emit-to-execute of the tuples that
crossed from one worker process to the other. Baseline in the same run: the same topology in one
process over the local transport (no network, no serialization for local deliveries).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from typing import Any

from bench.procstat import cpu_seconds, rss_mb
from bench.records import Record
from tuplemesh.launcher import ProcessCluster
from tuplemesh.v1 import admin_pb2

TARGET = "bench.topologies:build"


#: A light load, far below the max (tuples/s, both spouts): what the runtime costs while its
#: threads mostly wait for work.
LIGHT_RATE = 20_000


def _executed(cluster: ProcessCluster) -> int:
    return sum(e.executed for s in cluster.statuses() for e in s.executors if e.component == "null")


def _drop_samples(cluster: ProcessCluster) -> None:
    """Ask every worker for its bolts' reports, which empties their latency samples."""
    for stub in cluster.admins:
        stub.GetStatus(admin_pb2.GetStatusRequest(include_reports=True))


def measure(
    transport: str,
    seconds: float,
    rate: float = 0.0,
    workers: int = 2,
    *,
    target: str = TARGET,
    env: dict[str, str] | None = None,
    config_path: str | None = None,
    pin_cpus: bool | None = None,
) -> dict[str, Any]:
    os.environ["BENCH_RATE"] = str(rate)
    from bench.topologies import build

    cluster = ProcessCluster(
        target, build(), workers, transport=transport, env=env, config_path=config_path, pin_cpus=pin_cpus
    )
    try:
        cluster.start()
        cluster.wait_serving(60)
        time.sleep(1.0)  # warm up
        _drop_samples(cluster)  # the warm-up's
        if os.environ.get("BENCH_DROP_TWICE", "1") == "1":
            # and those the first drop delayed: it sorts every warm-up sample in the worker, a C
            # call holding the worker's GIL for milliseconds, which no tuple of a real run waits for
            time.sleep(0.2)
            _drop_samples(cluster)
        pids = [p.pid for p in cluster.procs]
        cpu_before = [cpu_seconds(pid) for pid in pids]
        start_count, start = _executed(cluster), time.monotonic()
        time.sleep(seconds)
        end_count, end = _executed(cluster), time.monotonic()
        cpu_used = [cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)]
        latencies: list[float] = []
        coalesced = 0
        for status in cluster.statuses(include_reports=True):
            for report in json.loads(status.reports_json).get("null", {}).values():
                latencies.extend(report["latencies"])
            coalesced += sum(peer.coalesced_batches for peer in status.peers)
        rss = [rss_mb(p.pid) for p in cluster.procs]
    finally:
        cluster.stop()
    latencies.sort()

    def pct(q: float) -> float:
        return (
            latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")
        )

    return {
        "rate": (end_count - start_count) / (end - start),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "p999_ms": pct(0.999),
        "latency_samples": len(latencies),
        "coalesced_batches": coalesced,
        "max_rss_mb": max(rss),
        # what each worker process used, on average: below full load, the cost of waiting for work
        "cores_per_worker": sum(cpu_used) / len(cpu_used) / (end - start),
    }


def slow_consumer(seconds: float) -> dict[str, Any]:
    """Spouts at full speed into bolts that cannot keep up, for ``seconds``: RSS must stay flat."""
    from bench.topologies import build_slow

    cluster = ProcessCluster("bench.topologies:build_slow", build_slow(), 2, transport="grpc")
    samples: list[float] = []
    try:
        cluster.start()
        cluster.wait_serving(60)
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            samples.append(max(rss_mb(p.pid) for p in cluster.procs))
            time.sleep(1.0)
        cluster.check_alive()
        executed = sum(e.executed for s in cluster.statuses() for e in s.executors if e.component == "slow")
        emitted = sum(e.emitted for s in cluster.statuses() for e in s.executors if e.component == "const")
    finally:
        cluster.stop()
    return {
        "rss_first_mb": samples[0],
        "rss_max_mb": max(samples),
        "rss_last_mb": samples[-1],
        "executed": executed,
        "emitted": emitted,
    }


def run(quick: bool = False) -> list[Record]:
    seconds = 2.0 if quick else 5.0
    runs = 1 if quick else 3
    grpc_runs = [measure("grpc", seconds) for _ in range(runs)]
    grpc_max = statistics.median(r["rate"] for r in grpc_runs)
    zmq_max = statistics.median(measure("zmq", seconds)["rate"] for _ in range(runs))
    local_max = statistics.median(measure("local", seconds, workers=1)["rate"] for _ in range(runs))
    paced = measure("grpc", seconds, rate=grpc_max / 2 / 2)  # two spout tasks share the half rate
    light = measure("grpc", seconds, rate=LIGHT_RATE / 2)
    full_cores = statistics.median(r["cores_per_worker"] for r in grpc_runs)
    slow = slow_consumer(10.0 if quick else 60.0)
    return [
        Record(
            "e2e",
            f"slow consumer at full backpressure for {10 if quick else 60} s: executed tuples/s",
            "tuples",
            slow["executed"] / (10.0 if quick else 60.0),
            {},
            "worker RSS < 200 MB with default buffers",
            {
                "worker RSS MB first/max/last": (
                    f"{slow['rss_first_mb']:.1f} / {slow['rss_max_mb']:.1f} / {slow['rss_last_mb']:.1f}"
                ),
                "emitted by spouts (held back by backpressure)": slow["emitted"],
            },
        ),
        Record(
            "e2e",
            "const spout -> null bolt, 2 worker processes over grpc: max",
            "tuples",
            grpc_max,
            {"same topology, 1 process, local transport": local_max},
            ">= 1M tuples/s; cross-worker p99 <= 100 ms at this full load",
            {  # the same percentiles as at half the max rate below, with the spouts flat out
                f"{q} cross-worker emit-to-execute ms at full load (median of runs)": round(
                    statistics.median(r[f"{q}_ms"] for r in grpc_runs), 3
                )
                for q in ("p50", "p99", "p999")
            },
        ),
        Record(
            "e2e",
            "const spout -> null bolt, 2 worker processes over zmq: max",
            "tuples",
            zmq_max,
            {"the same over grpc, this run": grpc_max},
            "within 10% of grpc or better (ratio >= 0.9)",
        ),
        Record(
            "e2e",
            "const spout -> null bolt, 2 worker processes over grpc: at half the max rate",
            "tuples",
            paced["rate"],
            {},
            "p99 <= 5 ms",
            {
                "p50 cross-worker emit-to-execute ms": round(paced["p50_ms"], 3),
                "p99 cross-worker emit-to-execute ms": round(paced["p99_ms"], 3),
                "p999 cross-worker emit-to-execute ms": round(paced["p999_ms"], 3),
                "worker RSS MB (max)": round(paced["max_rss_mb"], 1),
                "cores per worker": round(paced["cores_per_worker"], 3),
            },
        ),
        Record(
            "e2e",
            f"const spout -> null bolt, 2 workers over grpc at {LIGHT_RATE:,} tuples/s: each worker's CPU",
            "CPU seconds",
            light["cores_per_worker"],
            {"the same flat out, this run": full_cores},
            "",
            {
                "p50 cross-worker emit-to-execute ms": round(light["p50_ms"], 3),
                "p99 cross-worker emit-to-execute ms": round(light["p99_ms"], 3),
            },
        ),
    ]
