"""Tick tuples: a timer per ticking bolt executor, plugged in through the feature interface."""

from tuplemesh.ticks.feature import TicksFeature, feature
from tuplemesh.ticks.timer import TICK, TickTimer, tick_period

__all__ = ["TICK", "TickTimer", "TicksFeature", "feature", "tick_period"]
