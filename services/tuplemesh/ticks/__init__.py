"""Tick tuples: a timer per ticking bolt executor, plugged in through the feature interface."""

from tuplemesh.ticks.feature import TicksFeature, feature
from tuplemesh.ticks.settings import tick_period
from tuplemesh.ticks.timer import TICK, TickTimer

__all__ = ["TICK", "TickTimer", "TicksFeature", "feature", "tick_period"]
