"""Output collectors: the per-task object a spout or bolt emits through, on top of the Outbox.

These are the collectors for tuples outside any tuple tree (acking off, or a spout emit without a
message id); ``tuplemesh.acking.collectors`` extends them for tracked trees. The variant is chosen
once per task when the executor is built, so the untracked path carries no acking checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tuplemesh.core.outbox import Outbox
from tuplemesh.core.stream_plan import StreamPlan
from tuplemesh.core.target_load import TargetLoad
from tuplemesh.core.tracker import SpoutTracker
from tuplemesh.topology import DEFAULT_STREAM, Columns, Fields, Tuple
from tuplemesh.topology.groupings import Grouping, TaskChooser

__all__ = [
    "BoltOutputCollector",
    "Emitter",
    "SpoutOutputCollector",
    "StreamRoute",
    "build_routes",
    "check_ids",
]


def check_ids(count: int, msg_ids: Sequence[Any] | None, batch_id: Any) -> None:
    """``emit_columns``' ids: one per row, or one for the batch, not both."""
    if msg_ids is not None and batch_id is not None:
        raise ValueError("emit_columns: give msg_ids (one per row) or batch_id (one for all), not both")
    if msg_ids is not None and len(msg_ids) != count:
        raise ValueError(f"emit_columns: {count} rows but {len(msg_ids)} msg_ids")


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


def build_routes(
    streams: Mapping[str, StreamPlan], local_tasks: frozenset[int], target_load: TargetLoad | None = None
) -> dict[str, StreamRoute]:
    """Per-stream routes of one emitting task (fresh choosers: shuffle state is per task);
    ``target_load``: the worker's view of its targets, for load-aware groupings (None: each
    grouping's own chooser)."""
    return {
        name: StreamRoute(
            name,
            plan.stream_id,
            plan.fields,
            plan.direct,
            [_chooser(g, tasks, local_tasks, plan.fields, target_load) for g, tasks in plan.targets],
            plan.direct_targets,
        )
        for name, plan in streams.items()
    }


def _chooser(
    grouping: Grouping,
    tasks: tuple[int, ...],
    local_tasks: frozenset[int],
    fields: Fields,
    target_load: TargetLoad | None,
) -> TaskChooser:
    if target_load is not None and grouping.load_aware:
        chooser = target_load.shuffle(grouping.spread_over(tasks, local_tasks))
        if chooser is not None:
            return chooser
    return grouping.chooser(tasks, local_tasks, fields)


