"""End-to-end benchmark in local mode: word count on 3 in-process workers.

Baseline: the same split-and-count done by one plain Python loop (no queues, no threads): the
CPython ceiling for this work on one core, which the runtime's overhead is measured against.
"""

from __future__ import annotations

from bench.records import Record
from bench.wordcount import plain_loop
from examples import wordcount
from tuplemesh.config import Config
from tuplemesh.worker.interpreter import freeze_startup_objects, tune_interpreter
from tuplemesh.worker.local_cluster import LocalCluster, RunSummary


def run(quick: bool = False) -> list[Record]:
    repeat = 2000 if quick else 10_000
    runs = 1 if quick else 3
    conf = Config({"messaging.transport": "local"})
    off_conf = conf.with_overrides({"metrics.enabled": False})
    tune_interpreter(conf)  # as `tuplemesh run` and worker processes do

    def one_run(run_conf: Config) -> RunSummary:
        cluster = LocalCluster(wordcount.build(repeat=repeat), 3, run_conf)
        freeze_startup_objects(run_conf)
        summary = cluster.run(timeout=600)
        if not summary.matched:
            raise RuntimeError(f"word count benchmark produced a wrong result: {summary.message}")
        return summary

    # metrics on and off alternate, each pair in the other order from the last: on a shared
    # machine whose load drifts, all the "on" runs first and then all the "off" ones measured
    # the drift (0.75x in one run, 1.01x in another)
    results, off_rates = [], []
    for i in range(runs):
        for metrics_on in (True, False) if i % 2 == 0 else (False, True):
            if metrics_on:
                results.append(one_run(conf))
            else:
                off = one_run(off_conf)
                off_rates.append(off.components["split"]["emitted"] / off.seconds)
    results.sort(key=lambda s: s.seconds)
    median = results[len(results) // 2]
    words = median.components["split"]["emitted"]
    sentences = median.components["split"]["executed"]
    baseline = sorted(plain_loop(repeat) for _ in range(runs))[runs // 2]
    metrics_off = sorted(off_rates)[runs // 2]
    return [
        Record(
            "e2e",
            "wordcount 3 local workers: words emitted by split",
            "tuples",
            words / median.seconds,
            {
                "single-loop split+count (no runtime)": baseline,
                "the same with metrics.enabled: false (metrics cost = 1 - ratio)": metrics_off,
            },
            ">= 300k tuples/s through the split bolt",
            {
                "sentences executed by split per second": round(sentences / median.seconds),
                "words counted": median.components["count"]["executed"],
                "seconds (median of runs)": round(median.seconds, 3),
                "result": median.message,
            },
        )
    ]
