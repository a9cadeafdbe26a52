"""Ticks as a feature: a `TickTimer` per bolt executor whose component ticks, and the handler
that turns its TICK marker into one tick tuple per task on the executor thread."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.core.feature import ExecutorHooks, ExecutorView, FeatureContext, FeatureMetric, FeatureServer
from tuplemesh.core.feature_spec import FeatureSpec
from tuplemesh.ticks.settings import tick_period
from tuplemesh.ticks.timer import TICK, TickTimer
from tuplemesh.topology.tuple import tick_tuple

__all__ = ["FEATURE", "TicksFeature", "feature"]


class TicksFeature:
    """Tick timers of one worker, one per ticking bolt executor (by executor name)."""

    name = "ticks"

    def __init__(self, context: FeatureContext) -> None:
        self._context = context
        self.timers: dict[str, TickTimer] = {}

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        if not executor.is_bolt:
            return None
        component = self._context.topology.components[executor.component]
        period = tick_period(component.conf, self._context.conf)
        if period <= 0:
            return None
        timer = TickTimer(executor.name, executor.inbox, period)
        self.timers[executor.name] = timer

        def on_tick() -> None:
            # the bolt's own methods: a tick is neither acked (BasicBolt) nor failed on an error
            timer.pending = False
            executor.deliver_to_tasks(tick_tuple(), "a tick")

        # the timer lives with its executor: it starts with it and stops as it stops or halts
        return ExecutorHooks(markers={TICK: on_tick}, on_start=timer.start, on_stop=timer.stop)

    def start(self) -> None:
        pass  # each timer starts with its executor

    def stopping(self) -> None:
        pass  # nothing waits on callers from outside

    def stop(self) -> None:
        for timer in self.timers.values():
            timer.stop()

    def serve(self, where: FeatureServer) -> None:
        pass  # no gRPC service of its own

    def section(self) -> Mapping[str, Any]:
        return {
            name: {"period_seconds": t.period, "queued": t.queued, "skipped": t.skipped}
            for name, t in sorted(self.timers.items())
        }

    def metrics(self) -> Sequence[FeatureMetric]:
        return ()

    def snapshot_fields(self) -> Mapping[str, Any]:
        return {}


def feature(context: FeatureContext) -> TicksFeature:
    """The running part's factory (``FEATURE.build``): built for every worker (a component may tick
    without the topology-wide setting)."""
    return TicksFeature(context)


#: The registry's entry.
FEATURE = FeatureSpec("ticks", build=feature)
