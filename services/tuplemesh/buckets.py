"""`Buckets`: a histogram updated on the hot path without locks, exported at scrape time."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

__all__ = ["BATCH_SIZE_BUCKETS", "SECONDS_BUCKETS", "Buckets", "make_buckets"]

SECONDS_BUCKETS = (
    0.00001,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.5,
    1.0,
)
BATCH_SIZE_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000)


class Buckets:
    """Counts of observations per upper bound. One writing thread; readers see a snapshot.

    Cheaper than prometheus_client.Histogram on a hot path (no lock): a worker observes once
    per batch, and the scrape-time collector turns the counts into a Prometheus histogram.
    A weighted observation counts ``weight`` observations of one value: a batch of n tuples timed
    as a whole is n observations of its mean, so ``_count`` counts tuples, not batches.
    """

    __slots__ = ("bounds", "count", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.total = 0.0
        self.count = 0

    def observe(self, value: float, weight: int = 1) -> None:
        """Record ``weight`` observations of ``value`` (``weight`` >= 1; not checked, hot path)."""
        self.counts[bisect_left(self.bounds, value)] += weight
        self.total += value * weight
        self.count += weight

    def cumulative(self) -> list[tuple[str, float]]:
        """``[(le, cumulative count), ..., ("+Inf", count)]`` for HistogramMetricFamily."""
        out = []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), list(self.counts), strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), float(running)))
        return out


class _Off(Buckets):
    """What ``metrics.enabled: false`` gives the data path: observations cost one empty call."""

    def observe(self, value: float, weight: int = 1) -> None:
        return None


def make_buckets(bounds: Sequence[float], enabled: bool) -> Buckets:
    return Buckets(bounds) if enabled else _Off(bounds)
