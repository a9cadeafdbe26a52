"""`tick_period`: a component's tick period, typed and in seconds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuplemesh.config import as_config
from tuplemesh.topology.builder import TICK_FREQ_KEY

__all__ = ["tick_period"]


def tick_period(component_conf: Mapping[str, Any], conf: Mapping[str, Any]) -> float:
    """A component's tick period in seconds: its own setting (``tick_every``, in seconds),
    else the topology's; 0 for none."""
    if TICK_FREQ_KEY in component_conf:
        return float(component_conf[TICK_FREQ_KEY])
    return as_config(conf).seconds(TICK_FREQ_KEY) if TICK_FREQ_KEY in conf else 0.0
