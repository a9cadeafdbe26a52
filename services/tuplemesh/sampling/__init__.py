"""Tuple sampling for Admin.WatchTuples: watches attached to executors at run time, each with its
filter, sample rate, rate limit and bounded queue. A feature (tuplemesh.core.feature)."""

from tuplemesh.sampling.feature import ExecutorTaps, Sampling, feature
from tuplemesh.sampling.watch import BROADCAST_TASK, Sample, TupleWatch

__all__ = ["BROADCAST_TASK", "ExecutorTaps", "Sample", "Sampling", "TupleWatch", "feature"]
