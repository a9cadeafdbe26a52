"""Collectors for tracked tuple trees: roots started by spouts, anchored emits, acks and fails.

Storm's scheme (see ``tuplemesh.acking.acker``): every delivery of a tuple in a tree gets a random
64-bit edge id; inits, acks and fails go to the tree's acker through the executor's AckerMailbox.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tuplemesh.acking.mailbox import AckerMailbox
from tuplemesh.core.collectors import BoltOutputCollector, SpoutOutputCollector, StreamRoute, check_ids
from tuplemesh.core.outbox import Outbox
from tuplemesh.core.tracker import SpoutTracker
from tuplemesh.topology import (
    DEFAULT_STREAM,
    AnchoredTuple,
    Columns,
    Tuple,
)

__all__ = [
    "BatchEdges",
    "TrackedBoltCollector",
    "TrackedSpoutCollector",
    "TreeIds",
    "TupleEdges",
]


class TreeIds:
    """Root and edge ids, and which acker owns a root; one per executor (its tasks share the mailbox)."""

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


def _targets(route: StreamRoute, values: Sequence[Any], direct_task: int | None) -> Sequence[int]:
    if direct_task is not None:
        return [direct_task]
    choosers = route.choosers
    if len(choosers) == 1:
        return choosers[0].choose(values)
    return [task for chooser in choosers for task in chooser.choose(values)]


class BatchEdges:
    """Hands each part of a batch tracked as a whole its anchors (``Outbox.deliver_columns``'
    ``edges``): per part one new edge id, for each root, XORed into ``xor``. Once the emit
    returned (every part encoded and buffered), ``xor`` goes into the tree: a spout's init, or the
    anchoring batch's ``ack_val``; an emit that raised leaves the tree as it was."""

    __slots__ = ("new_id", "parts", "roots", "xor")

    def __init__(self, new_id: Callable[[int], int], roots: Sequence[int]) -> None:
        self.new_id = new_id
        self.roots = roots
        self.xor = 0
        self.parts = 0

    def __call__(self) -> dict[int, int]:
        edge = self.new_id(64)
        self.parts += 1
        self.xor ^= edge
        return {root: edge for root in self.roots}


