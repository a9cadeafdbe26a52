"""Windowed bolts: count and duration windows, sliding and tumbling, in processing or event time,
with watermarks carried across workers and late tuples on their own stream (Storm's windowing)."""

from tuplemesh.windowing.bolt import (
    LATE_FIELDS,
    StatefulWindowedBolt,
    StatefulWindowedBoltRunner,
    WindowedBolt,
    WindowedBoltRunner,
)
from tuplemesh.windowing.engine import WindowEngine
from tuplemesh.windowing.spec import Count, Duration, WindowSpec
from tuplemesh.windowing.watermarks import WatermarkTracker
from tuplemesh.windowing.window import Window

__all__ = [
    "LATE_FIELDS",
    "Count",
    "Duration",
    "StatefulWindowedBolt",
    "StatefulWindowedBoltRunner",
    "WatermarkTracker",
    "Window",
    "WindowEngine",
    "WindowSpec",
    "WindowedBolt",
    "WindowedBoltRunner",
]
