"""What the worker's features cost a bolt executor's loop, per tuple, one thread, no waiting.

A fields-grouped word count bolt (``Count``: one dict update per tuple, the cheapest real bolt,
so the worst case for a wrapper's relative cost) executes batches of 100 local tuples through
``BoltExecutor.on_event``: with no feature, with the registered features but hot keys off
(its default, ``topology.hotkeys.enabled: false``: nothing wraps the loop), with hot keys on, with
one Admin.WatchTuples watch on the bolt (1% of tuples, at most 10 a second) and with tracing on (an
OpenTelemetry SDK provider without exporters: the spans' own cost). Variants run
alternately, ``rounds`` times, each timed in this thread's CPU time (the machine's other load
shows less); the ratio is of medians.

    python -m bench features        (a part of ``make bench``)
    python -m bench.feature_cost [rounds]
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

from bench.records import Record
from tests.worker.wiring import wire
from tuplemesh import tracing
from tuplemesh.config import Config
from tuplemesh.core.feature import FeatureFactory
from tuplemesh.core.feature_spec import registered_features
from tuplemesh.core.markers import Batch
from tuplemesh.hotkeys.settings import ENABLED_KEY, SAMPLE_KEY
from tuplemesh.sampling import Sampling
from tuplemesh.topology import BasicBolt, Fields, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple
from tuplemesh.worker.executor import BoltExecutor

BATCH = 100
BATCHES = 2_000  # 200k tuples per run
SAMPLINGS = (1, 16, 64, 128)
NO_FEATURES = "no features"
KEYS = 1_000  # distinct words, Zipf-ish: word i drawn with weight 1/(i+1)


class Words(Spout):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word"])

    def next_tuple(self) -> None:
        pass


class Count(BasicBolt):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.counts: dict[str, int] = {}

    def execute(self, tup: Tuple) -> None:
        word = tup.values[0]
        self.counts[word] = self.counts.get(word, 0) + 1


def _executor(features: list[FeatureFactory], conf: Config) -> BoltExecutor:
    builder = TopologyBuilder("feature-cost")
    builder.set_spout("words", Words())
    builder.set_bolt("count", Count()).fields_grouping("words", ["word"])
    wired = wire(builder.build(), conf, lambda context: (make(context) for make in features), slots=1024)
    executor = BoltExecutor(wired.spec("count"), wired.wiring)
    executor.on_start()
    return executor


def _watched(features: list[FeatureFactory], conf: Config) -> BoltExecutor:
    """An executor with one watch of what it executes, as Admin.WatchTuples starts it."""
    executor = _executor(features, conf)
    sampling = Sampling()  # the registered one is built inside _executor: this one is at hand
    sampling.attach(executor)
    sampling.watch([executor.name], None, 0.01, 10.0)
    return executor


def _traced(features: list[FeatureFactory], conf: Config) -> BoltExecutor:
    """An executor built while a tracer provider (an SDK one, exporting nowhere) is set."""
    from opentelemetry.sdk.trace import TracerProvider  # the otel extra: only for this variant

    tracing.use_tracer_provider(TracerProvider())
    try:
        return _executor(features, conf)
    finally:
        tracing.use_tracer_provider(None)


def _batches() -> list[Batch]:
    rng = random.Random(7)
    words = [f"w{i}" for i in range(KEYS)]
    weights = [1 / (i + 1) for i in range(KEYS)]
    fields = Fields(["word"])
    out = []
    for _ in range(50):  # reused round-robin: building tuples is not what is measured
        batch = Batch(
            (1, Tuple([w], 0, "words", "default", fields)) for w in rng.choices(words, weights, k=BATCH)
        )
        batch.stamp = 0.0
        out.append(batch)
    return out


def _rate(executor: BoltExecutor, batches: list[Batch], count: int = BATCHES) -> float:
    on_event = executor.on_event
    n = len(batches)
    start = time.thread_time()  # CPU time of this thread: other processes' load does not count
    for i in range(count):
        on_event(batches[i % n], i, False)
    return count * BATCH / (time.thread_time() - start)


def measure(rounds: int = 7, count: int = BATCHES) -> dict[str, list[float]]:
    """Each variant's rates (tuples per CPU second), ``rounds`` times, alternating."""
    base = Config({})
    hot = [spec.build for spec in registered_features().specs if spec.build is not None]
    variants = {
        NO_FEATURES: _executor([], base),
        "features, hot keys off": _executor(hot, base),
        **{
            f"hot keys, 1 batch in {every}": _executor(
                hot,
                base.with_overrides({ENABLED_KEY: True, SAMPLE_KEY: every}),
            )
            for every in SAMPLINGS
        },
        "one watch (1%, 10/s)": _watched(hot, base),
        "tracing on": _traced(hot, base),
    }
    batches = _batches()
    rates: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, executor in variants.items():  # alternating: a load change hits every variant
            rates[name].append(_rate(executor, batches, count))
    return rates


def run(quick: bool = False) -> list[Record]:
    """``python -m bench features``: each variant against no features, in the same run."""
    rates = measure(3, BATCHES // 4) if quick else measure(7)
    baseline = statistics.median(rates[NO_FEATURES])
    default = Config({})[SAMPLE_KEY]
    targets = {
        "features, hot keys off": "nothing wraps the loop (ratio >= 0.95)",
        f"hot keys, 1 batch in {default}": "at the default sampling: costs <= 5% (ratio >= 0.95)",
    }
    return [
        Record(
            "features",
            f"fields-grouped count bolt, batches of {BATCH} local tuples, one thread: {name}",
            "tuples",
            statistics.median(got),
            {"the same executor with no features, this run": baseline},
            targets.get(name, ""),
        )
        for name, got in rates.items()
        if name != NO_FEATURES
    ]


def main(rounds: int = 7) -> int:
    rates = measure(rounds)
    baseline = statistics.median(rates[NO_FEATURES])
    for name, got in rates.items():
        median = statistics.median(got)
        runs = ", ".join(f"{r:,.0f}" for r in got)
        print(f"{name:24s} {median:12,.0f} tuples/s  x{median / baseline:.3f}  (runs: {runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 7))
