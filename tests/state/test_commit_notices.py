"""``pre_checkpoint`` and ``checkpoint_committed`` (and a replayable spout's ``committed``) in a
running checkpointed topology: each task hears of exactly the checkpoints the coordinator
committed, after it stored its part of them."""

from __future__ import annotations

import itertools
from typing import Any

from examples.stateful_wordcount import ReplayableSentenceSpout, StatefulCountBolt
from tests.helpers import eventually
from tuplemesh.state import MemoryStore, PartKey
from tuplemesh.topology import TopologyBuilder
from tuplemesh.worker.local_cluster import LocalCluster

_names = itertools.count()


class HookedCountBolt(StatefulCountBolt):
    def init_state(self, state: Any) -> None:
        super().init_state(state)
        self.prepared: list[int] = []
        self.committed: list[int] = []

    def pre_checkpoint(self, checkpoint: int) -> None:
        self.prepared.append(checkpoint)
        self.counts["__checkpoint"] = checkpoint  # put into the state now: stored with the part

    def checkpoint_committed(self, checkpoint: int) -> None:
        assert checkpoint in self.prepared, "a commit notice for a part this task never took"
        self.committed.append(checkpoint)

    def report(self) -> Any:
        return {"prepared": list(self.prepared), "committed": list(self.committed)}


class PositionsSpout(ReplayableSentenceSpout):
    def open(self, conf: Any, context: Any, collector: Any) -> None:
        super().open(conf, context, collector)
        self.committed_positions: list[int] = []

    def committed(self, position: Any) -> None:
        self.committed_positions.append(position)

    def report(self) -> Any:
        return {"committed": list(self.committed_positions), "position": self.next_index}


def test_every_task_hears_of_each_committed_checkpoint_it_stored_a_part_of():
    name = f"notices-{next(_names)}"
    builder = TopologyBuilder(name)
    builder.set_spout("sentences", PositionsSpout(200), parallelism=2)
    builder.set_bolt("count", HookedCountBolt(), parallelism=2).fields_grouping("sentences", ["sentence"])
    cluster = LocalCluster(
        builder.build(),
        2,
        {"messaging.transport": "local", "topology.state.checkpoint.interval.ms": 20, "wordcount.rate": 2000},
    )
    cluster.start()
    try:
        assert cluster.run_until_done(60)
        store = MemoryStore.from_conf({})
        eventually(lambda: (store.last_committed(name) or 0) >= 3, timeout=20)
    finally:
        assert cluster.stop()
    last = store.last_committed(name)
    reports = cluster.reports()
    for report in reports["count"]:
        committed = report["committed"]
        assert committed == sorted(committed) and len(set(committed)) == len(committed)
        assert set(committed) <= set(report["prepared"])
        assert committed[-1] >= last - 1  # the last notice may still be on its way at stop
    # the state stored with the last committed checkpoint holds what pre_checkpoint put in it
    # (tasks: __checkpoint 1, count 2 and 3, sentences 4 and 5)
    for task in (2, 3):
        part = store.get_part(PartKey(name, "count", task), last)
        assert part is not None and b"__checkpoint" in part
    for report in reports["sentences"]:
        positions = report["committed"]
        assert positions == sorted(positions) and positions and positions[-1] <= report["position"]