class Emitter:
    """Stream checks shared by spout and bolt collectors."""

    def __init__(
        self, task: int, component: str, routes: Mapping[str, StreamRoute], outbox: Outbox, counters: Any
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

    def _many_route(self, stream: str, rows: Sequence[Sequence[Any]]) -> StreamRoute:
        """The route for ``emit_many``: every row is checked before any is delivered."""
        route = self._routes.get(stream)
        if route is None or route.direct:
            return self._route(stream, rows[0] if rows else (), direct=False)
        width = len(route.fields)
        for values in rows:
            if len(values) != width:
                return self._route(stream, values, direct=False)
        return route

    def _emit_many(self, rows: Sequence[Sequence[Any]], stream: str) -> None:
        """Deliver untracked ``rows`` on ``stream``: one route check and one Outbox call for all."""
        route = self._many_route(stream, rows)
        if not rows:
            return
        self._outbox.deliver_many(
            self.task, self.component, stream, route.stream_id, route.fields, rows, route.choosers
        )
        self._counters.emitted += len(rows)

    def _columns_route(self, stream: str, columns: Sequence[Sequence[Any]]) -> tuple[StreamRoute, int]:
        """The route for ``emit_columns`` and its row count: one column per declared field, all
        of one length, checked before any row is delivered."""
        route = self._routes.get(stream)
        if route is None:
            route = self._route(stream, (), direct=False)  # raises, naming the stream
        if route.direct:
            raise ValueError(
                f"component {self.component!r} stream {stream!r}: use emit_direct for this stream"
            )
        if len(columns) != len(route.fields):
            raise ValueError(
                f"component {self.component!r} stream {stream!r}: emit_columns got {len(columns)} "
                f"columns for {len(route.fields)} declared fields {list(route.fields)}"
            )
        if not columns:
            raise ValueError(
                f"component {self.component!r} stream {stream!r} declares no fields: use emit_many"
            )
        count = len(columns[0])
        for name, column in zip(route.fields, columns, strict=True):
            if len(column) != count:
                raise ValueError(
                    f"component {self.component!r} stream {stream!r}: column {name!r} has "
                    f"{len(column)} values, column {route.fields.names[0]!r} has {count}"
                )
        return route, count

    def _emit_columns(
        self, columns: Sequence[Sequence[Any]], stream: str, edges: Callable[[], dict[int, int]] | None = None
    ) -> None:
        """Deliver the rows held as ``columns`` on ``stream``: one route check and one Outbox
        call for all, each grouping splitting the columns at once; untracked, or (``edges``)
        tracked as a whole, each part delivered taking its anchors from ``edges``."""
        route, count = self._columns_route(stream, columns)
        if not count:
            return
        self._outbox.deliver_columns(
            self.task,
            self.component,
            stream,
            route.stream_id,
            route.fields,
            columns,
            count,
            route.choosers,
            edges,
        )
        self._counters.emitted += count

    def _direct_route(self, task: int, values: Sequence[Any], stream: str) -> StreamRoute:
        route = self._route(stream, values, direct=True)
        if task not in route.direct_targets:
            raise ValueError(
                f"component {self.component!r} stream {stream!r}: task {task!r} does not subscribe "
                f"to it with direct_grouping (legal: {sorted(route.direct_targets)})"
            )
        return route


class SpoutOutputCollector(Emitter):
    """A spout task's collector (SpoutCollector) when no tuple tree is tracked. Executor thread only.

    An emit with a ``msg_id`` is complete at once: the spout's ``ack(msg_id)`` is called right
    after the ``next_tuple`` that emitted it, as Storm does with acking off.
    """

    def __init__(
        self,
        task: int,
        component: str,
        routes: Mapping[str, StreamRoute],
        outbox: Outbox,
        counters: Any,
        tracker: SpoutTracker,
    ) -> None:
        super().__init__(task, component, routes, outbox, counters)
        self._tracker = tracker

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None) -> None:
        """Emit ``values`` on ``stream`` to every subscriber chosen by its grouping."""
        route = self._routes.get(stream)
        if route is None or route.direct or len(values) != len(route.fields):
            route = self._route(stream, values, direct=False)
        self._counters.emitted += 1
        self._outbox.deliver(
            self.task, self.component, stream, route.stream_id, route.fields, values, route.choosers
        )
        if msg_id is not None:
            self._tracker.completed_at_once(self.task, msg_id)

    def emit_many(
        self,
        rows: Sequence[Sequence[Any]],
        stream: str = DEFAULT_STREAM,
        msg_ids: Sequence[Any] | None = None,
    ) -> None:
        """Emit each of ``rows`` on ``stream``, as ``emit`` would, in one call: the rows for one task
        in another worker travel as one payload. ``msg_ids``, when given, has one id per row."""
        if msg_ids is None:
            self._emit_many(rows, stream)
            return
        if len(msg_ids) != len(rows):
            raise ValueError(f"emit_many: {len(rows)} rows but {len(msg_ids)} msg_ids")
        self._emit_many(rows, stream)
        for msg_id in msg_ids:
            if msg_id is not None:
                self._tracker.completed_at_once(self.task, msg_id)

    def emit_columns(
        self,
        columns: Sequence[Sequence[Any]],
        stream: str = DEFAULT_STREAM,
        msg_ids: Sequence[Any] | None = None,
        batch_id: Any = None,
    ) -> None:
        """Emit the rows held as ``columns`` (one sequence per declared field, all of one length)
        on ``stream``, as ``emit_many`` would emit them as rows: each grouping routes the whole
        batch at once, and the rows for one task travel as columns. ``msg_ids``, when given, has
        one id per row; ``batch_id`` is one id for the whole batch (one tree with acking on)."""
        if msg_ids is None and batch_id is None:
            self._emit_columns(columns, stream)
            return
        _, count = self._columns_route(stream, columns)
        check_ids(count, msg_ids, batch_id)
        self._emit_columns(columns, stream)
        for msg_id in msg_ids if msg_ids is not None else (batch_id,):
            if msg_id is not None:
                self._tracker.completed_at_once(self.task, msg_id)

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None
    ) -> None:
        """Emit ``values`` on direct ``stream`` to ``task``, which must subscribe with direct_grouping."""
        route = self._direct_route(task, values, stream)
        self._counters.emitted += 1
        self._outbox.deliver_direct(
            task, self.task, self.component, stream, route.stream_id, route.fields, values
        )
        if msg_id is not None:
            self._tracker.completed_at_once(self.task, msg_id)


class BoltOutputCollector(Emitter):
    """A bolt task's collector (BoltCollector) when no tuple tree is tracked. Executor thread only.

    Anchors are accepted and ignored; ``ack`` and ``fail`` only count.
    """

    def emit(
        self,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit ``values`` on ``stream`` (``anchors`` matter only when acking is on)."""
        route = self._routes.get(stream)
        if route is None or route.direct or len(values) != len(route.fields):
            route = self._route(stream, values, direct=False)
        self._counters.emitted += 1
        self._outbox.deliver(
            self.task, self.component, stream, route.stream_id, route.fields, values, route.choosers
        )

    def emit_many(
        self,
        rows: Sequence[Sequence[Any]],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit each of ``rows`` on ``stream``, as ``emit`` would, in one call: the rows for one task
        in another worker travel as one payload. ``anchors`` apply to every row."""
        self._emit_many(rows, stream)

    def emit_columns(
        self,
        columns: Sequence[Sequence[Any]],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit the rows held as ``columns`` (one sequence per declared field, all of one length)
        on ``stream``, as ``emit_many`` would emit them as rows: each grouping routes the whole
        batch at once, and the rows for one task travel as columns. ``anchors`` apply to every
        row (a batch given to ``process`` may be an anchor as a whole)."""
        self._emit_columns(columns, stream)

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit ``values`` on direct ``stream`` to ``task``, which must subscribe with direct_grouping."""
        route = self._direct_route(task, values, stream)
        self._counters.emitted += 1
        self._outbox.deliver_direct(
            task, self.task, self.component, stream, route.stream_id, route.fields, values
        )

    def ack(self, tup: Tuple | Columns) -> None:
        """``tup`` (or a whole batch given to ``process``) is fully processed by this task."""
        self._counters.acked += len(tup) if tup.__class__ is Columns else 1

    def fail(self, tup: Tuple | Columns) -> None:
        """``tup`` (or a whole batch given to ``process``) failed here."""
        self._counters.failed += len(tup) if tup.__class__ is Columns else 1

    def rows_of(self, batch: Columns) -> list[Tuple]:
        """The rows of ``batch`` as tuples, for a bolt without ``process`` (untracked here: a
        batch tracked as a whole, which only a tracking collector's executor gets, is read as is)."""
        return batch.tuples() if batch.anchors is None else batch.row_values_as_tuples()
