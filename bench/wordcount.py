"""Word count on 1 and 2 worker processes over grpc, beside one plain Python loop doing the same work.

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

TARGET = "bench.wordcount:balanced"
#: The same topology on 1 and on 2 workers, with task counts that split evenly over 2 workers
#: (the example's 1 spout and 3 + 3 bolt tasks would give one worker the spout and 2/3 of the
#: counting: a measure of the imbalance, not of the runtime).
SPOUTS, SPLITTERS, COUNTERS = 2, 4, 4


def balanced() -> Topology:
    """The word count a worker process runs here (``WORDCOUNT_REPEAT`` repeats of the corpus)."""
    return wordcount.build(int(os.environ["WORDCOUNT_REPEAT"]), SPOUTS, SPLITTERS, COUNTERS)


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


def measure(workers: int, repeat: int, window: float) -> dict[str, float]:
    """Steady-state words/s of one run on ``workers`` processes, and each worker's cores used."""
    topology = wordcount.build(repeat)
    cluster = ProcessCluster(
        TARGET, topology, workers, transport="grpc", env={"WORDCOUNT_REPEAT": str(repeat)}
    )
    try:
        cluster.start()
        cluster.wait_serving(60)
        time.sleep(1.0)  # warm-up: connections up, rings and caches hot
        pids = [p.pid for p in cluster.procs]
        count0, cpu0, t0 = _counted(cluster), [_cpu_seconds(p) for p in pids], time.monotonic()
        time.sleep(window)
        count1, cpu1, t1 = _counted(cluster), [_cpu_seconds(p) for p in pids], time.monotonic()
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
    return {
        "rate": (count1 - count0) / elapsed,
        **{f"worker {i} cores": (b - a) / elapsed for i, (a, b) in enumerate(zip(cpu0, cpu1, strict=True))},
    }


def run(quick: bool = False) -> list[Record]:
    repeat, window, runs = (15_000, 2.0, 1) if quick else (40_000, 4.0, 3)
    two = [measure(2, repeat, window) for _ in range(runs)]
    one = [measure(1, repeat, window) for _ in range(runs)]
    loop = statistics.median(plain_loop(2000) for _ in range(runs))
    two_rate = statistics.median(r["rate"] for r in two)
    one_rate = statistics.median(r["rate"] for r in one)
    median_two = sorted(two, key=lambda r: r["rate"])[len(two) // 2]
    return [
        Record(
            "wordcount",
            "word count on 2 worker processes over grpc: words counted",
            "tuples",
            two_rate,
            {"single-loop split+count (no runtime)": loop, "the same on 1 worker process": one_rate},
            ">= 0.25x the single loop (stretch 0.5x); >= 1.7x 1 worker",
            {
                **{k: round(v, 2) for k, v in median_two.items() if k != "rate"},
                "1 worker's cores": round(
                    sorted(one, key=lambda r: r["rate"])[len(one) // 2]["worker 0 cores"], 2
                ),
            },
        )
    ]