def _rows(columns: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """The rows ``columns`` hold (an emit with a message id per row goes row by row)."""
    return [list(values) for values in zip(*columns, strict=True)]


class TupleEdges:
    """Hands each part of an emit anchored to tuples tracked one by one its anchors (as
    `BatchEdges` does for a batch tracked as a whole): per part and per anchoring tuple one new
    edge id, XORed into the part's value for each of that tuple's roots and kept for the tuple's
    ``ack_val``, which ``commit`` updates once the emit returned. A part is one node of every
    anchoring tuple's trees, so N anchors cost N edge ids per part, not per row (anchoring each
    of R rows to the N tuples took R x N)."""

    __slots__ = ("anchors", "new_id", "parts", "pending")

    def __init__(self, new_id: Callable[[int], int], anchors: list[AnchoredTuple]) -> None:
        self.new_id = new_id
        self.anchors = anchors
        self.pending = [0] * len(anchors)
        self.parts = 0

    def __call__(self) -> dict[int, int]:
        new_id, pending = self.new_id, self.pending
        values: dict[int, int] = {}
        for index, anchor in enumerate(self.anchors):
            edge = new_id(64)
            pending[index] ^= edge
            for root in anchor.anchors:
                values[root] = values.get(root, 0) ^ edge
        self.parts += 1
        return values

    def commit(self) -> None:
        """The emit went out: each anchoring tuple's edges join its ``ack_val``."""
        for anchor, edges in zip(self.anchors, self.pending, strict=True):
            anchor.ack_val ^= edges


class TrackedSpoutCollector(SpoutOutputCollector):
    """A spout task's collector with acking on: an emit with a ``msg_id`` starts a tuple tree, and
    the spout's ``ack(msg_id)`` or ``fail(msg_id)`` is called later on the executor thread."""

    def __init__(
        self,
        task: int,
        component: str,
        routes: Mapping[str, StreamRoute],
        outbox: Outbox,
        counters: Any,
        tracker: SpoutTracker,
        trees: TreeIds,
    ) -> None:
        super().__init__(task, component, routes, outbox, counters, tracker)
        self._trees = trees

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None) -> None:
        """Emit ``values`` on ``stream``; with a ``msg_id`` the emit is the root of a tracked tree."""
        route = self._routes.get(stream)
        if route is None or route.direct or len(values) != len(route.fields):
            route = self._route(stream, values, direct=False)
        self._counters.emitted += 1
        if msg_id is None:  # the untracked emit, inlined: this runs once per tuple
            self._outbox.deliver(
                self.task, self.component, stream, route.stream_id, route.fields, values, route.choosers
            )
            return
        self._emit_root(route, values, msg_id, None)

    def emit_many(
        self,
        rows: Sequence[Sequence[Any]],
        stream: str = DEFAULT_STREAM,
        msg_ids: Sequence[Any] | None = None,
    ) -> None:
        """Emit each of ``rows`` on ``stream``; a row with a msg id (``msg_ids``, one per row) roots
        a tracked tree, the untracked ones go out together as with ``emit_many`` untracked."""
        if msg_ids is None:
            self._emit_many(rows, stream)
            return
        if len(msg_ids) != len(rows):
            raise ValueError(f"emit_many: {len(rows)} rows but {len(msg_ids)} msg_ids")
        route = self._many_route(stream, rows)
        untracked = [values for values, msg_id in zip(rows, msg_ids, strict=True) if msg_id is None]
        if untracked:
            self._emit_many(untracked, stream)
        for values, msg_id in zip(rows, msg_ids, strict=True):
            if msg_id is not None:
                self._counters.emitted += 1
                self._emit_root(route, values, msg_id, None)

    def emit_columns(
        self,
        columns: Sequence[Sequence[Any]],
        stream: str = DEFAULT_STREAM,
        msg_ids: Sequence[Any] | None = None,
        batch_id: Any = None,
    ) -> None:
        """Emit the rows held as ``columns`` on ``stream``. With ``batch_id`` the whole batch roots
        one tracked tree: each task's part of it is one node, the spout's ``ack(batch_id)`` or
        ``fail(batch_id)`` comes once, and it is replayed as a batch. With ``msg_ids`` (one per
        row) each row with an id roots a tree of its own, as with ``emit_many``, and the batch
        goes row by row."""
        if msg_ids is None and batch_id is None:
            self._emit_columns(columns, stream)
            return
        _, count = self._columns_route(stream, columns)  # checks the columns before any row goes out
        check_ids(count, msg_ids, batch_id)
        if msg_ids is not None:
            self.emit_many(_rows(columns), stream, msg_ids)
            return
        if not count:
            self._tracker.completed_at_once(self.task, batch_id)
            return
        trees = self._trees
        root = trees.new_root()
        edges = BatchEdges(trees.new_id, (root,))
        self._emit_columns(columns, stream, edges)
        if not edges.parts:  # nobody subscribes: the tree is complete already
            self._tracker.completed_at_once(self.task, batch_id)
            return
        self._tracker.track(root, self.task, batch_id)
        trees.mailbox.init(trees.acker_of(root), root, edges.xor, self.task)

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None
    ) -> None:
        """Emit ``values`` on direct ``stream`` to ``task``; with a ``msg_id`` it roots a tracked tree."""
        if msg_id is None:
            super().emit_direct(task, values, stream)
            return
        route = self._direct_route(task, values, stream)
        self._counters.emitted += 1
        self._emit_root(route, values, msg_id, task)

    def _emit_root(self, route: StreamRoute, values: Sequence[Any], msg_id: Any, direct: int | None) -> None:
        trees = self._trees
        new_id = trees.new_id
        root = trees.new_root()
        first_edges = 0
        targets = _targets(route, values, direct)
        deliver_one = self._outbox.deliver_one
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
        trees.mailbox.init(trees.acker_of(root), root, first_edges, self.task)


