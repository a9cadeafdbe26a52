"""Output collectors: the per-task object a spout or bolt emits through, on top of the Outbox."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.topology import DEFAULT_STREAM, Fields, Topology, Tuple
from tuplemesh.topology.groupings import TaskChooser
from tuplemesh.worker.outbox import Outbox

__all__ = ["OutputCollector", "StreamRoute"]


class StreamRoute:
    """Everything an emit on one stream needs, computed once per task."""

    __slots__ = ("choosers", "direct", "direct_targets", "fields", "stream", "stream_id")

    def __init__(
        self,
        stream: str,
        stream_id: int,
        fields: Fields,
        direct: bool,
        choosers: list[TaskChooser],
        direct_targets: frozenset[int],
    ) -> None:
        self.stream = stream
        self.stream_id = stream_id
        self.fields = fields
        self.direct = direct
        self.choosers = choosers
        self.direct_targets = direct_targets


class OutputCollector:
    """Collector of one task; implements both SpoutCollector and BoltCollector. Executor thread only.

    With acking off (this release's only mode) ``ack`` and ``fail`` only count; anchors and message
    ids are accepted so topologies written for guaranteed processing run unchanged.
    """

    def __init__(
        self,
        task: int,
        component: str,
        routes: Mapping[str, StreamRoute],
        outbox: Outbox,
        counters: Any,
    ) -> None:
        self.task = task
        self.component = component
        self._routes = routes
        self._outbox = outbox
        self._counters = counters

    def _route(self, stream: str, values: Sequence[Any], direct: bool) -> StreamRoute:
        route = self._routes.get(stream)
        if route is None:
            raise ValueError(
                f"component {self.component!r} emitted on undeclared stream {stream!r} "
                f"(declared: {sorted(self._routes)})"
            )
        if len(values) != len(route.fields):
            raise ValueError(
                f"component {self.component!r} stream {stream!r}: emitted {len(values)} values "
                f"for {len(route.fields)} declared fields {list(route.fields)}"
            )
        if route.direct != direct:
            how = "emit_direct" if route.direct else "emit"
            raise ValueError(f"component {self.component!r} stream {stream!r}: use {how} for this stream")
        return route

    def emit(
        self,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
        msg_id: Any = None,
    ) -> None:
        """Emit ``values`` on ``stream`` to every subscriber chosen by its grouping."""
        route = self._routes.get(stream)
        if route is None or route.direct or len(values) != len(route.fields):
            route = self._route(stream, values, direct=False)
        self._counters.emitted += 1
        self._outbox.deliver(
            self.task, self.component, stream, route.stream_id, route.fields, values, route.choosers
        )

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
        msg_id: Any = None,
    ) -> None:
        """Emit ``values`` on direct ``stream`` to ``task``, which must subscribe with direct_grouping."""
        route = self._route(stream, values, direct=True)
        if task not in route.direct_targets:
            raise ValueError(
                f"component {self.component!r} stream {stream!r}: task {task!r} does not subscribe "
                f"to it with direct_grouping (legal: {sorted(route.direct_targets)})"
            )
        self._counters.emitted += 1
        self._outbox.deliver_direct(
            task, self.task, self.component, stream, route.stream_id, route.fields, values
        )

    def ack(self, tup: Tuple) -> None:
        self._counters.acked += 1

    def fail(self, tup: Tuple) -> None:
        self._counters.failed += 1


def build_routes(
    topology: Topology,
    component: str,
    task_tasks: Mapping[str, tuple[int, ...]],
    local_tasks: frozenset[int],
    stream_ids: Mapping[tuple[str, str], int],
) -> dict[str, StreamRoute]:
    """Per-stream routes of one emitting task (fresh choosers: shuffle state is per task)."""
    routes: dict[str, StreamRoute] = {}
    for stream, definition in topology.components[component].streams.items():
        choosers: list[TaskChooser] = []
        direct_targets: set[int] = set()
        for target, grouping in topology.subscribers(component, stream):
            tasks = task_tasks[target]
            if grouping.direct:
                direct_targets.update(tasks)
            else:
                choosers.append(grouping.chooser(tasks, local_tasks, definition.fields))
        routes[stream] = StreamRoute(
            stream,
            stream_ids[(component, stream)],
            definition.fields,
            definition.direct,
            choosers,
            frozenset(direct_targets),
        )
    return routes
