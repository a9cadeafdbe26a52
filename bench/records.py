"""Benchmark records: one case, its rate, and its baselines from the same run with ratios."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Record", "best_rate", "format_table"]


@dataclass
class Record:
    part: str
    case: str
    unit: str
    rate: float
    baselines: dict[str, float] = field(default_factory=dict)
    target: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "case": self.case,
            "unit": self.unit,
            f"{self.unit}_per_second": round(self.rate, 1),
            "baselines": [
                {
                    "name": name,
                    f"{self.unit}_per_second": round(rate, 1),
                    # a baseline that did nothing (no checkpoint committed in its window) has no ratio
                    "ratio": round(self.rate / rate, 3) if rate else None,
                }
                for name, rate in self.baselines.items()
            ],
            "target": self.target,
            **({"extra": self.extra} if self.extra else {}),
        }


def best_rate(run: Callable[[], int], repeats: int) -> float:
    """Median of ``repeats`` runs of ``run`` (which returns the items it moved), in items/s."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        items = run()
        rates.append(items / (time.perf_counter() - start))
    return statistics.median(rates)


def format_table(records: list[Record]) -> str:
    lines = []
    for r in records:
        lines.append(
            f"{r.part}/{r.case}: {_rate(r.rate)} {r.unit}/s"
            + (f"   [target: {r.target}]" if r.target else "")
        )
        for name, rate in r.baselines.items():
            ratio = f"{r.rate / rate:6.2f}x" if rate else "  none"
            lines.append(f"    vs {name:<34} {_rate(rate):>10}/s   ratio {ratio}")
        for key, value in r.extra.items():
            lines.append(f"    {key}: {value}")
    return "\n".join(lines)


def _rate(rate: float) -> str:
    """Millions for the tuple rates; plain for the small ones (pauses, checkpoints per second)."""
    return f"{rate / 1e6:.3f} M" if rate >= 1000 else f"{rate:.3f}"
