"""Following a mesh of worker processes through faults: settle detection and merged reports.

A SIGKILLed worker takes its counters with it, so the consumed == delivered balance that
``tuplemesh run`` uses cannot prove quiescence after a restart. A fault test instead waits until
every worker says its spouts are finished (with acking on: every tree acked) and it is idle (no
queued tuple, no unacknowledged send), twice in a row.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from tests.helpers import eventually
from tests.worker.conftest import Mesh
from tuplemesh.launcher import merge_reports
from tuplemesh.v1 import admin_pb2


def write_config(path: Path, **values: Any) -> Path:
    path.write_text("".join(f"{key}: {json.dumps(value)}\n" for key, value in values.items()))
    return path


def statuses(mesh: Mesh, reports: bool = False) -> list[admin_pb2.WorkerStatus]:
    request = admin_pb2.GetStatusRequest(include_reports=reports)
    return [mesh.admin(i).GetStatus(request, timeout=10.0) for i in range(len(mesh.ports))]


def wait_settled(mesh: Mesh, timeout: float, drained: bool = False) -> None:
    """Every spout finished (or, ``drained``, deactivated by Admin.Drain) and every worker idle,
    seen twice 0.3 s apart; AssertionError otherwise."""
    streak = 0
    last: list[admin_pb2.WorkerStatus] = []

    def settled_twice_in_a_row() -> bool:
        nonlocal streak, last
        for index, proc in enumerate(mesh.procs):
            assert proc.poll() is None, f"worker {index} exited with {proc.returncode}"
        last = statuses(mesh)
        streak = streak + 1 if all((drained or s.spouts_finished) and s.idle for s in last) else 0
        return streak >= 2

    eventually(
        settled_twice_in_a_row,
        timeout=timeout,
        interval=0.3,
        message=lambda: (
            f"mesh settled; (spouts_finished, idle) per worker: {[(s.spouts_finished, s.idle) for s in last]}"
        ),
    )


def reports(mesh: Mesh) -> dict[str, list[Any]]:
    return merge_reports(statuses(mesh, reports=True))


def proc_status(pid: int) -> tuple[int, int]:
    """(RSS bytes, threads) of a process, from /proc."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["Threads"])


def sink_counts(merged: dict[str, list[Any]]) -> Counter[int]:
    seen: Counter[int] = Counter()
    for report in merged["count"]:
        seen.update({int(k): v for k, v in report["seen"].items()})
    return seen
