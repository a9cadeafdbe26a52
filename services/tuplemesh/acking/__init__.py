"""Guaranteed processing (Storm's acking): the acker bolt, the spout-side tracker, the per-executor
acker mailbox, the collectors of tracked tuple trees, and the null object for acking off."""

from tuplemesh.acking.acker import ACKER, ACKING_STREAM, SYSTEM_STREAMS, VERDICT_STREAM, AckerBolt, with_acker
from tuplemesh.core.tracker import SpoutTracker

__all__ = [
    "ACKER",
    "ACKING_STREAM",
    "SYSTEM_STREAMS",
    "VERDICT_STREAM",
    "AckerBolt",
    "SpoutTracker",
    "with_acker",
]
