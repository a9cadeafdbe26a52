"""Output collectors: the per-task object a spout or bolt emits through, on top of the Outbox."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.topology import DEFAULT_STREAM, AnchoredTuple, Fields, Topology, Tuple
from tuplemesh.topology.acker import ACKING_STREAM
from tuplemesh.topology.groupings import TaskChooser
from tuplemesh.worker.outbox import Outbox
from tuplemesh.worker.tracker import SpoutTracker

__all__ = [
    "AckerMailbox",
    "Acking",
    "BoltOutputCollector",
    "SpoutOutputCollector",
    "StreamRoute",
    "build_routes",
]


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


class AckerMailbox:
    """An executor's pending messages to ackers, one box ``[inits, acks, fails]`` per acker task.

    Boxes go out as one ``__acking`` tuple each when the executor flushes its Outbox (the Outbox
    calls ``post`` first), or as soon as a box holds ``limit`` entries. While a box is open it
    counts as one tuple in ``outbox.pending``, so the flush timer and idle checks see it.
    """

    def __init__(self, outbox: Outbox, task: int, component: str, route: StreamRoute, limit: int = 256):
        self._outbox = outbox
        self._task = task  # any task of the executor: ackers do not look at the source
        self._component = component
        self._route = route
        self._limit = limit
        self._boxes: dict[int, tuple[list[int], list[int], list[int]]] = {}
        outbox.before_flush = self.post

    def _box(self, acker: int) -> tuple[list[int], list[int], list[int]]:
        box = self._boxes.get(acker)
        if box is None:
            box = self._boxes[acker] = ([], [], [])
            self._outbox.pending += 1
        return box

    def init(self, acker: int, root: int, value: int, spout_task: int) -> None:
        box = self._boxes.get(acker) or self._box(acker)
        inits = box[0]
        inits += (root, value, spout_task)
        if len(inits) >= 3 * self._limit:
            self._post_one(acker)

    def ack(self, acker: int, root: int, value: int) -> None:
        box = self._boxes.get(acker) or self._box(acker)
        acks = box[1]
        acks += (root, value)
        if len(acks) >= 2 * self._limit:
            self._post_one(acker)

    def fail(self, acker: int, root: int) -> None:
        self._box(acker)[2].append(root)

    def _post_one(self, acker: int) -> None:
        box = self._boxes.pop(acker)
        self._outbox.pending -= 1
        self._deliver(acker, box)

    def post(self) -> None:
        """Hand every open box to the Outbox (called by ``Outbox.flush`` before it flushes)."""
        boxes, self._boxes = self._boxes, {}
        self._outbox.pending -= len(boxes)
        for acker, box in boxes.items():
            self._deliver(acker, box)

    def _deliver(self, acker: int, box: tuple[list[int], list[int], list[int]]) -> None:
        route = self._route
        self._outbox.deliver_one(
            acker, self._task, self._component, ACKING_STREAM, route.stream_id, route.fields, box, None
        )


class Acking:
    """What a collector needs when guaranteed processing is on: ids, acker tasks, the mailbox."""

    __slots__ = ("acker_tasks", "local_ackers", "mailbox", "new_id")

    def __init__(
        self, acker_tasks: Sequence[int], local_tasks: frozenset[int], mailbox: AckerMailbox, seed: int
    ) -> None:
        self.acker_tasks = tuple(acker_tasks)
        # positions (root % n) of the ackers in this worker: roots picked there keep inits and
        # verdicts local
        self.local_ackers = [i for i, t in enumerate(self.acker_tasks) if t in local_tasks]
        self.new_id = random.Random(seed).getrandbits  # call with 64: one random 64-bit id
        self.mailbox = mailbox

    def acker_of(self, root: int) -> int:
        return self.acker_tasks[root % len(self.acker_tasks)]

    def new_root(self) -> int:
        """A random root id owned by an acker in this worker when there is one."""
        if not self.local_ackers:
            return self.new_id(64)
        n = len(self.acker_tasks)
        r = self.new_id(63)  # 63 bits: adding the offset below cannot pass 2**64
        return r - r % n + self.local_ackers[r % len(self.local_ackers)]  # root % n is that acker


class _Emitter:
    """Stream checks and plain (untracked) emits, shared by spout and bolt collectors."""

    def __init__(
        self,
        task: int,
        component: str,
        routes: Mapping[str, StreamRoute],
        outbox: Outbox,
        counters: Any,
        acking: Acking | None,
    ) -> None:
        self.task = task
        self.component = component
        self._routes = routes
        self._outbox = outbox
        self._counters = counters
        self._acking = acking

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

    def _direct_route(self, task: int, values: Sequence[Any], stream: str) -> StreamRoute:
        route = self._route(stream, values, direct=True)
        if task not in route.direct_targets:
            raise ValueError(
                f"component {self.component!r} stream {stream!r}: task {task!r} does not subscribe "
                f"to it with direct_grouping (legal: {sorted(route.direct_targets)})"
            )
        return route

    def _targets(self, route: StreamRoute, values: Sequence[Any], direct_task: int | None) -> Sequence[int]:
        if direct_task is not None:
            return [direct_task]
        choosers = route.choosers
        if len(choosers) == 1:
            return choosers[0].choose(values)
        return [task for chooser in choosers for task in chooser.choose(values)]

    def _deliver_tree(
        self, route: StreamRoute, values: Sequence[Any], task: int, anchors: dict[int, int]
    ) -> None:
        self._outbox.deliver_one(
            task, self.task, self.component, route.stream, route.stream_id, route.fields, values, anchors
        )


class SpoutOutputCollector(_Emitter):
    """A spout task's collector (SpoutCollector). Executor thread only.

    An emit with a ``msg_id`` starts a tuple tree when acking is on: the spout's ``ack(msg_id)``
    or ``fail(msg_id)`` is called later on the executor thread. With acking off (no acker
    executors), ``ack(msg_id)`` is called right after the ``next_tuple`` that emitted it, as Storm does.
    """

    def __init__(
        self,
        task: int,
        component: str,
        routes: Mapping[str, StreamRoute],
        outbox: Outbox,
        counters: Any,
        acking: Acking | None,
        tracker: SpoutTracker,
    ) -> None:
        super().__init__(task, component, routes, outbox, counters, acking)
        self._tracker = tracker

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None) -> None:
        """Emit ``values`` on ``stream`` to every subscriber chosen by its grouping."""
        route = self._routes.get(stream)
        if route is None or route.direct or len(values) != len(route.fields):
            route = self._route(stream, values, direct=False)
        self._counters.emitted += 1
        if msg_id is None or self._acking is None:
            self._outbox.deliver(
                self.task, self.component, stream, route.stream_id, route.fields, values, route.choosers
            )
            if msg_id is not None:
                self._tracker.completed_at_once(self.task, msg_id)
            return
        self._emit_root(route, values, msg_id, None)

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None
    ) -> None:
        """Emit ``values`` on direct ``stream`` to ``task``, which must subscribe with direct_grouping."""
        route = self._direct_route(task, values, stream)
        self._counters.emitted += 1
        if msg_id is None or self._acking is None:
            self._outbox.deliver_direct(
                task, self.task, self.component, stream, route.stream_id, route.fields, values
            )
            if msg_id is not None:
                self._tracker.completed_at_once(self.task, msg_id)
            return
        self._emit_root(route, values, msg_id, task)

    def _emit_root(self, route: StreamRoute, values: Sequence[Any], msg_id: Any, direct: int | None) -> None:
        acking = self._acking
        assert acking is not None
        new_id = acking.new_id
        root = acking.new_root()
        first_edges = 0
        targets = self._targets(route, values, direct)
        deliver_one = self._outbox.deliver_one  # inlined _deliver_tree: this runs once per tuple
        me, component, stream, stream_id, fields = (
            self.task,
            self.component,
            route.stream,
            route.stream_id,
            route.fields,
        )
        for task in targets:
            edge = new_id(64)
            first_edges ^= edge
            deliver_one(task, me, component, stream, stream_id, fields, values, {root: edge})
        if not targets:  # nobody subscribes: the tree is complete already (Storm acks it at once)
            self._tracker.completed_at_once(self.task, msg_id)
            return
        self._tracker.track(root, self.task, msg_id)
        acking.mailbox.init(acking.acker_of(root), root, first_edges, self.task)


class BoltOutputCollector(_Emitter):
    """A bolt task's collector (BoltCollector). Executor thread only.

    With acking on, an emit anchored to tuples in tracked trees joins those trees, and ``ack`` and
    ``fail`` report to the ackers. With acking off they only count.
    """

    def __init__(
        self,
        task: int,
        component: str,
        routes: Mapping[str, StreamRoute],
        outbox: Outbox,
        counters: Any,
        acking: Acking | None,
    ) -> None:
        super().__init__(task, component, routes, outbox, counters, acking)
        #: The tuple a BasicBolt is executing: its emits are anchored to it (set by the executor).
        self.current_input: Tuple | None = None

    def emit(
        self,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit ``values`` on ``stream``, anchored to ``anchors`` (tuples being processed)."""
        route = self._routes.get(stream)
        if route is None or route.direct or len(values) != len(route.fields):
            route = self._route(stream, values, direct=False)
        self._counters.emitted += 1
        trees = None if self._acking is None else self._anchor_tuples(anchors)
        if not trees:
            self._outbox.deliver(
                self.task, self.component, stream, route.stream_id, route.fields, values, route.choosers
            )
            return
        self._emit_anchored(route, values, trees, None)

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
        trees = None if self._acking is None else self._anchor_tuples(anchors)
        if not trees:
            self._outbox.deliver_direct(
                task, self.task, self.component, stream, route.stream_id, route.fields, values
            )
            return
        self._emit_anchored(route, values, trees, task)

    def _anchor_tuples(self, anchors: Sequence[Tuple] | Tuple | None) -> list[AnchoredTuple]:
        if anchors is None:
            anchors = self.current_input
            if anchors is None:
                return []
        if isinstance(anchors, Tuple):
            anchors = (anchors,)
        return [a for a in anchors if a.__class__ is AnchoredTuple]

    def _emit_anchored(
        self, route: StreamRoute, values: Sequence[Any], anchors: list[AnchoredTuple], direct: int | None
    ) -> None:
        """Storm's scheme: per delivery and anchor, one new edge id, XORed into the anchor's
        ``ack_val`` and into the new tuple's id for each of the anchor's roots."""
        assert self._acking is not None
        new_id = self._acking.new_id
        for task in self._targets(route, values, direct):
            ids: dict[int, int] = {}
            for anchor in anchors:
                edge = new_id(64)
                anchor.ack_val ^= edge
                for root in anchor.anchors:
                    ids[root] = ids.get(root, 0) ^ edge
            self._deliver_tree(route, values, task, ids)

    def ack(self, tup: Tuple) -> None:
        """``tup`` is fully processed by this task (its anchored emits are done)."""
        self._counters.acked += 1
        acking = self._acking
        if acking is not None and tup.__class__ is AnchoredTuple:
            ack_val = tup.ack_val
            ack = acking.mailbox.ack
            for root, edge in tup.anchors.items():
                ack(acking.acker_of(root), root, edge ^ ack_val)

    def fail(self, tup: Tuple) -> None:
        """``tup`` failed here: its whole tree fails now (the spout replays it)."""
        self._counters.failed += 1
        acking = self._acking
        if acking is not None and tup.__class__ is AnchoredTuple:
            for root in tup.anchors:
                acking.mailbox.fail(acking.acker_of(root), root)


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
