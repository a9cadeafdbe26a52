"""Word count on 1 and 2 worker processes over grpc, beside one plain Python loop doing the same work.

Three topologies: the per-tuple word count (``execute``, ``emit``), the same written against the
batch API (``execute_batch``, ``emit_many``: rows) and on columns (``process``, ``emit_columns``);
each is measured and checked the same way.

The rate is words counted per second in the steady state (the count bolts' executed counters read
through Admin twice, a window apart, after a warm-up), so process start-up is left out; each run is
then finished and its counts checked. Baselines in the same run: the single loop (the CPython
ceiling for this work on one core: the runtime's cost is measured against it) and the same topology
on one worker process (scaling: 2 workers should be close to 2x on 2 cores). The CPU each worker
process used during the window is reported: a worker below one core is waiting, not computing.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from collections.abc import Mapping

from bench.procstat import cpu_seconds
from bench.records import Record
from examples import wordcount
from tuplemesh.cpus import own_shares
from tuplemesh.launcher import ProcessCluster
from tuplemesh.topology import Topology

#: The variants: their topology's name in this module, and how they are named in the report.
VARIANTS = {
    "per-tuple": ("balanced", "word count"),
    "batch": ("balanced_batched", "word count on the batch API (rows)"),
    "columnar": ("balanced_columnar", "word count on columns"),
}
#: The same topology on 1 and on 2 workers, with task counts that split evenly over 2 workers
#: (the example's 1 spout and 3 + 3 bolt tasks would give one worker the spout and 2/3 of the
#: counting: a measure of the imbalance, not of the runtime).
SPOUTS, SPLITTERS, COUNTERS = 2, 4, 4
#: Each variant gets this many times the corpus repeats: it must still be running when the
#: measuring window closes, on a quiet machine too (the faster the variant, the more work).
BATCHED_WORK = {"per-tuple": 3, "batch": 6, "columnar": 40}
#: What the columnar word count on 2 workers is also measured with, each against the default
#: (acking off, metrics on): acking on, where each spout batch is one tracked tree, and metrics off.
COSTS = {
    "acking on": {"TUPLEMESH_TOPOLOGY_ACKER_EXECUTORS": "2"},
    "metrics off": {"TUPLEMESH_METRICS_ENABLED": "false"},
}


def balanced() -> Topology:
    """The word count a worker process runs here (``WORDCOUNT_REPEAT`` repeats of the corpus)."""
    return wordcount.build(int(os.environ["WORDCOUNT_REPEAT"]), SPOUTS, SPLITTERS, COUNTERS)


def balanced_batched() -> Topology:
    """``balanced`` on the batch API."""
    return wordcount.build(int(os.environ["WORDCOUNT_REPEAT"]), SPOUTS, SPLITTERS, COUNTERS, batched=True)


def balanced_columnar() -> Topology:
    """``balanced`` on columns."""
    return wordcount.build(int(os.environ["WORDCOUNT_REPEAT"]), SPOUTS, SPLITTERS, COUNTERS, columnar=True)


def _build(variant: str, repeat: int) -> Topology:
    return wordcount.build(repeat, batched=variant == "batch", columnar=variant == "columnar")


def plain_loop(repeat: int) -> float:
    """Words per second split and counted by a single loop (no queues, no threads)."""
    counts: Counter[str] = Counter()
    corpus = wordcount.CORPUS
    start = time.perf_counter()
    words = 0
    for i in range(repeat * len(corpus)):
        for word in corpus[i % len(corpus)].split():
            counts[word] += 1
            words += 1
    return words / (time.perf_counter() - start)


def _counted(cluster: ProcessCluster) -> int:
    return sum(e.executed for s in cluster.snapshots() for e in s.executors if e.component == "count")


def measure(
    workers: int,
    repeat: int,
    window: float,
    variant: str = "per-tuple",
    settings: Mapping[str, str] | None = None,
    pin_cpus: bool | None = None,
) -> dict[str, float]:
    """Steady-state words/s of one run on ``workers`` processes, and each worker's cores used;
    ``settings``: configuration the workers get from their environment (TUPLEMESH_...);
    ``pin_cpus``: each worker on CPUs of its own, as ``tuplemesh run`` places them (None: where
    there are enough), always (True) or never (False: ``--no-pin-cpus``)."""
    topology = _build(variant, repeat)
    target = f"bench.wordcount:{VARIANTS[variant][0]}"
    env = {"WORDCOUNT_REPEAT": str(repeat), **(settings or {})}
    cluster = ProcessCluster(target, topology, workers, transport="grpc", env=env, pin_cpus=pin_cpus)
    try:
        cluster.start()
        cluster.wait_serving(60)
        time.sleep(1.0)  # warm-up: connections up, rings and caches hot
        pids = [p.pid for p in cluster.procs]
        count0, cpu0, t0 = _counted(cluster), [cpu_seconds(p) for p in pids], time.monotonic()
        time.sleep(window)
        count1, cpu1, t1 = _counted(cluster), [cpu_seconds(p) for p in pids], time.monotonic()
        if count1 >= sum(wordcount.expected_counts(repeat).values()):
            raise RuntimeError(f"word count on {workers} worker(s) ended inside the window: raise its repeat")
        if not cluster.wait_done(600):
            raise RuntimeError(f"word count on {workers} worker(s) did not finish")
        reports = cluster.reports()
    finally:
        codes = cluster.stop()
    assert topology.check is not None
    matched, message = topology.check(reports)
    if not matched or any(codes):
        raise RuntimeError(f"word count on {workers} worker(s) went wrong: {message}, exit codes {codes}")
    elapsed = t1 - t0
    cpu = sum(b - a for a, b in zip(cpu0, cpu1, strict=True))
    return {
        "rate": (count1 - count0) / elapsed,
        # words per CPU-second of all workers: on a shared, overloaded machine the rate follows the
        # scheduler's share as much as the runtime's cost; this follows the cost alone
        "words per CPU second": (count1 - count0) / cpu if cpu else 0.0,
        **{f"worker {i} cores": (b - a) / elapsed for i, (a, b) in enumerate(zip(cpu0, cpu1, strict=True))},
    }


def core_bound(two: dict[str, float], one: dict[str, float], cores: int) -> float:
    """The most 2 workers could run at, as a multiple of 1 worker, if they kept all ``cores``
    busy at their measured words per CPU second: above it no scheduling can reach, below it
    the gap is time the workers spent waiting."""
    return cores * two["words per CPU second"] / one["rate"]


def _median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    return sorted(runs, key=lambda r: r["rate"])[len(runs) // 2]


def run(quick: bool = False) -> list[Record]:
    repeat, window, runs = (15_000, 2.0, 1) if quick else (40_000, 4.0, 3)
    # the variants alternate, so a load change on the machine hits them alike; the single loop
    # runs between them, for the same reason
    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    costs: dict[str, list[dict[str, float]]] = {}
    loops = []
    for _ in range(runs):
        for workers in (2, 1):
            for variant in VARIANTS:
                work = repeat * BATCHED_WORK[variant]
                results.setdefault((variant, workers), []).append(measure(workers, work, window, variant))
        columnar_work = repeat * BATCHED_WORK["columnar"]
        for name, settings in COSTS.items():
            costs.setdefault(name, []).append(measure(2, columnar_work, window, "columnar", settings))
        costs.setdefault("sharing cores", []).append(
            measure(2, columnar_work, window, "columnar", pin_cpus=False)
        )
        loops.append(plain_loop(2000))
    loop = statistics.median(loops)
    cores = len(os.sched_getaffinity(0))
    records = []
    for variant, (_, name) in VARIANTS.items():
        two, one = _median_run(results[variant, 2]), _median_run(results[variant, 1])
        baselines = {
            "single-loop split+count (no runtime)": loop,
            "the same on 1 worker process": one["rate"],
        }
        if variant != "per-tuple":
            baselines["per-tuple word count, 2 workers"] = _median_run(results["per-tuple", 2])["rate"]
        if variant == "columnar":
            baselines["batch API (rows), 2 workers"] = _median_run(results["batch", 2])["rate"]
        target = (
            ">= 0.5x the single loop; >= 1.7x 1 worker"
            if variant == "columnar"
            else ">= 0.25x the single loop (stretch 0.5x); >= 1.7x 1 worker"
        )
        records.append(
            Record(
                "wordcount",
                f"{name} on 2 worker processes over grpc: words counted",
                "tuples",
                two["rate"],
                baselines,
                target,
                {
                    **{k: round(v, 2) for k, v in two.items() if k != "rate"},
                    "1 worker's cores": round(one["worker 0 cores"], 2),
                    "1 worker's words per CPU second": round(one["words per CPU second"]),
                    f"2 workers vs 1 at most, all {cores} cores busy at 2 workers' CPU per word": round(
                        core_bound(two, one, cores), 2
                    ),
                },
            )
        )
    columnar = _median_run(results["columnar", 2])["rate"]
    acking, metrics_off = _median_run(costs["acking on"]), _median_run(costs["metrics off"])
    records.append(
        Record(
            "wordcount",
            "word count on columns, 2 workers, acking on (each spout batch one tree): words counted",
            "tuples",
            acking["rate"],
            {"the same with acking off": columnar},
            ">= 0.65x acking off",
            {"words per CPU second": round(acking["words per CPU second"])},
        )
    )
    records.append(
        Record(
            "wordcount",
            "word count on columns, 2 workers, metrics on (the default): words counted",
            "tuples",
            columnar,
            {"the same with metrics.enabled false": metrics_off["rate"]},
            ">= 0.95x metrics off",
            {"words per CPU second, metrics off": round(metrics_off["words per CPU second"])},
        )
    )
    shared = _median_run(costs["sharing cores"])
    records.append(
        Record(
            "wordcount",
            "word count on columns, 2 workers sharing every core (--no-pin-cpus): words counted",
            "tuples",
            shared["rate"],
            {
                "the same, placed as tuplemesh run does (pinned: "
                f"{'yes' if own_shares(2) is not None else 'no'})": columnar,
                "the same on 1 worker process": _median_run(results["columnar", 1])["rate"],
            },
            "",
            {k: round(v, 2) for k, v in shared.items() if k != "rate"},
        )
    )
    return records
