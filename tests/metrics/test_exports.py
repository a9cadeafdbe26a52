"""Every snapshot field is exported as a metric or documented as Admin-only, and every metric
the export table names is really exported and documented."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from examples import wordcount
from tuplemesh.config import Config
from tuplemesh.core.stats import field_paths
from tuplemesh.metrics import EXPORTS, WorkerCollector
from tuplemesh.worker.local_cluster import LocalCluster

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def admin_only_fields() -> set[str]:
    """The first column of the table under "Counts that are in Admin only" in docs/operations.md."""
    section = OPERATIONS.read_text().split("### Counts that are in Admin only", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z_.]+)`", row.split("|")[1])}


def test_every_snapshot_field_is_a_metric_or_documented_as_admin_only():
    fields = set(field_paths())
    exported, admin_only = set(EXPORTS), admin_only_fields()
    assert not exported & admin_only, f"both exported and listed as Admin-only: {exported & admin_only}"
    assert fields - exported - admin_only == set(), "neither a metric nor documented as Admin-only"
    assert exported - fields == set(), "EXPORTS names fields the snapshot does not have"
    assert admin_only - fields == set(), "docs/operations.md lists fields the snapshot does not have"


def test_every_exported_metric_is_in_the_metrics_table():
    table = OPERATIONS.read_text().split("## Scrape with Prometheus", 1)[1].split("###", 1)[0]
    missing = [e.metric for e in EXPORTS.values() if f"`{e.metric}" not in table]
    assert missing == []


def test_metric_names_are_unique():
    names = [e.metric for e in EXPORTS.values()]
    assert len(names) == len(set(names))


def test_a_live_collector_exports_every_mapped_metric():
    cluster = LocalCluster(wordcount.build(repeat=2), 2, Config({"messaging.transport": "local"}))
    summary = cluster.run(30.0)
    assert summary.completed and summary.matched, summary.message
    registry = CollectorRegistry()
    registry.register(WorkerCollector(cluster.workers[0]))
    exposition = generate_latest(registry).decode()
    families = {line.split()[2] for line in exposition.splitlines() if line.startswith("# TYPE ")}
    for path, export in EXPORTS.items():
        assert export.metric in families, f"{path}: {export.metric} is not exported"
    # the per-peer families have a sample for the other worker (local transport: no bytes)
    assert 'tuplemesh_peer_connected{peer="1",worker="0"} 1.0' in exposition
