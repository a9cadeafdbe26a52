"""`AckingSettings`: the guaranteed-processing config, typed and in seconds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuplemesh.config import as_config

__all__ = ["AckingSettings"]


@dataclass(frozen=True)
class AckingSettings:
    """How many ackers, and how long and how many tuple trees a spout may keep open. Immutable."""

    acker_executors: int  # 0: acking off
    message_timeout_seconds: float  # a tree not fully acked by then is failed
    max_spout_pending: int  # open trees per spout task; 0: no limit

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> AckingSettings:
        conf = as_config(conf)
        return cls(
            acker_executors=conf["topology.acker.executors"],
            message_timeout_seconds=conf.seconds("topology.message.timeout.secs"),
            max_spout_pending=conf["topology.max.spout.pending"],
        )
