"""`StateSettings`: the checkpoint config, and `RedisSettings`: the redis store's, typed and in seconds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuplemesh.config import as_config
from tuplemesh.state.stores import backend_name

__all__ = ["RedisSettings", "StateSettings"]


@dataclass(frozen=True)
class StateSettings:
    """Where checkpoints go and how often they are taken. Immutable."""

    backend: str  # with ``auto`` decided
    interval_seconds: float  # from the end of one checkpoint to the start of the next
    timeout_seconds: float  # a checkpoint still incomplete by then is abandoned
    alignment_buffer: int  # tuples a task may hold back while aligning
    log_interval_seconds: float  # between two log lines of one kind (the rest are counted)

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> StateSettings:
        conf = as_config(conf)
        return cls(
            backend=backend_name(conf),
            interval_seconds=conf.seconds("topology.state.checkpoint.interval.ms"),
            timeout_seconds=conf.seconds("topology.state.checkpoint.timeout.ms"),
            alignment_buffer=conf["topology.state.alignment.buffer.size"],
            log_interval_seconds=conf.seconds("tuplemesh.log.rate.limit.secs"),
        )

    @property
    def tick_seconds(self) -> float:
        """How often the coordinator looks at the clock and the store: a tenth of the interval,
        within 10..200 ms, so a restarted worker is noticed quickly and checkpoints start on time."""
        return min(0.2, max(0.01, self.interval_seconds / 10))


@dataclass(frozen=True)
class RedisSettings:
    """Where the redis state store is and how long one call to it may take. Immutable."""

    url: str
    password: str  # "" for none (or the one in ``url``)
    timeout_seconds: float  # one call, connecting included

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> RedisSettings:
        conf = as_config(conf)
        return cls(
            url=conf["topology.state.redis.url"],
            password=conf["topology.state.redis.password"],
            timeout_seconds=conf.seconds("topology.state.redis.timeout.ms"),
        )
