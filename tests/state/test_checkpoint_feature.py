"""Checkpointing as a worker feature: built only for a checkpointed topology, its section names the
tasks being restored and its snapshot field carries the coordinator's counts, and its lifecycle
(an attempt counted at start, the clock on the coordinator's worker, paused at drain, the final
checkpoint of a whole-mesh stop, the clock stopped with the worker) runs through the feature
hooks of real workers."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from examples.stateful_wordcount import ReplayableSentenceSpout, StatefulCountBolt
from examples.wordcount import SplitBolt
from tests.helpers import eventually
from tests.state.test_checkpointing import start
from tests.worker.wiring import wire
from tuplemesh.config import Config
from tuplemesh.core.feature import DrainingFeature
from tuplemesh.core.markers import Batch
from tuplemesh.core.stats import CheckpointSnapshot
from tuplemesh.registry import FEATURES
from tuplemesh.state.coordinator import ATTEMPT_COUNTER
from tuplemesh.state.feature import Checkpoints, feature
from tuplemesh.state.memory import MemoryStore
from tuplemesh.state.on_demand import StopCheckpoint
from tuplemesh.state.protocol import CHECKPOINT_STREAMS, CONTROL_STREAM, COORDINATOR, NO_CHECKPOINT, TRIGGER
from tuplemesh.topology import Fields, Topology, TopologyBuilder, Tuple
from tuplemesh.worker.executor import BoltExecutor, SpoutExecutor
from tuplemesh.worker.local_cluster import LocalCluster
from tuplemesh.worker.worker import Worker

_names = itertools.count()


class Fixed:
    """A chooser that always picks the same task."""

    def __init__(self, task: int) -> None:
        self.task = (task,)

    def choose(self, values: object) -> tuple[int, ...]:
        return self.task


def word_count(repeat: int, *, stateful: bool = True) -> Topology:
    builder = TopologyBuilder(f"checkpoint-feature-{next(_names)}")
    builder.set_spout("sentences", ReplayableSentenceSpout(repeat), parallelism=2)
    builder.set_bolt("split", SplitBolt(), parallelism=2).shuffle_grouping("sentences")
    if stateful:
        builder.set_bolt("count", StatefulCountBolt(), parallelism=2).fields_grouping("split", ["word"])
    return builder.build()


def test_registered_first_and_built_only_for_a_checkpointed_topology():
    assert FEATURES[0].spec == "tuplemesh.state.feature:FEATURE"
    conf = Config({"topology.state.backend": "memory"})
    plain = wire(word_count(1, stateful=False), conf, lambda context: (feature(context),))
    assert plain.features == ()


def test_section_and_snapshot_fields_before_the_first_rollback():
    topology = word_count(1)
    wired = wire(topology, Config({"topology.state.backend": "memory"}), lambda context: (feature(context),))
    (checkpoints,) = wired.features
    assert isinstance(checkpoints, Checkpoints) and isinstance(checkpoints, DrainingFeature)
    assert checkpoints.name == "checkpoints"
    for spec in wired.plan.executors:
        if not wired.plan.topology.components[spec.component].is_spout:
            BoltExecutor(spec, wiring=wired.wiring)  # each offered to the feature, as the worker does
    # no rollback has reached the stateful tasks yet: every one is being restored
    count_tasks = sorted(wired.plan.assignment.component_tasks["count"])
    assert len(count_tasks) == 2
    assert checkpoints.section() == {"restoring": count_tasks}
    assert checkpoints.coordinator_worker == 0
    assert checkpoints.snapshot_fields() == {
        "checkpoints": CheckpointSnapshot(
            attempt=0,
            rollbacks=0,
            committed=0,
            abandoned=0,
            store_errors=0,
            last_committed=NO_CHECKPOINT,
            last_duration_seconds=0.0,
        )
    }
    assert checkpoints.metrics() == ()
    # it counts the start as an attempt, then cannot tick a coordinator without a worker's inject
    with pytest.raises(TypeError, match=r"^worker 0 runs the checkpoint coordinator but was built"):
        checkpoints.start()
    assert MemoryStore.from_conf({}).counter(topology.name, ATTEMPT_COUNTER) == 1
    assert checkpoints.ticker is None


def _checkpoints(worker: Worker) -> Checkpoints:
    found = worker.features["checkpoints"]
    assert isinstance(found, Checkpoints)
    return found


def _tickers() -> list[str]:
    return sorted(t.name for t in threading.enumerate() if t.name.startswith("checkpoint-ticker-"))


def test_the_lifecycle_runs_through_the_feature_hooks_of_real_workers(clusters: list[LocalCluster]):
    cluster = start(clusters, word_count(200), **{"topology.state.checkpoint.interval.ms": 50})
    workers = cluster.workers
    name = workers[0].topology_id
    store = MemoryStore.from_conf({})
    # every worker counted its start as an attempt before its tasks ran
    assert store.counter(name, ATTEMPT_COUNTER) == 2
    features = [_checkpoints(w) for w in workers]
    (home,) = {f.coordinator_worker for f in features}
    coordinating, other = workers[home], workers[1 - home]
    assert COORDINATOR in {e.spec.component for e in coordinating.executors}
    # triggers, barriers and reports never wait on a congested task: every executor sends them
    assert {e.outbox.unheld_streams for w in workers for e in w.executors} == {CHECKPOINT_STREAMS}
    # the clock runs on the coordinator's worker only, and only that worker's snapshot has counts
    assert _tickers() == [f"checkpoint-ticker-{home}"]
    assert features[1 - home].ticker is None and other.snapshot().checkpoints is None

    def counts() -> CheckpointSnapshot:
        found = coordinating.snapshot().checkpoints
        assert found is not None
        return found

    # the second worker's start is a new attempt the coordinator rolls back to, then commits in
    eventually(lambda: counts().attempt == 2 and counts().committed >= 1, timeout=30)
    eventually(lambda: all(f.section() == {"restoring": []} for f in features), timeout=30)

    # drain: every worker's clock pauses, and each hands back the final checkpoint's wait
    for worker in workers:
        assert worker.deactivate_spouts() is True
    waits = [w.drain_waits() for w in workers]  # one each: checkpointing is the one drain feature
    assert [len(found) for found in waits] == [1, 1]
    assert all(isinstance(found[0], StopCheckpoint) for found in waits)
    injected = coordinating.injected
    time.sleep(0.3)  # deliberate: 30 tick periods of 10 ms, none of which may tick while paused
    assert coordinating.injected == injected
    # a peer of the coordinator's worker waits for that worker to be gone
    (other_wait,) = waits[1 - home]
    assert other_wait.settled(set()) is False and other_wait.settled({home}) is True
    # the coordinator's worker asks for a checkpoint once (one request tuple, injected) and is
    # settled once one that began after the request is committed
    (wait,) = waits[home]
    before = store.last_committed(name)
    assert wait.settled(set()) is False
    assert coordinating.injected == injected + 1
    eventually(lambda: wait.settled(set()), timeout=30, message="the final checkpoint commits")
    last = store.last_committed(name)
    assert before is not None and last is not None and last > before

    # stop: the clock ends with the worker
    clusters.remove(cluster)
    assert cluster.stop() is True
    assert _tickers() == []


def test_a_spout_holding_on_a_task_stops_holding_once_a_coordinator_message_waits_for_it(
    monkeypatch: pytest.MonkeyPatch,
):
    """A spout reads its inbox only between ``next_tuple`` calls: held on a task that cannot
    take its tuples, it would act on a checkpoint's trigger only after the hold, its barrier
    late against the other spouts'. The hold ends once such a message waits; the tuple goes to
    the task it waited on, and nothing is lost."""
    from tuplemesh.core import held_back

    monkeypatch.setattr(held_back, "LEAVE_OUT_SECONDS", 3600.0)  # only the message ends the hold
    topology = word_count(1)
    wired = wire(topology, Config({"topology.state.backend": "memory"}), lambda context: (feature(context),))
    spec = wired.spec("sentences")
    executor = SpoutExecutor(spec, wired.wiring)
    assert executor.outbox.interrupt is not None  # its spouts are in the checkpoint protocol
    assert not executor._controlled_message_waiting()
    split = min(wired.plan.assignment.component_tasks["split"])
    sentences = frozenset(wired.plan.assignment.component_tasks["sentences"])
    # the split task has this executor's barriers and waits for the other spout's
    wired.wiring.held_back.hold(split, frozenset(spec.tasks), sentences)
    source = spec.tasks[0]
    done = threading.Event()

    def emit() -> None:
        executor.outbox.deliver(
            source, "sentences", "default", 0, Fields(["sentence"]), ["a b"], [Fixed(split)]
        )
        done.set()

    threading.Thread(target=emit, daemon=True).start()
    eventually(lambda: executor.outbox.backpressure_holds == 1, message="the emit holds")
    time.sleep(0.05)
    assert not done.is_set()
    (checkpoints,) = wired.features
    assert isinstance(checkpoints, Checkpoints)
    coordinator = checkpoints.plan.coordinator_task
    trigger = Tuple([TRIGGER, 1, 1], coordinator, COORDINATOR, CONTROL_STREAM, Fields(["k", "c", "a"]))
    executor.inbox.put(Batch([(source, trigger)]))
    assert done.wait(30)
    assert executor._controlled_message_waiting()  # still unread: the loop's next poll reads it
    assert split in wired.wiring.held_back.closed  # the hold ended for the message, not a release
    assert executor.outbox.pending == 1  # the tuple is buffered for the split task
