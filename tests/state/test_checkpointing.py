"""Checkpoints of a running topology in one process (local transport, memory-backed stores):
under backpressure, through a store outage, and restoring state that is not there."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from examples.stateful_wordcount import ReplayableSentenceSpout, StatefulCountBolt
from examples.wordcount import SplitBolt, expected_counts
from tests.helpers import eventually
from tuplemesh.config import Config
from tuplemesh.errors import ConfigError
from tuplemesh.state import MemoryStore, PartKey, StoreUnavailable
from tuplemesh.state.alignment import AlignedInput
from tuplemesh.state.codec import encode_value
from tuplemesh.state.coordinator import ATTEMPT_COUNTER
from tuplemesh.state.feature import Checkpoints
from tuplemesh.state.protocol import COORDINATOR
from tuplemesh.topology import BasicBolt, Topology, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster
from tuplemesh.worker.worker import Worker

_names = itertools.count()


class SlowCountBolt(StatefulCountBolt):
    """Counts like the example's bolt, 0.2 ms per word: its inbox fills and upstream blocks."""

    def execute(self, tup: Tuple) -> None:
        time.sleep(0.0002)  # deliberate: the slow consumer this test is about
        super().execute(tup)


class FlakyStore(MemoryStore):
    """A process-wide memory store that can be switched off (every write refused)."""

    down = threading.Event()

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> MemoryStore:
        return _FLAKY

    def put_part(self, key: PartKey, checkpoint: int, blob: bytes) -> None:
        if self.down.is_set():
            raise StoreUnavailable("redis at 10.0.0.9:6379: connection refused")
        super().put_part(key, checkpoint, blob)

    def commit(self, topology: str, checkpoint: int) -> None:
        if self.down.is_set():
            raise StoreUnavailable("redis at 10.0.0.9:6379: connection refused")
        super().commit(topology, checkpoint)


_FLAKY = FlakyStore()


def word_count(repeat: int, count_bolt: Any = None) -> Topology:
    builder = TopologyBuilder(f"stateful-{next(_names)}")
    builder.set_spout("sentences", ReplayableSentenceSpout(repeat), parallelism=2)
    builder.set_bolt("split", SplitBolt(), parallelism=2).shuffle_grouping("sentences")
    builder.set_bolt("count", count_bolt or StatefulCountBolt(), parallelism=2).fields_grouping(
        "split", ["word"]
    )
    return builder.build()


def start(clusters: list[LocalCluster], topology: Topology, workers: int = 2, **conf: Any) -> LocalCluster:
    cluster = LocalCluster(topology, workers, {"messaging.transport": "local", **conf})
    clusters.append(cluster)
    cluster.start()
    return cluster


def coordinator(cluster: LocalCluster) -> dict[str, Any]:
    for worker in cluster.workers:
        reports = worker.live_reports().get(COORDINATOR)
        if reports:
            return dict(next(iter(reports.values())))
    raise AssertionError("no coordinator task")


def aligned_inputs(worker: Worker) -> list[AlignedInput]:
    """The barrier alignment of each of the worker's bolt executors that aligns."""
    checkpoints = worker.features["checkpoints"]
    assert isinstance(checkpoints, Checkpoints)
    return list(checkpoints.aligned.values())


def counts(cluster: LocalCluster) -> Counter[str]:
    merged: Counter[str] = Counter()
    for worker in cluster.workers:
        for report in worker.live_reports().get("count", {}).values():
            merged.update(report["counts"])
    return merged


def test_a_checkpoint_taken_while_a_bolt_is_backpressured_completes(clusters: list[LocalCluster]):
    # One worker: with the local transport (no congestion reports) and queues this small, two
    # workers feeding each other through blocking puts would stall with or without checkpoints.
    cluster = start(
        clusters,
        word_count(2000, SlowCountBolt()),
        workers=1,
        **{
            "topology.state.checkpoint.interval.ms": 50,
            # small queues: a barrier waits behind at most a few hundred words
            "topology.executor.receive.buffer.size": 4,
            "topology.producer.batch.size": 16,
            "topology.executor.send.buffer.size": 64,
        },
    )

    def count_inbox_full() -> bool:
        return any(
            q.name.startswith("inbox:count") and q.depth == q.capacity
            for snapshot in cluster.snapshots()
            for q in snapshot.queues
        )

    def held_back_seconds() -> float:
        """How long the count bolt's producers have waited for room in its inbox so far (it
        grows while one waits: a look at the depth could fall between a take and a refill)."""
        return sum(
            q.producer_wait_seconds
            for snapshot in cluster.snapshots()
            for q in snapshot.queues
            if q.name.startswith("inbox:count")
        )

    eventually(count_inbox_full, timeout=20, message="the count bolt's inbox is full")
    before, held_back = coordinator(cluster)["committed"], held_back_seconds()
    eventually(lambda: coordinator(cluster)["committed"] >= before + 2, timeout=30)
    # still backpressured: the checkpoints completed through it
    assert held_back_seconds() > held_back
    assert not all(s.spouts_finished for s in cluster.snapshots())


