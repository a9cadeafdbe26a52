"""The UI's one JSON document: the graph, per-component rates and health, per-worker state.

Built from Admin WorkerStats messages (what ``WatchStats`` streams and ``tuplemesh top`` shows),
whether they come from the worker serving the page or from ``tuplemesh ui`` following several,
and the features' panels' entries (`tuplemesh.core.panel.MeshPanel`) from their answers.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.core.panel import MeshPanel
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.v1 import admin_pb2

__all__ = ["PanelAnswers", "ViewBuilder", "check_panel_names"]

log = logging.getLogger(__name__)

#: A panel and its answers by target (None, or left out: the target gave none).
PanelAnswers = tuple[MeshPanel, Mapping[str, Any | None]]

#: A panel's name, as it appears in the view and in its assets' URLs.
PANEL_NAME = re.compile(r"[A-Za-z0-9_]+")


def check_panel_names(names: Sequence[str]) -> None:
    """ValueError naming the first panel name that cannot be one: not letters, digits and ``_``,
    given twice, or one of a component's own fields in the view (which it would overwrite)."""
    fields = set(ViewBuilder._component("")) | {"execute_ms", "backpressured"}
    for number, name in enumerate(names):
        if not PANEL_NAME.fullmatch(name):
            raise ValueError(f"a panel's name is letters, digits and _ only, not {name!r}")
        if name in fields or name in names[:number]:
            raise ValueError(f"panel name {name!r} is taken (by a component's field or another panel)")


#: The losses counted on a worker (tuples it dropped, could not deliver or never got back).
WORKER_LOSSES = ("lost_tuples", "stranded_tuples", "unknown_task_messages", "undeliverable_messages")


def _histogram_totals(h: admin_pb2.Histogram) -> tuple[float, int]:
    return h.sum, sum(h.counts)


