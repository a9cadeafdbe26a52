"""Hot keys on a bolt with ``process``: its key columns are counted as a per-tuple bolt's keys
are, in a real run (local cluster, 2 workers) and exactly."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from tests.helpers import ListSpout
from tests.hotkeys.topologies import COLD, COLD_TUPLES, HOT_TUPLES, Count, words
from tuplemesh.config import Config
from tuplemesh.hotkeys.feature import HotKeys
from tuplemesh.topology import Columns, TopologyBuilder
from tuplemesh.worker.local_cluster import LocalCluster


class ColumnarCount(Count):
    """``Count`` on columns."""

    def process(self, batch: Columns) -> None:
        counts = self.counts
        for word in batch.column("word"):
            counts[word] = counts.get(word, 0) + 1


def listed(sections: list[Mapping[str, Any]]) -> dict[str, int]:
    """Every listed key's count, over the workers' sections."""
    found: dict[str, int] = {}
    for section in sections:
        for stream in section["streams"]:
            assert (stream["component"], stream["source_component"]) == ("count", "words")
            for key in stream["keys"]:
                word = json.loads(key["key_json"])
                found[word] = found.get(word, 0) + key["tuples"]
    return found


@pytest.mark.parametrize("bolt", [Count, ColumnarCount])
def test_hot_keys_count_a_columnar_bolts_keys_exactly(bolt: type[Count]) -> None:
    builder = TopologyBuilder("skewed")
    builder.set_spout("words", ListSpout(words(), ["word"]))
    builder.set_bolt("count", bolt(), parallelism=4).fields_grouping("words", ["word"])
    conf = Config(
        {
            "messaging.transport": "grpc",
            "topology.hotkeys.enabled": True,
            "admin.hotkeys.enabled": True,
            "topology.hotkeys.sample.every": 1,
            "topology.hotkeys.top.k": 5,
        }
    )
    cluster = LocalCluster(builder.build(), 2, conf)
    summary = cluster.run(60.0)
    assert summary.completed, summary.message
    sections = [w.features["hotkeys"].section() for w in cluster.workers]
    assert all(isinstance(w.features["hotkeys"], HotKeys) for w in cluster.workers)
    assert listed(sections) == {"hot": HOT_TUPLES, **{w: COLD_TUPLES for w in COLD}}
    merged: dict[str, int] = {}
    for counts in cluster.reports()["count"]:
        for word, n in counts.items():
            merged[word] = merged.get(word, 0) + n
    assert merged == {"hot": HOT_TUPLES, **{w: COLD_TUPLES for w in COLD}}


def test_a_workers_status_names_no_key_unless_admin_may_hand_keys_out() -> None:
    """Keys are user data: the hot keys' section in every worker status (feature_sections) has
    each stream's totals, and its keys only with admin.hotkeys.enabled."""
    builder = TopologyBuilder("skewed")
    builder.set_spout("words", ListSpout(words(), ["word"]))
    builder.set_bolt("count", Count(), parallelism=2).fields_grouping("words", ["word"])
    base = {
        "messaging.transport": "local",
        "topology.hotkeys.enabled": True,
        "topology.hotkeys.sample.every": 1,
    }
    for allowed in (False, True):
        cluster = LocalCluster(builder.build(), 1, Config({**base, "admin.hotkeys.enabled": allowed}))
        summary = cluster.run(60.0)
        assert summary.completed, summary.message
        section = cluster.workers[0].snapshot().feature_sections["hotkeys"]
        [stream] = section["streams"]
        assert stream["tuples"] == HOT_TUPLES + COLD_TUPLES * len(COLD)
        assert ("keys" in stream) is allowed
        if allowed:
            assert json.loads(stream["keys"][0]["key_json"]) == "hot"