def test_checkpoints_pause_while_the_store_is_down_and_nothing_checkpointed_is_lost(
    clusters: list[LocalCluster], caplog: pytest.LogCaptureFixture
):
    repeat = 150
    topology = word_count(repeat)
    cluster = start(
        clusters,
        topology,
        **{
            "topology.state.backend": "tests.state.test_checkpointing:FlakyStore",
            "topology.state.checkpoint.interval.ms": 30,
            "wordcount.rate": 600,
        },
    )
    eventually(lambda: coordinator(cluster)["committed"] >= 2, timeout=20)
    FlakyStore.down.set()
    try:
        eventually(lambda: coordinator(cluster)["abandoned"] >= 2, timeout=20)
        committed = coordinator(cluster)["committed"]
        emitted = sum(e.emitted for s in cluster.snapshots() for e in s.executors if e.spout)
        eventually(
            lambda: (
                sum(e.emitted for s in cluster.snapshots() for e in s.executors if e.spout) > emitted + 50
            ),
            timeout=20,
            message="the spouts keep emitting while the store is down",
        )
        assert coordinator(cluster)["committed"] == committed
    finally:
        FlakyStore.down.clear()
    eventually(lambda: coordinator(cluster)["committed"] >= committed + 2, timeout=20)
    _FLAKY.increment(topology.name, ATTEMPT_COUNTER)  # and then a rollback, to what was stored
    eventually(lambda: coordinator(cluster)["rollbacks"] >= 2, timeout=20)
    assert cluster.run_until_done(60)
    assert counts(cluster) == expected_counts(repeat)
    assert any("connection refused" in r.getMessage() for r in caplog.records)


def test_corrupt_state_for_a_task_stops_it_with_an_error_naming_topology_component_and_task(
    clusters: list[LocalCluster],
):
    topology = word_count(10)
    store = MemoryStore.from_conf({})
    tasks = {"count": (2, 3), "sentences": (4, 5)}  # __checkpoint 1, count 2-3, sentences 4-5, split 6-7
    for task in tasks["sentences"]:
        store.put_part(PartKey(topology.name, "sentences", task), 1, encode_value(task - 4))
    store.put_part(PartKey(topology.name, "count", 2), 1, b"\x93garbage")
    store.commit(topology.name, 1)  # task 3's part is missing altogether
    cluster = start(clusters, topology)

    def restore_errors() -> dict[int, str]:
        return {
            task: aligned.restore_error
            for worker in cluster.workers
            for aligning in aligned_inputs(worker)
            for task, aligned in aligning.tasks().items()
            if aligned.restore_error is not None
        }

    errors = eventually(lambda: len(restore_errors()) == 2 and restore_errors(), timeout=20)
    assert f"topology {topology.name!r}, component 'count', task 2" in errors[2]
    assert "checkpoint 1 is corrupt" in errors[2]
    assert f"topology {topology.name!r}, component 'count', task 3" in errors[3]
    assert "checkpoint 1 holds no state" in errors[3]


def test_state_settings_are_validated_when_the_config_is_built():
    with pytest.raises(ConfigError, match=r"topology\.state\.checkpoint\.interval\.ms"):
        Config({"topology.state.checkpoint.interval.ms": 0})
    with pytest.raises(ConfigError, match=r"topology\.state\.alignment\.buffer\.size"):
        Config({"topology.state.alignment.buffer.size": -1})


class IdCounter(StatefulCountBolt, BasicBolt):
    """Counts each id it sees in its state, acking it (a BasicBolt), 1 ms each: slower than the
    spout, so tuples are queued when the rollback comes."""

    def execute(self, tup: Tuple) -> None:
        time.sleep(0.001)  # deliberate: a backlog for the rollback to drop
        super().execute(tup)


def test_a_spout_that_cannot_rewind_keeps_at_least_once_acking_across_a_rollback(
    clusters: list[LocalCluster],
):
    from tests.fault.topologies import PacedIdSpout

    ids = 3000
    builder = TopologyBuilder(f"at-least-once-{next(_names)}")
    # two spout tasks: a count task switches attempts at the first marker, and what the other
    # spout task sent before its own marker is dropped
    builder.set_spout("ids", PacedIdSpout(), parallelism=2)
    builder.set_bolt("count", IdCounter(), parallelism=2).shuffle_grouping("ids")
    topology = builder.build()
    cluster = start(
        clusters,
        topology,
        **{
            "topology.acker.executors": 1,
            "topology.message.timeout.secs": 30.0,
            "topology.state.checkpoint.interval.ms": 50,
            "fault.ids": ids,
            "fault.rate": 3000.0,
        },
    )
    eventually(lambda: coordinator(cluster)["committed"] >= 2, timeout=20)
    MemoryStore.from_conf({}).increment(topology.name, ATTEMPT_COUNTER)  # a worker "restarted"
    assert cluster.run_until_done(60)
    spouts = [r for worker in cluster.workers for r in worker.live_reports().get("ids", {}).values()]
    assert [r["acked"] for r in spouts] == [ids, ids]  # every id's tree completed: none lost
    dropped = sum(aligned.stale_dropped for worker in cluster.workers for aligned in aligned_inputs(worker))
    assert sum(r["replayed"] for r in spouts) >= dropped  # each dropped tuple was failed and replayed
