"""Guaranteed processing on or off, decided once per executor when it is built.

``NoAcking`` (the null object) hands out the plain collectors and calls ``execute`` directly;
``TreeAcking`` hands out the tracked collectors that share one AckerMailbox per executor. Either
way the choice is made at construction, so no per-tuple code asks whether acking is on.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tuplemesh.acking.acker import ACKING_STREAM
from tuplemesh.acking.collectors import TrackedBoltCollector, TrackedSpoutCollector, TreeIds
from tuplemesh.acking.mailbox import AckerMailbox
from tuplemesh.core.collectors import BoltOutputCollector, SpoutOutputCollector, StreamRoute
from tuplemesh.core.outbox import Outbox
from tuplemesh.core.tracker import SpoutTracker
from tuplemesh.topology import BasicBolt, Bolt, Tuple

__all__ = ["ExecutorAcking", "NoAcking", "TreeAcking", "executor_acking"]


class ExecutorAcking(Protocol):
    """How one executor's tasks take part in guaranteed processing."""

    def spout_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any, tracker: SpoutTracker
    ) -> SpoutOutputCollector: ...

    def bolt_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any
    ) -> BoltOutputCollector: ...

    def bolt_call(self, bolt: Bolt, collector: BoltOutputCollector) -> Callable[[Tuple], None]: ...


class NoAcking:
    """Acking off: plain collectors, ``execute`` called as is."""

    def __init__(self, outbox: Outbox, component: str) -> None:
        self._outbox = outbox
        self._component = component

    def spout_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any, tracker: SpoutTracker
    ) -> SpoutOutputCollector:
        return SpoutOutputCollector(task, self._component, routes, self._outbox, counters, tracker)

    def bolt_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any
    ) -> BoltOutputCollector:
        return BoltOutputCollector(task, self._component, routes, self._outbox, counters)

    def bolt_call(self, bolt: Bolt, collector: BoltOutputCollector) -> Callable[[Tuple], None]:
        return bolt.execute


class TreeAcking:
    """Acking on: tracked collectors sharing one AckerMailbox and one id source per executor."""

    def __init__(
        self,
        outbox: Outbox,
        component: str,
        first_task: int,
        acking_route: StreamRoute,
        acker_tasks: Sequence[int],
        local_tasks: frozenset[int],
    ) -> None:
        self._outbox = outbox
        self._component = component
        mailbox = AckerMailbox(outbox, first_task, component, acking_route.stream_id, acking_route.fields)
        # Root and edge ids must not repeat across tasks, processes or restarts: seed from the OS.
        self.trees = TreeIds(acker_tasks, local_tasks, mailbox, secrets.randbits(64))

    def spout_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any, tracker: SpoutTracker
    ) -> SpoutOutputCollector:
        return TrackedSpoutCollector(
            task, self._component, routes, self._outbox, counters, tracker, self.trees
        )

    def bolt_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any
    ) -> BoltOutputCollector:
        return TrackedBoltCollector(task, self._component, routes, self._outbox, counters, self.trees)

    def bolt_call(self, bolt: Bolt, collector: BoltOutputCollector) -> Callable[[Tuple], None]:
        """``execute`` itself, except for a BasicBolt: its emits are anchored to the input, and
        the input is acked after ``execute`` returns (an exception fails it instead, in the caller)."""
        if not isinstance(bolt, BasicBolt) or not isinstance(collector, TrackedBoltCollector):
            return bolt.execute
        execute = bolt.execute
        tracked = collector

        def execute_and_ack(tup: Tuple) -> None:
            tracked.current_input = tup
            try:
                execute(tup)
            finally:
                tracked.current_input = None
            tracked.ack(tup)

        return execute_and_ack


def executor_acking(
    outbox: Outbox,
    component: str,
    first_task: int,
    routes: Mapping[str, StreamRoute],
    acker_tasks: Sequence[int],
    local_tasks: frozenset[int],
) -> ExecutorAcking:
    """Acking for one executor: on when the topology has ackers and the component reports to
    them (every component but the ackers themselves)."""
    acking_route = routes.get(ACKING_STREAM)
    if not acker_tasks or acking_route is None:
        return NoAcking(outbox, component)
    return TreeAcking(outbox, component, first_task, acking_route, acker_tasks, local_tasks)
