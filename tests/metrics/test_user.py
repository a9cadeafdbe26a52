"""User metrics: ``context.metrics`` in a running topology, exported on /metrics, and validated."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tests.helpers import ListSpout
from tuplemesh.config import Config
from tuplemesh.errors import TopologyError
from tuplemesh.metrics import WorkerCollector
from tuplemesh.topology import Bolt, Topology, TopologyBuilder, Tuple
from tuplemesh.topology.components import TaskContext
from tuplemesh.topology.user_metrics import UserMetrics
from tuplemesh.worker.local_cluster import LocalCluster

WORDS = ["a", "bb", "ccc", "dddd", "a", "bb"] * 2  # 12 words; lengths 1,2,3,4,1,2 twice


class MeteredBolt(Bolt):
    """Counts words, observes their lengths, and reports itself ready on a gauge."""

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: Any) -> None:
        self.words = context.metrics.counter("words", "Words seen by the bolt.")
        self.lengths = context.metrics.histogram("word_length_chars", "Word lengths.", [1, 3])
        ready = context.metrics.gauge("ready_tasks", "Tasks that ran prepare.")
        ready.set(1)
        assert context.metrics.counter("words", "Words seen by the bolt.") is self.words

    def execute(self, tup: Tuple) -> None:
        self.words.inc()
        self.lengths.observe(len(tup.values[0]))


def topology() -> Topology:
    b = TopologyBuilder("metered")
    b.set_spout("source", ListSpout([[w] for w in WORDS], ["word"]))
    # two executors of two tasks each: one worker sums all four tasks under component=counter
    b.set_bolt("counter", MeteredBolt(), parallelism=2, tasks=4).shuffle_grouping("source")
    return b.build()


@pytest.fixture(scope="module")
def registry() -> Iterator[CollectorRegistry]:
    cluster = LocalCluster(topology(), 1, Config({"messaging.transport": "local"}))
    cluster.start()
    try:
        assert cluster.run_until_done(30.0)
    finally:
        assert cluster.stop()
    registry = CollectorRegistry()
    registry.register(WorkerCollector(cluster.workers[0]))
    yield registry


def sample(registry: CollectorRegistry, name: str, **labels: str) -> Any:
    return registry.get_sample_value(name, {"worker": "0", "component": "counter", **labels})


def test_a_counter_sums_every_task_of_the_component(registry: CollectorRegistry):
    assert sample(registry, "tuplemesh_user_words_total") == len(WORDS)


def test_a_gauge_is_the_sum_of_its_tasks_values(registry: CollectorRegistry):
    assert sample(registry, "tuplemesh_user_ready_tasks") == 4


def test_a_histogram_has_the_given_buckets_over_all_tasks(registry: CollectorRegistry):
    assert sample(registry, "tuplemesh_user_word_length_chars_bucket", le="1.0") == 4  # "a" x4
    assert sample(registry, "tuplemesh_user_word_length_chars_bucket", le="3.0") == 10
    assert sample(registry, "tuplemesh_user_word_length_chars_bucket", le="+Inf") == 12
    assert sample(registry, "tuplemesh_user_word_length_chars_count") == 12
    assert sample(registry, "tuplemesh_user_word_length_chars_sum") == 2 * (1 + 2 + 3 + 4 + 1 + 2)


def test_the_exposition_names_the_metric_with_its_help_and_labels(registry: CollectorRegistry):
    text = generate_latest(registry).decode()
    assert "# HELP tuplemesh_user_words_total Words seen by the bolt." in text
    assert "# TYPE tuplemesh_user_words_total counter" in text
    assert 'tuplemesh_user_words_total{component="counter",worker="0"} 12.0' in text
    assert "# TYPE tuplemesh_user_ready_tasks gauge" in text


def test_components_without_user_metrics_export_none(registry: CollectorRegistry):
    text = generate_latest(registry).decode()
    assert 'component="source"' not in "\n".join(
        line for line in text.splitlines() if line.startswith("tuplemesh_user_")
    )


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("2fast", "'2fast' is not valid"),
        ("words-seen", "'words-seen' is not valid"),
        ("", "'' is not valid"),
        ("words_total", "name it 'words'"),
        ("latency_bucket", "name it 'latency'"),
    ],
)
def test_a_bad_name_is_refused_naming_it_and_the_task(name: str, says: str):
    metrics = UserMetrics().for_task("split", 7)
    with pytest.raises(TopologyError, match="component 'split' task 7") as raised:
        metrics.counter(name, "help")
    assert says in str(raised.value)


def test_one_name_cannot_be_two_metrics_in_a_worker():
    registry = UserMetrics()
    registry.for_task("split", 1).counter("seen", "Seen.")
    registry.for_task("count", 2).counter("seen", "Seen.")  # same definition: one family
    with pytest.raises(TopologyError, match=r"'seen' is already a counter with help 'Seen\.'"):
        registry.for_task("count", 3).gauge("seen", "Seen.")
    with pytest.raises(TopologyError, match=r"cannot also be a counter with help 'Other\.'"):
        registry.for_task("count", 3).counter("seen", "Other.")
    with pytest.raises(TopologyError, match=r"buckets \[1.0, 2.0\]"):
        registry.for_task("count", 3).histogram("size", "Size.", [1, 2])
        registry.for_task("count", 4).histogram("size", "Size.", [1, 5])
    (family,) = [f for f in registry.families() if f.name == "seen"]
    assert [component for component, _ in family.handles] == ["split", "count"]


def test_histogram_buckets_and_help_are_checked():
    metrics = UserMetrics().for_task("split", 1)
    for bad in ([], [2, 1], [1, 1], [1, float("inf")]):
        with pytest.raises(TopologyError, match="strictly increasing"):
            metrics.histogram("size", "Size.", bad)
    with pytest.raises(TopologyError, match="needs a help text"):
        metrics.gauge("depth", " ")


def test_a_counter_refuses_to_go_down():
    counter = UserMetrics().for_task("split", 1).counter("seen", "Seen.")
    counter.inc(2)
    with pytest.raises(ValueError, match=r"inc\(-1\) refused"):
        counter.inc(-1)
    assert counter.value == 2
