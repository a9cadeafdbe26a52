"""Garbage-collector settings for a worker *process* (never applied by the library on import).

Every tuple in flight is a few GC-tracked containers, so with Python's default gen-0 threshold
(700) the collector runs thousands of times per second and rescans the in-flight set; measured on
word count it took most of the run. A worker raises the threshold and freezes what start-up
allocated (the topology, executors, rings) so collections scan only young objects.
"""

from __future__ import annotations

import gc
from collections.abc import Mapping
from typing import Any

from tuplemesh.worker.settings import WorkerSettings

__all__ = ["freeze_startup_objects", "tune_gc"]


def tune_gc(conf: Mapping[str, Any]) -> None:
    """Apply ``worker.gc.threshold`` to this process (0: leave the interpreter's settings)."""
    threshold = WorkerSettings.from_config(conf).gc_threshold
    if threshold:
        _, gen1, gen2 = gc.get_threshold()
        gc.set_threshold(threshold, max(gen1, 20), max(gen2, 20))


def freeze_startup_objects(conf: Mapping[str, Any]) -> None:
    """Move everything allocated so far out of the collector's reach (after start-up)."""
    if WorkerSettings.from_config(conf).gc_threshold:
        gc.collect()
        gc.freeze()
