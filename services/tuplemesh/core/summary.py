"""`RunSummary` and `summarize`: what ``tuplemesh run`` reports, from the workers' snapshots,
and `mesh_quiescent`: when a finite run is over.

Local mode passes ``Worker.snapshot()``s; the process launcher passes the snapshots it converted
back from ``Admin.GetStatus``. One function sums both, so every count and every loss reads the
same in either mode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuplemesh.core.stats import START_METHODS, ErrorSnapshot, WorkerSnapshot

__all__ = [
    "RunSummary",
    "component_totals",
    "error_count",
    "failing_error",
    "first_error",
    "mesh_quiescent",
    "summarize",
    "transfer_totals",
]


@dataclass
class RunSummary:
    """What a finished run reports (``tuplemesh run --json`` prints ``as_dict()``)."""

    topology: str
    workers: int
    transport: str
    seconds: float
    components: dict[str, dict[str, int]]
    completed: bool
    matched: bool | None
    message: str
    transfer: dict[str, int] = field(default_factory=dict)
    #: Exceptions user code raised (bolts and spouts), and the first of them.
    errors: int = 0
    first_error: ErrorSnapshot | None = None
    #: The first error when the errors fail the run (more than ``topology.errors.tolerated``,
    #: or a prepare/open), else None.
    failed_by: ErrorSnapshot | None = None
    #: Ended by SIGINT or SIGTERM before it finished (``tuplemesh run`` exits 130).
    interrupted: bool = False

    def as_dict(self) -> dict[str, Any]:
        executed = sum(c.get("executed", 0) for c in self.components.values())
        components = {
            name: {
                **counts,
                "per_second": round(counts.get("executed", 0) / self.seconds, 1) if self.seconds else 0.0,
            }
            for name, counts in sorted(self.components.items())
        }
        for counts in components.values():
            if counts.get("executed", 0) == 0 and self.seconds:
                counts["per_second"] = round(counts.get("emitted", 0) / self.seconds, 1)
        return {
            "topology": self.topology,
            "workers": self.workers,
            "transport": self.transport,
            "seconds": round(self.seconds, 4),
            "tuples_per_second": round(executed / self.seconds, 1) if self.seconds else 0.0,
            "components": components,
            "transfer": self.transfer,
            "completed": self.completed,
            "matched": self.matched,
            "message": self.message,
            "errors": self.errors,
            "first_error": None if self.first_error is None else self.first_error.as_dict(),
            "failed_by_errors": self.failed_by is not None,
            "interrupted": self.interrupted,
        }


def mesh_quiescent(
    first: Sequence[WorkerSnapshot], read_again: Callable[[], Sequence[WorkerSnapshot]]
) -> bool:
    """Whether a finite run is over: every spout finished and no tuple anywhere in flight.

    ``first`` is every worker's snapshot, just read; ``read_again`` reads them all again. Every
    ``consumed`` counter is taken from the first read, before any ``delivered`` counter is
    taken from the second: a tuple in flight at the first read is counted as delivered but not
    consumed, so equality proves an empty mesh.
    """
    if not all(s.spouts_finished for s in first):
        return False
    consumed = sum(s.consumed for s in first)
    return consumed == sum(s.delivered for s in read_again())


def component_totals(snapshots: Iterable[WorkerSnapshot]) -> dict[str, dict[str, int]]:
    """Every executor counter summed by component across workers; ExportBolt components also
    carry ``export_lost``."""
    totals: dict[str, dict[str, int]] = {}
    for snapshot in snapshots:
        for component, counts in snapshot.component_counters().items():
            into = totals.setdefault(component, {})
            for name, value in counts.items():
                into[name] = into.get(name, 0) + value
        for component, lost in snapshot.export_lost.items():
            into = totals.setdefault(component, {})
            into["export_lost"] = into.get("export_lost", 0) + lost
    return totals


def error_count(snapshots: Iterable[WorkerSnapshot]) -> int:
    """Exceptions raised by user code on every worker, bolts and spouts."""
    return sum(e.errors + e.spout_errors for s in snapshots for e in s.executors)


def first_error(snapshots: Iterable[WorkerSnapshot]) -> ErrorSnapshot | None:
    """The earliest first error of any executor (by when it was raised), None without one."""
    errors = [e.first_error for s in snapshots for e in s.executors if e.first_error is not None]
    return min(errors, key=lambda e: e.at, default=None)


def failing_error(snapshots: list[WorkerSnapshot], tolerated: int) -> ErrorSnapshot | None:
    """The first error when user code failed the run: more than ``tolerated`` exceptions, or a
    prepare/open that raised (its task cannot run); None while the run may go on."""
    first = first_error(snapshots)
    if first is None:
        return None
    start_failed = any(
        e.first_error is not None and e.first_error.method in START_METHODS
        for s in snapshots
        for e in s.executors
    )
    return first if start_failed or error_count(snapshots) > tolerated else None


def transfer_totals(snapshots: Iterable[WorkerSnapshot]) -> dict[str, int]:
    """What crossed between workers, and everything discarded, refused or lost on the way."""
    totals = dict.fromkeys(
        (
            "batches", "messages", "lost", "stranded", "lost_on_close", "unknown_task",
            "undeliverable", "duplicates", "rejected_batches", "rejected_frames", "sequence_gaps",
        ),
        0,
    )  # fmt: skip
    for s in snapshots:
        totals["batches"] += s.transfer.sent_batches
        totals["messages"] += s.transfer.sent_tuples
        totals["lost"] += s.transfer.lost_tuples
        totals["stranded"] += s.transfer.stranded_tuples
        totals["lost_on_close"] += sum(p.connection.lost_on_close for p in s.peers)
        totals["unknown_task"] += s.receive.unknown_tasks
        totals["undeliverable"] += s.receive.undeliverable
        totals["duplicates"] += s.binding.duplicate_batches
        totals["rejected_batches"] += s.binding.rejected_batches
        totals["rejected_frames"] += s.binding.rejected_frames
        totals["sequence_gaps"] += s.binding.sequence_gaps
    return totals


def summarize(
    snapshots: list[WorkerSnapshot],
    *,
    topology: str,
    workers: int,
    transport: str,
    seconds: float,
    completed: bool,
    matched: bool | None,
    message: str,
    tolerated: int | None = None,
) -> RunSummary:
    """The RunSummary of a run whose workers last reported ``snapshots``. When user code raised
    more than ``tolerated`` exceptions (or in prepare/open), the run did not match and its
    message names the first exception; ``tolerated=None`` leaves exceptions to the caller."""
    failed_by = None if tolerated is None else failing_error(snapshots, tolerated)
    errors = error_count(snapshots)
    if failed_by is not None:
        matched, message = False, f"user code raised {errors} exception(s), the first: {failed_by.describe()}"
    return RunSummary(
        topology,
        workers,
        transport,
        seconds,
        component_totals(snapshots),
        completed,
        matched,
        message,
        transfer_totals(snapshots),
        errors,
        first_error(snapshots),
        failed_by,
    )
