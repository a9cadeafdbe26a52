"""Guaranteed processing (Storm's acking): the acker bolt, the spout-side tracker, the per-executor
acker mailbox, the collectors of tracked tuple trees and the executors' acking when it is on (the
port executors name, and its null object for acking off, are ``tuplemesh.core.acking``)."""

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
