"""Following a mesh of worker processes through faults: settle detection and merged reports.

A SIGKILLed worker takes its counters with it, so the consumed == delivered balance that
``tuplemesh run`` uses cannot prove quiescence after a restart. A fault test instead waits until
every worker says its spouts are finished (with acking on: every tree acked) and it is idle (no
queued tuple, no unacknowledged send), twice in a row.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.worker.conftest import Mesh
from tuplemesh.v1 import admin_pb2


def write_config(path: Path, **values: Any) -> Path:
    path.write_text("".join(f"{key}: {json.dumps(value)}\n" for key, value in values.items()))
    return path


def statuses(mesh: Mesh, reports: bool = False) -> list[admin_pb2.WorkerStatus]:
    request = admin_pb2.GetStatusRequest(include_reports=reports)
    return [mesh.admin(i).GetStatus(request, timeout=10.0) for i in range(len(mesh.ports))]


def wait_settled(mesh: Mesh, timeout: float, drained: bool = False) -> None:
    """Every spout finished (or, ``drained``, deactivated by Admin.Drain) and every worker idle,
    seen twice 0.3 s apart; TimeoutError otherwise."""
    deadline = time.monotonic() + timeout
    streak = 0
    while time.monotonic() < deadline:
        for index, proc in enumerate(mesh.procs):
            assert proc.poll() is None, f"worker {index} exited with {proc.returncode}"
        now = statuses(mesh)
        streak = streak + 1 if all((drained or s.spouts_finished) and s.idle for s in now) else 0
        if streak == 2:
            return
        time.sleep(0.3)
    raise TimeoutError(f"mesh did not settle within {timeout}s: {[(s.spouts_finished, s.idle) for s in now]}")


def reports(mesh: Mesh) -> dict[str, list[Any]]:
    merged: dict[str, dict[int, Any]] = {}
    for status in statuses(mesh, reports=True):
        for component, by_task in json.loads(status.reports_json or "{}").items():
            merged.setdefault(component, {}).update({int(t): r for t, r in by_task.items()})
    return {c: [r for _, r in sorted(by_task.items())] for c, by_task in merged.items()}


def sink_counts(merged: dict[str, list[Any]]) -> Counter[int]:
    seen: Counter[int] = Counter()
    for report in merged["count"]:
        seen.update({int(k): v for k, v in report["seen"].items()})
    return seen
