"""`RunSummary` and `summarize`: what ``tuplemesh run`` reports, from the workers' snapshots.

Local mode passes ``Worker.snapshot()``s; the process launcher passes the snapshots it converted
back from ``Admin.GetStatus``. One function sums both, so every count and every loss reads the
same in either mode.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tuplemesh.worker.stats import WorkerSnapshot

__all__ = ["RunSummary", "component_totals", "summarize", "transfer_totals"]


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
        }


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
) -> RunSummary:
    """The RunSummary of a run whose workers last reported ``snapshots``."""
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
    )
