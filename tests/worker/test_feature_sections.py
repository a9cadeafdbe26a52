"""What features report of themselves reaches the worker's status, and a section that JSON
cannot hold fails alone: the status still answers."""

from __future__ import annotations

import json
from typing import Any

from examples import wordcount
from tuplemesh.config import Config
from tuplemesh.server.status_proto import snapshot_from_proto, snapshot_to_proto
from tuplemesh.worker.local_cluster import LocalCluster


def test_sections_go_through_json_and_a_bad_one_fails_alone():
    cluster = LocalCluster(wordcount.build(repeat=1), 1, Config({"messaging.transport": "local"}))
    summary = cluster.run(60.0)
    assert summary.completed, summary.message
    worker = cluster.workers[0]
    sampling: Any = worker.features["sampling"]
    sampling.section = lambda: {"pair": (1, 2), "set": {3}}  # a tuple, and what JSON cannot hold
    snapshot = worker.snapshot()
    assert snapshot.feature_sections["sampling"] == {"pair": [1, 2], "set": "{3}"}  # as repr
    sampling.section = lambda: {(1, 2): "a tuple key"}
    snapshot = worker.snapshot()
    error = snapshot.feature_sections["sampling"]["error"]
    assert error.startswith("TypeError(") and "keys must be str" in error
    assert snapshot.feature_sections["hotkeys"]["streams"] == []  # the others as they were
    status = snapshot_to_proto(snapshot)  # the status still answers, with every section
    assert json.loads(status.feature_sections_json) == snapshot.feature_sections
    assert snapshot_from_proto(status).feature_sections == snapshot.feature_sections
    assert worker.snapshot(feature_sections=False).feature_sections == {}