class ViewBuilder:
    """Turns one reading of every worker into the view. Keeps the previous reading's execute-time
    sums, so the latency shown is the mean of the last interval, not since the worker started.
    Not thread-safe (the server calls it under its lock)."""

    def __init__(self) -> None:
        self._latency: dict[tuple[str, str], tuple[float, int]] = {}
        #: per panel: its failures, logged at most once a minute each
        self._panel_errors: dict[str, RateLimitedLog] = {}

    def view(
        self,
        stats: Mapping[str, admin_pb2.WorkerStats | None],
        errors: Mapping[str, str],
        graph: Mapping[str, Any] | None,
        scope: str = "mesh",
        indices: Mapping[str, int] | None = None,
        history: Sequence[Mapping[str, Any]] = (),
        panels: Sequence[PanelAnswers] = (),
    ) -> dict[str, Any]:
        """``stats``: target -> its latest WorkerStats (None while it has none); ``errors``:
        target -> why it cannot be read now (the worker shows as down). ``scope``: ``mesh``
        (every worker given) or ``worker`` (the page of one worker, its tasks only). ``indices``:
        the worker index of targets known to be a given worker (a down one is listed in its
        place, not last). ``history``: the epochs routed by, newest first (EpochHistory rows:
        epoch, workers, since). ``panels``: each feature panel with its answers by target: a
        component gets the panel's entry (under the panel's name, from ``merge``) only where
        some worker shown up answered for it."""
        known = indices or {}
        components: dict[str, dict[str, Any]] = {}
        if graph is not None:
            for c in graph["components"]:
                components[c["name"]] = self._component(c["name"])
        workers: list[dict[str, Any]] = []
        checkpoints: dict[str, Any] | None = None
        up: list[str] = []

        def order(target: str) -> tuple[int, str]:
            s = stats[target]
            return (s.worker if s is not None else known.get(target, 1 << 31), target)

        for target in sorted(stats, key=order):
            s = stats[target]
            error = errors.get(target, "")
            if s is None or error:
                down: dict[str, Any] = {"target": target, "up": False, "error": error or "no reading yet"}
                if target in known:
                    down["worker"] = known[target]
                workers.append(down)
                continue
            status = s.status
            workers.append(self._worker(target, s))
            if status.HasField("checkpoints"):
                c = status.checkpoints
                checkpoints = {
                    "worker": status.worker,
                    "attempt": c.attempt,
                    "committed": c.committed,
                    "last_committed": c.last_committed,
                    "last_duration_seconds": c.last_duration_seconds,
                    "abandoned": c.abandoned,
                    "rollbacks": c.rollbacks,
                    "store_errors": c.store_errors,
                }
            self._add_components(target, s, components)
            up.append(target)
        for panel, answers in panels:
            answered = [answer for target in up if (answer := answers.get(target)) is not None]
            try:
                entries = list(panel.merge(answered).items())
            except Exception as exc:  # a feature's code: the rest of the page is still shown
                failures = self._panel_errors.setdefault(panel.name, RateLimitedLog(log, 60.0))
                failures.log("panel %s: merging its answers failed: %r", panel.name, exc, exc=exc)
                continue
            for name, entry in entries:
                components.setdefault(name, self._component(name))[panel.name] = entry
        for c in components.values():
            total_seconds, total_count = c.pop("_latency")
            c["execute_ms"] = 1000 * total_seconds / total_count if total_count else None
            c["backpressured"] = c["congested_tasks"] > 0
        epochs = sorted({str(w["epoch"]) for w in workers if w["up"]})
        return {
            "time": time.time(),
            "scope": scope,
            "topology": graph["name"] if graph is not None else "",
            "graph": graph,
            "components": components,
            "workers": workers,
            "checkpoints": checkpoints,
            # a rescale in progress shows as workers on different epochs
            "epochs": epochs,
            "workers_expected": max((int(w["workers"]) for w in workers if w["up"]), default=0),
            # the epochs routed by, newest first: a rescale is one epoch to the next
            "history": [dict(row) for row in history],
        }

    @staticmethod
    def _component(name: str) -> dict[str, Any]:
        return {
            "name": name, "executed": 0, "emitted": 0, "executed_per_second": 0.0,
            "emitted_per_second": 0.0, "errors": 0, "losses": 0, "tasks_here": 0,
            "congested_tasks": 0, "inbox_fill": 0.0, "_latency": (0.0, 0),
        }  # fmt: skip

    def _add_components(
        self, target: str, s: admin_pb2.WorkerStats, components: dict[str, dict[str, Any]]
    ) -> None:
        status = s.status
        for c in s.components:
            row = components.setdefault(c.component, self._component(c.component))
            row["executed"] += c.executed
            row["emitted"] += c.emitted
            row["executed_per_second"] += c.executed_per_second
            row["emitted_per_second"] += c.emitted_per_second
        fills = {q.name: q.depth / q.capacity for q in s.queues if q.capacity}
        congested = set(status.congested_task_ids)
        latency: dict[str, tuple[float, int]] = {}
        for e in status.executors:
            row = components.setdefault(e.component, self._component(e.component))
            row["errors"] += e.errors + e.spout_errors + e.deserialize_errors
            row["losses"] += e.dropped_on_stop + e.abandoned_on_halt
            row["tasks_here"] += len(e.tasks)
            row["congested_tasks"] += sum(1 for t in e.tasks if t in congested)
            row["inbox_fill"] = max(row["inbox_fill"], fills.get(f"inbox:{e.name}", 0.0))
            total, count = _histogram_totals(e.execute_seconds)
            acc = latency.get(e.component, (0.0, 0))
            latency[e.component] = (acc[0] + total, acc[1] + count)
        for name, lost in status.export_lost.items():
            components.setdefault(name, self._component(name))["losses"] += lost
        for name, (total, count) in latency.items():
            before_total, before_count = self._latency.get((target, name), (0.0, 0))
            if count < before_count:  # the worker restarted: its histograms started over
                before_total, before_count = 0.0, 0
            self._latency[(target, name)] = (total, count)
            row = components[name]
            t, n = row["_latency"]
            if count > before_count:
                row["_latency"] = (t + total - before_total, n + count - before_count)

    @staticmethod
    def _worker(target: str, s: admin_pb2.WorkerStats) -> dict[str, Any]:
        status = s.status
        fills = [q.depth / q.capacity if q.capacity else 0.0 for q in s.queues]
        queues = [
            {"name": q.name, "depth": q.depth, "capacity": q.capacity, "fill": fill}
            for q, fill in zip(s.queues, fills, strict=True)
        ]
        return {
            "target": target,
            "up": True,
            "worker": status.worker,
            "workers": status.workers,
            "state": status.state,
            "epoch": status.epoch,
            "uptime_seconds": status.uptime_seconds,
            "tasks": status.tasks,
            "congested_tasks": status.congested_tasks,
            "queue_fill": max(fills, default=0.0),
            "queues": queues,
            "receive_held_bytes": status.receive_held_bytes,
            "receive_held_bytes_capacity": status.receive_held_bytes_capacity,
            "transfer_held_bytes": status.transfer_held_bytes,
            "transfer_held_bytes_capacity": status.transfer_held_bytes_capacity,
            "rss_bytes": status.rss_bytes,
            "losses": sum(getattr(status, name) for name in WORKER_LOSSES),
            "peers_down": sum(1 for p in status.peers if p.state != "READY"),
        }
