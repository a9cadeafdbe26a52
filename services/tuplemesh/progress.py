"""The live terminal table of ``tuplemesh run`` (rich): tuples/s and user-code exceptions per
component, queue fill."""

from __future__ import annotations

import time
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from tuplemesh.core.stats import WorkerSnapshot
from tuplemesh.core.summary import component_totals

__all__ = ["LiveProgress"]


class LiveProgress:
    """Feed ``update`` with the workers' statuses; the table redraws in place."""

    def __init__(self, topology: str, workers: int, transport: str) -> None:
        self.title = f"{topology} on {workers} worker(s) over {transport}"
        self._last: tuple[float, dict[str, int]] | None = None
        self._live = Live(Table(title=self.title), console=Console(stderr=True), refresh_per_second=4)

    def __enter__(self) -> LiveProgress:
        self._live.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._live.__exit__(kind, exc, tb)

    def update(self, snapshots: list[WorkerSnapshot], states: list[str]) -> None:
        """Redraw from the workers' snapshots and serving states (one each, in worker order)."""
        now = time.monotonic()
        totals = component_totals(snapshots)
        executed = {name: c.get("executed", 0) for name, c in totals.items()}
        previous = self._last
        self._last = (now, executed)
        table = Table(title=self.title)
        for column in ("component", "emitted", "executed", "executed/s", "errors"):
            table.add_column(column, justify="right" if column != "component" else "left")
        for name in sorted(totals):
            rate = ""
            if previous is not None and now > previous[0]:
                rate = f"{(executed[name] - previous[1].get(name, 0)) / (now - previous[0]):,.0f}"
            # exceptions of bolt and spout code alike: a spout that raises is no less broken
            errors = totals[name].get("errors", 0) + totals[name].get("spout_errors", 0)
            table.add_row(
                name, f"{totals[name].get('emitted', 0):,}", f"{executed[name]:,}", rate, f"{errors:,}"
            )
        fills = []
        for s, state in zip(snapshots, states, strict=True):
            inboxes = [q for q in s.queues if q.name.startswith("inbox:")]
            fullest = max((q.depth / q.capacity for q in inboxes if q.capacity), default=0.0)
            transfer = next(
                (q.depth / q.capacity for q in s.queues if q.name == "transfer" and q.capacity), 0.0
            )
            fills.append(f"w{s.worker} {state}: fullest inbox {fullest:.0%}, transfer {transfer:.0%}")
        table.caption = "\n".join(fills)
        self._live.update(table)