class TrackedBoltCollector(BoltOutputCollector):
    """A bolt task's collector with acking on: an emit anchored to tuples in tracked trees joins
    those trees, and ``ack`` and ``fail`` report to the ackers."""

    def __init__(
        self,
        task: int,
        component: str,
        routes: Mapping[str, StreamRoute],
        outbox: Outbox,
        counters: Any,
        trees: TreeIds,
    ) -> None:
        super().__init__(task, component, routes, outbox, counters)
        self._trees = trees
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
        trees = self._anchor_tuples(anchors)
        if not trees:
            self._outbox.deliver(
                self.task, self.component, stream, route.stream_id, route.fields, values, route.choosers
            )
            return
        self._emit_anchored(route, values, trees, None)

    def emit_many(
        self,
        rows: Sequence[Sequence[Any]],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit each of ``rows`` on ``stream``, every one anchored to ``anchors``; unanchored rows
        go out together as with ``emit_many`` untracked."""
        trees = self._anchor_tuples(anchors)
        if not trees:
            self._emit_many(rows, stream)
            return
        route = self._many_route(stream, rows)
        self._counters.emitted += len(rows)
        for values in rows:
            self._emit_anchored(route, values, trees, None)

    def emit_columns(
        self,
        columns: Sequence[Sequence[Any]],
        anchors: Sequence[Tuple] | Tuple | Columns | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit the rows held as ``columns`` on ``stream``, every one anchored to ``anchors``.
        Anchored to a batch tracked as a whole (one given to ``process``), each task's part is
        one node of its trees, one edge id per part; anchored to several tuples (or a batch of
        rows tracked one by one), each part is one node of all their trees, one edge id per
        part and anchoring tuple (`TupleEdges`); anchored to one tuple, rows go row by row.
        Unanchored, the parts are untracked."""
        if isinstance(anchors, Columns):
            whole = anchors.anchors if anchors.tracked_whole else None
            if whole is not None:
                edges = BatchEdges(self._trees.new_id, tuple(whole))
                self._emit_columns(columns, stream, edges)
                anchors.ack_val ^= edges.xor  # delivered: the parts' edges join the batch's tree
                return
            anchors = anchors.tuples()
        trees = self._anchor_tuples(anchors)
        if not trees:
            self._emit_columns(columns, stream)
            return
        if len(trees) == 1:
            # one anchor: row by row costs an edge per row, and rows tracked one by one join
            # the receiver's larger calls (a part tracked as a whole is a call of its own)
            self._columns_route(stream, columns)  # checks the columns before any row goes out
            self.emit_many(_rows(columns), trees, stream)
            return
        per_tuple = TupleEdges(self._trees.new_id, trees)
        self._emit_columns(columns, stream, per_tuple)
        per_tuple.commit()  # delivered: the parts' edges join each anchoring tuple's tree

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit ``values`` on direct ``stream`` to ``task``, anchored to ``anchors``."""
        trees = self._anchor_tuples(anchors)
        if not trees:
            super().emit_direct(task, values, None, stream)
            return
        route = self._direct_route(task, values, stream)
        self._counters.emitted += 1
        self._emit_anchored(route, values, trees, task)

    def rows_of(self, batch: Columns) -> list[Tuple]:
        """The rows of ``batch`` as tuples, for a bolt without ``process``: a batch tracked as a
        whole becomes rows tracked one by one (one message to the ackers for the batch)."""
        if not batch.tracked_whole:
            return batch.tuples()
        return _expanded_rows(self._trees, batch)

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
        """Per delivery and anchor, one new edge id, XORed into the anchor's ``ack_val`` and into
        the new tuple's id for each of the anchor's roots."""
        new_id = self._trees.new_id
        deliver_one = self._outbox.deliver_one
        for task in _targets(route, values, direct):
            ids: dict[int, int] = {}
            for anchor in anchors:
                edge = new_id(64)
                anchor.ack_val ^= edge
                for root in anchor.anchors:
                    ids[root] = ids.get(root, 0) ^ edge
            deliver_one(
                task, self.task, self.component, route.stream, route.stream_id, route.fields, values, ids
            )

    def ack(self, tup: Tuple | Columns) -> None:
        """``tup`` is fully processed by this task (its anchored emits are done); a batch given to
        ``process``: once for all its rows when it is tracked as a whole, else each row."""
        if isinstance(tup, Columns):
            whole = tup.anchors if tup.tracked_whole else None
            if whole is None:
                for row in tup.tuples():
                    self.ack(row)
                return
            self._counters.acked += len(tup)
            tup.on_rows = None  # done with: rows read later are a look, not new tree nodes
            trees = self._trees
            for root, edge in whole.items():
                trees.mailbox.ack(trees.acker_of(root), root, edge ^ tup.ack_val)
            return
        self._counters.acked += 1
        if tup.__class__ is AnchoredTuple:
            trees = self._trees
            ack_val = tup.ack_val
            ack = trees.mailbox.ack
            for root, edge in tup.anchors.items():
                ack(trees.acker_of(root), root, edge ^ ack_val)

    def fail(self, tup: Tuple | Columns) -> None:
        """``tup`` failed here: its whole tree fails now (the spout replays it); a batch given to
        ``process``: its trees, or each row's."""
        if isinstance(tup, Columns):
            whole = tup.anchors if tup.tracked_whole else None
            if whole is None:
                for row in tup.tuples():
                    self.fail(row)
                return
            self._counters.failed += len(tup)
            tup.on_rows = None  # done with: rows read later are a look, not new tree nodes
            trees = self._trees
            for root in whole:
                trees.mailbox.fail(trees.acker_of(root), root)
            return
        self._counters.failed += 1
        if tup.__class__ is AnchoredTuple:
            trees = self._trees
            for root in tup.anchors:
                trees.mailbox.fail(trees.acker_of(root), root)


def _expanded_rows(trees: TreeIds, batch: Columns) -> list[Tuple]:
    """A batch tracked as a whole, as rows tracked one by one (a bolt without ``process`` acks
    and anchors per tuple): each row gets a new edge id in the batch's trees, and one ack
    swaps the batch's edge for the rows' edges at the ackers, so the trees complete when every
    row is acked."""
    anchors = batch.anchors
    assert anchors is not None
    new_id = trees.new_id
    rows: list[Tuple] = []
    xor = 0
    src, component, stream, fields = (
        batch.source_task,
        batch.source_component,
        batch.source_stream,
        batch.fields,
    )
    for tup in batch.row_values_as_tuples():
        edge = new_id(64)
        xor ^= edge
        rows.append(
            AnchoredTuple(tup.values, src, component, stream, fields, {root: edge for root in anchors})
        )
    for root, edge in anchors.items():
        trees.mailbox.ack(trees.acker_of(root), root, edge ^ batch.ack_val ^ xor)
    batch.rows_made(rows)
    return rows
