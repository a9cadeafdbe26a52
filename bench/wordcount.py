"""Word count on 1 and 2 worker processes over grpc, beside one plain Python loop doing the same work.

Two topologies: the per-tuple word count (``execute``, ``emit``) and the same written against the
batch API (``execute_batch``, ``emit_many``); each is measured and checked the same way.

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

from bench.records import Record
from examples import wordcount
from tuplemesh.launcher import ProcessCluster
from tuplemesh.topology import Topology

TARGETS = {False: "bench.wordcount:balanced", True: "bench.wordcount:balanced_batched"}
#: The same topology on 1 and on 2 workers, with task counts that split evenly over 2 workers
#: (the example's 1 spout and 3 + 3 bolt tasks would give one worker the spout and 2/3 of the
#: counting: a measure of the imbalance, not of the runtime).
SPOUTS, SPLITTERS, COUNTERS = 2, 4, 4
#: The batched topology gets this many times the corpus repeats: it must still be running when
#: the measuring window closes.
BATCHED_WORK = 4


def balanced() -> Topology:
    """The word count a worker process runs here (``WORDCOUNT_REPEAT`` repeats of the corpus)."""
    return wordcount.build(int(os.environ["WORDCOUNT_REPEAT"]), SPOUTS, SPLITTERS, COUNTERS)


def balanced_batched() -> Topology:
    """``balanced`` on the batch API."""
    return wordcount.build(int(os.environ["WORDCOUNT_REPEAT"]), SPOUTS, SPLITTERS, COUNTERS, batched=True)


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


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def measure(workers: int, repeat: int, window: float, batched: bool = False) -> dict[str, float]:
    """Steady-state words/s of one run on ``workers`` processes, and each worker's cores used."""
    topology = wordcount.build(repeat, batched=batched)
    cluster = ProcessCluster(
        TARGETS[batched], topology, workers, transport="grpc", env={"WORDCOUNT_REPEAT": str(repeat)}
    )
    try:
        cluster.start()
        cluster.wait_serving(60)
        time.sleep(1.0)  # warm-up: connections up, rings and caches hot
        pids = [p.pid for p in cluster.procs]
        count0, cpu0, t0 = _counted(cluster), [_cpu_seconds(p) for p in pids], time.monotonic()
        time.sleep(window)
        count1, cpu1, t1 = _counted(cluster), [_cpu_seconds(p) for p in pids], time.monotonic()
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


def _median_run(runs: list[dict[str, float]]) -> dict[str, float]:
    return sorted(runs, key=lambda r: r["rate"])[len(runs) // 2]


def run(quick: bool = False) -> list[Record]:
    repeat, window, runs = (15_000, 2.0, 1) if quick else (40_000, 4.0, 3)
    # per-tuple and batched runs alternate, so a load change on the machine hits both alike
    results: dict[tuple[bool, int], list[dict[str, float]]] = {}
    for _ in range(runs):
        for workers in (2, 1):
            for batched in (False, True):
                work = repeat * BATCHED_WORK if batched else repeat
                results.setdefault((batched, workers), []).append(measure(workers, work, window, batched))
    loop = statistics.median(plain_loop(2000) for _ in range(runs))
    records = []
    for batched, name in ((False, "word count"), (True, "word count on the batch API")):
        two, one = _median_run(results[batched, 2]), _median_run(results[batched, 1])
        baselines = {
            "single-loop split+count (no runtime)": loop,
            "the same on 1 worker process": one["rate"],
        }
        if batched:
            baselines["per-tuple word count, 2 workers"] = _median_run(results[False, 2])["rate"]
        records.append(
            Record(
                "wordcount",
                f"{name} on 2 worker processes over grpc: words counted",
                "tuples",
                two["rate"],
                baselines,
                ">= 0.25x the single loop (stretch 0.5x); >= 1.7x 1 worker",
                {
                    **{k: round(v, 2) for k, v in two.items() if k != "rate"},
                    "1 worker's cores": round(one["worker 0 cores"], 2),
                    "1 worker's words per CPU second": round(one["words per CPU second"]),
                },
            )
        )
    return records
