"""``tuplemesh top``: a live terminal view of workers, components, queue fill and rates.

One ``Admin.WatchStats`` stream per worker feeds a shared view that rich redraws in place;
``--once`` prints the first complete view and exits (for scripts and tests).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import grpc
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table

from tuplemesh.client import TlsSettings, open_channel
from tuplemesh.core.stats import WorkerSnapshot
from tuplemesh.core.summary import component_totals, transfer_totals
from tuplemesh.server.status_proto import snapshot_from_proto
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

__all__ = ["render", "top"]

#: The loss and refusal counts shown per worker (keys of ``transfer_totals`` and component totals).
LOSS_COLUMNS = (
    "lost", "stranded", "lost_on_close", "unknown_task", "undeliverable", "duplicates",
    "rejected_batches", "sequence_gaps", "dropped_on_stop", "abandoned_on_halt", "export_lost",
)  # fmt: skip


def _component_losses(snapshot: WorkerSnapshot) -> dict[str, int]:
    """Losses counted per component, summed over this worker's components."""
    totals = component_totals([snapshot]).values()
    return {
        name: sum(c.get(name, 0) for c in totals)
        for name in ("dropped_on_stop", "abandoned_on_halt", "export_lost")
    }


def render(stats: dict[str, admin_pb2.WorkerStats], errors: dict[str, str]) -> Group:
    """The view: one table of components and one of queues, across every worker."""
    components = Table(title="components")
    for name in ("worker", "component", "emitted", "executed", "emitted/s", "executed/s"):
        components.add_column(name, justify="left" if name in ("worker", "component") else "right")
    queues = Table(title="queues")
    for name in ("worker", "queue", "depth", "limit", "capacity", "fill", "published/s"):
        queues.add_column(name, justify="left" if name in ("worker", "queue") else "right")
    losses = Table(title="discarded, refused or lost")
    losses.add_column("worker")
    for name in LOSS_COLUMNS:
        losses.add_column(name.replace("_", " "), justify="right")
    for target, s in sorted(stats.items(), key=lambda kv: kv[1].worker):
        label = f"{s.worker} ({target})"
        for c in s.components:
            components.add_row(label, c.component, f"{c.emitted:,}", f"{c.executed:,}",
                               f"{c.emitted_per_second:,.0f}", f"{c.executed_per_second:,.0f}")  # fmt: skip
        for q in s.queues:
            fill = q.depth / q.capacity if q.capacity else 0.0
            queues.add_row(label, q.name, str(q.depth), str(q.limit), str(q.capacity), f"{fill:.0%}",
                           f"{q.publish_rate:,.0f}")  # fmt: skip
        if s.HasField("status"):
            snapshot = snapshot_from_proto(s.status)
            totals = {**transfer_totals([snapshot]), **_component_losses(snapshot)}
            losses.add_row(label, *(f"{totals[name]:,}" for name in LOSS_COLUMNS))
    parts: list[Table | str] = [components, queues, losses]
    parts.extend(f"[red]{target}: {error}[/red]" for target, error in sorted(errors.items()))
    return Group(*parts)


def top(
    targets: Sequence[str],
    interval: float,
    once: bool,
    console: Console | None = None,
    *,
    tls: TlsSettings | None = None,
    token: str = "",
) -> int:
    """Follow ``targets`` until Ctrl-C (or, with ``once``, until each sent one message).

    ``tls`` and ``token`` reach a secured mesh (mTLS, ``admin.token``), as the workers' config says."""
    console = console or Console()
    stats: dict[str, admin_pb2.WorkerStats] = {}
    errors: dict[str, str] = {}
    lock = threading.Lock()
    stop = threading.Event()
    calls = []

    def follow(target: str) -> None:
        stub = admin_pb2_grpc.AdminStub(open_channel(target, tls, token))
        call = stub.WatchStats(admin_pb2.WatchStatsRequest(interval_seconds=interval))
        calls.append(call)
        try:
            for message in call:
                with lock:
                    stats[target] = message
                    errors.pop(target, None)
        except grpc.RpcError as exc:
            if not stop.is_set():
                with lock:
                    errors[target] = f"{exc.code().name}: {exc.details()}"

    threads = [threading.Thread(target=follow, args=(t,), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    try:
        if once:
            deadline = time.monotonic() + max(10 * interval, 5.0)
            while time.monotonic() < deadline and len(stats) + len(errors) < len(targets):
                time.sleep(0.02)
            with lock:
                console.print(render(stats, errors))
                return 0 if len(stats) == len(targets) else 1
        with Live(console=console, refresh_per_second=4) as live:
            while True:
                with lock:
                    live.update(render(stats, errors))
                time.sleep(interval / 2)
    except KeyboardInterrupt:
        return 0
    finally:
        stop.set()
        for call in calls:
            call.cancel()
