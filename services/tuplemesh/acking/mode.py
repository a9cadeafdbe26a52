"""Acking on, decided once per executor when it is built. The executor names only the port
(`tuplemesh.core.acking`: ``ExecutorAcking``, and ``NoAcking`` for acking off).

``TreeAcking`` hands out the tracked collectors that share one AckerMailbox per executor, and the
calls that ack a BasicBolt's input once it returns. `acking_of` is what the worker plan loads
(the ``acking`` of this package's ``FEATURE``): the factory for a topology's executors, tracked
when the topology has ackers.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from tuplemesh.acking.acker import ACKER, ACKING_STREAM, VERDICT_STREAM, with_ackers
from tuplemesh.acking.collectors import TrackedBoltCollector, TrackedSpoutCollector, TreeIds
from tuplemesh.acking.mailbox import AckerMailbox
from tuplemesh.core.acking import AckingFactory, AckingSettings, ExecutorAcking, NoAcking, Verdict
from tuplemesh.core.collectors import BoltOutputCollector, SpoutOutputCollector, StreamRoute
from tuplemesh.core.feature_spec import FeatureSpec
from tuplemesh.core.outbox import Outbox
from tuplemesh.core.tracker import SpoutTracker
from tuplemesh.topology import BasicBolt, BatchBolt, Bolt, ColumnarBolt, Columns, Topology, Tuple
from tuplemesh.topology.assignment import Assignment

__all__ = ["FEATURE", "TreeAcking", "acking_of", "executor_acking", "needs_acking"]


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

    def batch_call(self, bolt: BatchBolt, collector: BoltOutputCollector) -> Callable[[list[Tuple]], None]:
        """``execute_batch`` itself, except for a BasicBolt, whose inputs are all acked once
        ``execute_batch`` returns (when it raises, the caller fails them all). Its emits are
        anchored to the inputs passed as ``anchors``."""
        execute_batch = bolt.execute_batch
        if not isinstance(bolt, BasicBolt) or not isinstance(collector, TrackedBoltCollector):
            return execute_batch
        tracked = collector

        def execute_batch_and_ack(tuples: list[Tuple]) -> None:
            execute_batch(tuples)
            ack = tracked.ack
            for tup in tuples:
                ack(tup)

        return execute_batch_and_ack

    def process_call(self, bolt: ColumnarBolt, collector: BoltOutputCollector) -> Callable[[Columns], None]:
        """``process`` itself, except for a BasicBolt, whose inputs (the batch's rows) are all
        acked once ``process`` returns (when it raises, the caller fails them all). Its emits are
        anchored to the inputs passed as ``anchors``."""
        process = bolt.process
        if not isinstance(bolt, BasicBolt) or not isinstance(collector, TrackedBoltCollector):
            return process
        tracked = collector

        def process_and_ack(batch: Columns) -> None:
            process(batch)
            tracked.ack(batch)  # once when tracked as a whole, else each row

        return process_and_ack

    def verdict(self, tup: Tuple) -> Verdict | None:
        """An acker's ``[acked roots, failed roots]`` on ``VERDICT_STREAM``; None for another
        stream's tuple."""
        if tup.source_stream != VERDICT_STREAM:
            return None
        values = tup.values
        if len(values) != 2:
            raise ValueError(f"a verdict holds 2 lists (acked roots, failed roots), this one {len(values)}")
        return values[0], values[1]


def executor_acking(
    acker_tasks: Sequence[int],
    outbox: Outbox,
    component: str,
    first_task: int,
    routes: Mapping[str, StreamRoute],
    local_tasks: frozenset[int],
) -> ExecutorAcking:
    """Acking for one executor of a topology whose ackers are ``acker_tasks``: on when it has
    ackers and the component reports to them (every component but the ackers themselves)."""
    acking_route = routes.get(ACKING_STREAM)
    if not acker_tasks or acking_route is None:
        return NoAcking(outbox, component)
    return TreeAcking(outbox, component, first_task, acking_route, acker_tasks, local_tasks)


def acking_of(topology: Topology, assignment: Assignment) -> AckingFactory:
    """How the executors of ``topology`` (placed by ``assignment``) take part in acking: tracked
    when it has ackers (`with_ackers` added them), else not at all."""
    return partial(executor_acking, assignment.component_tasks.get(ACKER, ()))


def needs_acking(topology: Topology, conf: Mapping[str, Any]) -> str | None:
    """Why ``topology`` running with ``conf`` needs the acking feature: ackers asked for."""
    ackers = AckingSettings.from_config(conf).acker_executors
    return f"topology.acker.executors is {ackers}" if ackers > 0 else None


#: The registry's entry: the ackers in every topology that asks for them, how its executors
#: take part in acking, and what needs it (ackers asked for).
FEATURE = FeatureSpec("acking", topology_part=with_ackers, acking=acking_of, needed_by=needs_acking)
