"""`Outbox`: an executor's emit buffers, one per destination, flushed as batches.

Destinations are the inboxes of executors in this worker (tuples go there unserialized) and the
other workers (tuples are serialized once per emit, then queued on the worker's transfer ring).
``deliver_many`` (``emit_many``) hands each local task its tuples as one list, and encodes the
rows it sends to one task of another worker in one call, as one rows payload, when the
serializer can (``serialize_rows``). ``deliver_columns`` (``emit_columns``) routes a batch held as
columns with one ``split`` per grouping (a fields grouping partitions the key column in one
pass), hands each local task its part as one `Columns`, and sends each remote task its part as
one columns payload.
A tuple for another worker larger than ``messaging.max.message.bytes`` raises
MessageTooLargeError in the emitting code (its emit call), before anything of it is buffered.
A buffer is flushed when it reaches ``topology.producer.batch.size``, when the whole outbox holds
``topology.executor.send.buffer.size`` tuples, or on the flush timer. Executor thread only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from tuplemesh.core.budget import ByteBudget
from tuplemesh.core.congestion import CongestionMap
from tuplemesh.core.held_back import HeldBack
from tuplemesh.core.markers import Batch
from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import MessageTooLargeError
from tuplemesh.plugin_api import RowsSerializer
from tuplemesh.serialization import (
    ANCHORED_COLUMNS_MARKER,
    COLUMNS_MARKER,
    Serializer,
    flat_anchors,
    frame_rows,
)
from tuplemesh.topology import AnchoredTuple, Fields, Tuple
from tuplemesh.topology.columns import Columns
from tuplemesh.topology.groupings import Selection, TaskChooser, split_by_rows
from tuplemesh.topology.partition import take
from tuplemesh.tracing import EMIT, context_of
from tuplemesh.transport.framing import MOST_FRAMING_PER_MESSAGE

__all__ = ["Outbox"]


class Outbox:
    """Routes emitted values to per-destination buffers and publishes full buffers."""

    def __init__(
        self,
        *,
        local_inboxes: Mapping[int, RingBuffer[Any]],
        remote_workers: Mapping[int, int],
        transfer_ring: RingBuffer[Any],
        serializer: Serializer,
        batch_size: int,
        send_capacity: int,
        max_payload: int = 16 * 1024 * 1024,
        congestion: CongestionMap | None = None,
        budget: ByteBudget | None = None,
    ) -> None:
        """``local_inboxes``: task -> inbox ring in this worker; ``remote_workers``: task -> worker."""
        rings: list[RingBuffer[Any]] = []
        ring_dest: dict[int, int] = {}
        self._task_dest: dict[int, int] = {}
        for task, ring in sorted(local_inboxes.items()):
            if id(ring) not in ring_dest:
                ring_dest[id(ring)] = len(rings)
                rings.append(ring)
            self._task_dest[task] = ring_dest[id(ring)]
        self._local_count = len(rings)
        self._rings = rings
        self._workers: list[int] = sorted(set(remote_workers.values()))
        for task, worker in remote_workers.items():
            self._task_dest[task] = self._local_count + self._workers.index(worker)
        self._buffers: list[list[tuple[int, Any]]] = [
            Batch() if i < len(rings) else [] for i in range(len(rings) + len(self._workers))
        ]
        #: per buffer: tuples held beyond its entry count (a rows payload is one entry, n tuples)
        self._extra = [0] * len(self._buffers)
        self._transfer = transfer_ring
        self._serialize = serializer.serialize
        self._serialize_rows: Callable[[int, int, Sequence[Sequence[Any]]], bytes] | None = (
            serializer.serialize_rows if isinstance(serializer, RowsSerializer) else None
        )
        self.batch_size = batch_size
        self.send_capacity = send_capacity
        self.max_payload = max_payload
        self.pending = 0  # tuples held in buffers right now
        #: bytes encoded for other workers since the last full flush: at a message's worth
        #: (``max_payload``) every buffer is flushed, so large tuples are not held a hundred at a
        #: time (``batch_size`` counts tuples, not bytes)
        self.encoded_bytes = 0
        self.delivered = 0  # (task, tuple) deliveries accepted so far
        #: Holds on a congested remote task (per-task backpressure) and their time in all, the
        #: hold in progress included (`CongestionMap.wait` adds to them as it waits): how long
        #: this executor's emits were held back by a slow consumer on another worker.
        self.backpressure_holds = 0
        self.backpressure_hold_seconds = 0.0
        self.last_flush = time.monotonic()
        self._congestion = congestion
        #: Direct streams whose emits never wait on a congested task: a feature's control
        #: messages, set when it attaches (checkpoint barriers: each queues behind its task's data
        #: anyway, and one sent to each downstream task in turn must not wait on one congested
        #: task while the others' barriers wait behind it, skewing their alignment).
        self.unheld_streams: frozenset[str] = frozenset()
        #: The worker's tasks that set tuples aside while they align a checkpoint's barriers, and
        #: this executor's own tasks: an emit to a task of this worker that has the barrier of
        #: every one of them feeding it waits until it completes (`HeldBack.closed_to`). None: no
        #: checkpoints (set when the feature attaches).
        self.held_back: HeldBack | None = None
        self.source_tasks: frozenset[int] = frozenset()
        #: Ends a hold (on a congested task, or on a task aligning) early when it returns True:
        #: a spout executor's check for a coordinator message waiting in its inbox.
        self.interrupt: Callable[[], bool] | None = None
        #: the worker's ceiling on bytes bound for other workers (None: none)
        self._budget = budget if budget is not None and budget.limit else None
        #: Called at the start of every ``flush`` (an AckerMailbox posts its boxes there).
        self.before_flush: Callable[[], None] | None = None
        #: OpenTelemetry: the tracer (None: not tracing) and the span attributes of this
        #: executor (``trace_emits``), and the context emit spans are children of (the batch being
        #: executed, if any; the tracing feature sets it per batch)
        self.tracer: Any = None
        self.trace_attributes: dict[str, Any] = {}
        self.trace_parent: Any = None
        #: a feature's observer of emits (``ExecutorView.observe``: Admin.WatchTuples' sampling):
        #: called with each buffer as it is flushed; None (the one check per flush) while none
        self.watch: Callable[[list[tuple[int, Any]]], None] | None = None

    def trace_emits(self, tracer: Any, attributes: dict[str, Any]) -> None:
        """Make every emit buffer this outbox flushes a ``tuplemesh.emit`` span of ``tracer``
        with ``attributes`` (the tracing feature calls it when it attaches to the executor)."""
        self.tracer = tracer
        self.trace_attributes = attributes

    def deliver(
        self,
        source_task: int,
        source_component: str,
        stream: str,
        stream_id: int,
        fields: Fields,
        values: Sequence[Any],
        choosers: Sequence[TaskChooser],
        hold: bool = True,
    ) -> None:
        """Route one emit through every subscriber's chooser; ``hold``: wait while a remote task
        it goes to is congested (per-task backpressure), or a task of this worker aligning a
        checkpoint would set it aside (`_await_aligned`), before buffering it. Without ``hold``
        (a control message: a checkpoint's barrier) it is published at once."""
        tup = None
        payload = None
        task_dest = self._task_dest
        buffers = self._buffers
        local_count = self._local_count
        batch_size = self.batch_size
        blocked = self._congestion.blocked if self._congestion is not None else None
        closed = self.held_back.closed if self.held_back is not None else None
        count = 0
        for chooser in choosers:
            for task in chooser.choose(values):
                dest = task_dest[task]
                if blocked and hold and task in blocked and dest >= local_count:
                    self.pending += count
                    self.delivered += count
                    count = 0
                    self._hold(task)
                elif closed and hold and task in closed and dest < local_count:
                    self.pending += count
                    self.delivered += count
                    count = 0
                    self._await_aligned(task)
                buf = buffers[dest]
                if dest < local_count:
                    if tup is None:
                        tup = Tuple(values, source_task, source_component, stream, fields)
                    buf.append((task, tup))
                else:
                    if payload is None:
                        payload = self._encode(source_task, source_component, stream, stream_id, values, None)
                    buf.append((task, payload))
                count += 1
                if len(buf) >= batch_size:
                    self.pending += count
                    self.delivered += count
                    count = 0
                    self._flush(dest)
        self.pending += count
        self.delivered += count
        if not hold:
            # a control message (a checkpoint's barrier) goes out now, not after the next data:
            # an emitter waits on a task aligning only once that task has its barrier
            self.flush()
        elif self.pending >= self.send_capacity or self.encoded_bytes >= self.max_payload:
            self.flush()

    def deliver_direct(
        self,
        task: int,
        source_task: int,
        source_component: str,
        stream: str,
        stream_id: int,
        fields: Fields,
        values: Sequence[Any],
    ) -> None:
        """Deliver to one named task (``emit_direct``); the caller checked it is a legal target.
        On one of ``unheld_streams`` it never waits on a congested task."""
        self.deliver(
            source_task,
            source_component,
            stream,
            stream_id,
            fields,
            values,
            [_One(task)],
            stream not in self.unheld_streams,
        )

    def deliver_many(
        self,
        source_task: int,
        source_component: str,
        stream: str,
        stream_id: int,
        fields: Fields,
        rows: Sequence[Sequence[Any]],
        choosers: Sequence[TaskChooser],
    ) -> None:
        """Route many emits of one stream. The tuples for one local task go into its inbox as one
        list (an inbox entry ``(task, [Tuple, ...])``), and the rows for one task in another worker
        are encoded together; if any row cannot be encoded, none of ``rows`` is delivered."""
        task_dest = self._task_dest
        local_count = self._local_count
        local: dict[int, list[Tuple]] = {}
        remote: dict[int, list[Sequence[Any]]] = {}
        for values in rows:
            tup = None
            for chooser in choosers:
                for task in chooser.choose(values):
                    if task_dest[task] < local_count:
                        if tup is None:
                            tup = Tuple(values, source_task, source_component, stream, fields)
                        tuples = local.get(task)
                        if tuples is None:
                            local[task] = [tup]
                        else:
                            tuples.append(tup)
                    else:
                        group = remote.get(task)
                        if group is None:
                            remote[task] = [values]
                        else:
                            group.append(values)
        payloads = [
            (task, payload, n)
            for task, group in remote.items()
            for payload, n in self._encode_rows(source_task, source_component, stream, stream_id, group)
        ]
        self._buffer_parts(
            [
                (task, tuples[0] if len(tuples) == 1 else tuples, len(tuples))
                for task, tuples in local.items()
            ],
            payloads,
        )

    def deliver_columns(
        self,
        source_task: int,
        source_component: str,
        stream: str,
        stream_id: int,
        fields: Fields,
        columns: Sequence[Sequence[Any]],
        count: int,
        choosers: Sequence[TaskChooser],
        edges: Callable[[], dict[int, int]] | None = None,
    ) -> None:
        """Route ``count`` emits of one stream held as ``columns`` (one per field, each ``count``
        long): each chooser splits them at once; a local task's part goes into its inbox as one
        `Columns` (an inbox entry ``(task, Columns)``), a remote task's part is encoded as one
        columns payload. If any part cannot be encoded, none of the rows is delivered.

        ``edges`` (acking: a batch tracked as a whole) is called once per part delivered, for
        that part's anchors (root -> a new edge id): each part is one node of the tree."""
        task_dest = self._task_dest
        local_count = self._local_count
        parts: list[tuple[int, Selection]] = []
        for chooser in choosers:
            parts.extend(chooser.split(columns, count))
        local: list[tuple[int, Any, int]] = []
        payloads: list[tuple[int, bytes, int]] = []
        for task, selection in parts:
            if selection is None:
                part: Sequence[Sequence[Any]] = columns
                n = count
            elif isinstance(selection, slice):
                # a list's slice is a copy; other sequences' may be views (an array's is): copied,
                # so the emitter may reuse its buffers once emit returns
                part = [
                    column[selection] if column.__class__ is list else list(column[selection])
                    for column in columns
                ]
                n = len(range(count)[selection])
            else:
                part = take(columns, selection)
                n = len(selection)
            if task_dest[task] < local_count:
                if selection is None:  # a copy: the emitter may reuse its lists once emit returns
                    part = [list(column) for column in part]
                anchors = None if edges is None else edges()
                batch = Columns(part, n, fields, source_task, source_component, stream, None, anchors)
                local.append((task, batch, n))
            else:
                for payload, carried in self._encode_columns(
                    source_task, source_component, stream, stream_id, fields, part, n, edges
                ):
                    payloads.append((task, payload, carried))
        self._buffer_parts(local, payloads)

    def _buffer_parts(
        self, local: list[tuple[int, Any, int]], payloads: list[tuple[int, bytes, int]]
    ) -> None:
        """Buffer the parts of one many-row emit, all encoded already: ``(task, entry, tuples in
        it)`` for local tasks, ``(task, payload, tuples in it)`` for remote ones (a congested
        remote task holds the emitter first); then flush the buffers that are full."""
        task_dest = self._task_dest
        buffers = self._buffers
        extra = self._extra
        closed = self.held_back.closed if self.held_back is not None else None
        for task, entry, n in local:
            if closed and task in closed:
                self._await_aligned(task)
            dest = task_dest[task]
            buffers[dest].append((task, entry))
            extra[dest] += n - 1
            self.pending += n
            self.delivered += n
        blocked = self._congestion.blocked if self._congestion is not None else None
        for task, payload, n in payloads:
            if blocked and task in blocked:
                self._hold(task)
            dest = task_dest[task]
            buffers[dest].append((task, payload))
            extra[dest] += n - 1
            self.pending += n
            self.delivered += n
        batch_size = self.batch_size
        for dest, buf in enumerate(buffers):
            if buf and len(buf) + extra[dest] >= batch_size:
                self._flush(dest)
        if self.pending >= self.send_capacity or self.encoded_bytes >= self.max_payload:
            self.flush()

    def _encode_columns(
        self,
        source_task: int,
        source_component: str,
        stream: str,
        stream_id: int,
        fields: Fields,
        columns: Sequence[Sequence[Any]],
        count: int,
        edges: Callable[[], dict[int, int]] | None = None,
        taken: dict[int, int] | None = None,
    ) -> list[tuple[bytes, int]]:
        """(payload, tuples in it) for ``count`` rows held as ``columns``: one columns payload,
        split in halves while it is over ``messaging.max.message.bytes``; rows where the
        serializer has no batch call or a single row is left. With ``edges``, each payload made
        takes its own anchors (a single row: an anchored tuple); ``taken``: anchors taken already
        for a payload that was then split, used for its first half (every edge taken is sent)."""
        serialize_rows = self._serialize_rows
        if edges is not None and (serialize_rows is None or count == 1 or not columns):
            values_of = zip(*columns, strict=True) if columns else ([] for _ in range(count))
            encoded = []
            for values in values_of:
                anchors, taken = (edges() if taken is None else taken), None
                encoded.append(
                    (self._encode(source_task, source_component, stream, stream_id, list(values), anchors), 1)
                )
            return encoded
        if serialize_rows is None or count == 1 or not columns:
            rows: list[Sequence[Any]] = (
                [list(values) for values in zip(*columns, strict=True)]
                if columns
                else [[] for _ in range(count)]
            )
            return self._encode_rows(source_task, source_component, stream, stream_id, rows)
        if edges is None:
            payload = frame_rows(count, serialize_rows(source_task, stream_id, columns), COLUMNS_MARKER)
        else:
            if taken is None:
                taken = edges()
            body = serialize_rows(source_task, stream_id, [*columns, flat_anchors(taken)])
            payload = frame_rows(count, body, ANCHORED_COLUMNS_MARKER)
        if len(payload) <= self.max_payload:
            self.encoded_bytes += len(payload)
            return [(payload, count)]
        half = count // 2
        return (
            self._encode_columns(
                source_task,
                source_component,
                stream,
                stream_id,
                fields,
                [c[:half] for c in columns],
                half,
                edges,
                taken,  # the anchors taken for the whole go with its first half
            )
            + self._encode_columns(
                source_task,
                source_component,
                stream,
                stream_id,
                fields,
                [c[half:] for c in columns],
                count - half,
                edges,
            )
        )

    def _encode_rows(
        self,
        source_task: int,
        source_component: str,
        stream: str,
        stream_id: int,
        rows: list[Sequence[Any]],
    ) -> list[tuple[bytes, int]]:
        """(payload, tuples in it) for ``rows``: one rows payload, split in halves while it is
        over ``messaging.max.message.bytes``, and single payloads where that is all it can be."""
        serialize_rows = self._serialize_rows
        if serialize_rows is None or len(rows) == 1:
            return [
                (self._encode(source_task, source_component, stream, stream_id, v, None), 1) for v in rows
            ]
        payload = frame_rows(len(rows), serialize_rows(source_task, stream_id, rows))
        if len(payload) <= self.max_payload:
            self.encoded_bytes += len(payload)
            return [(payload, len(rows))]
        half = len(rows) // 2
        return self._encode_rows(
            source_task, source_component, stream, stream_id, rows[:half]
        ) + self._encode_rows(source_task, source_component, stream, stream_id, rows[half:])

    def deliver_one(
        self,
        task: int,
        source_task: int,
        source_component: str,
        stream: str,
        stream_id: int,
        fields: Fields,
        values: Sequence[Any],
        anchors: dict[int, int] | None,
    ) -> None:
        """Deliver to one task with its own tuple (guaranteed processing: each delivery of a
        tuple in a tree has its own edge ids in ``anchors``, so nothing is shared)."""
        dest = self._task_dest[task]
        congestion = self._congestion
        if congestion is not None and task in congestion.blocked and dest >= self._local_count:
            self._hold(task)
        held_back = self.held_back
        unheld = stream in self.unheld_streams
        if held_back is not None and task in held_back.closed and dest < self._local_count and not unheld:
            self._await_aligned(task)
        if dest < self._local_count:
            if anchors is None:
                item: Any = Tuple(values, source_task, source_component, stream, fields)
            else:
                item = AnchoredTuple(values, source_task, source_component, stream, fields, anchors)
        else:
            item = self._encode(source_task, source_component, stream, stream_id, values, anchors)
        buf = self._buffers[dest]
        buf.append((task, item))
        self.pending += 1
        self.delivered += 1
        if len(buf) >= self.batch_size:
            self._flush(dest)
        if unheld or self.pending >= self.send_capacity or self.encoded_bytes >= self.max_payload:
            self.flush()  # a control message (a checkpoint's barrier) at once, as in `deliver`

    def _hold(self, task: int) -> None:
        """Per-task backpressure: publish what is buffered, then wait while ``task`` is congested.
        A report whose lease has ended holds nothing (it stays in the map until the peer's next
        ack, which may be a while when nothing goes to that peer): no flush for it."""
        assert self._congestion is not None
        until = self._congestion.blocked.get(task)
        if until is None or until <= time.monotonic():
            return
        if self.interrupt is not None and self.interrupt():
            return  # a message waits that the emitter must read first: no hold until it has
        self.flush()
        self._congestion.wait(task, self, self.interrupt)

    def _await_aligned(self, task: int) -> None:
        """``task``, in this worker, sets aside what this executor's tasks send it: they passed
        its checkpoint's barrier on, it waits for the barriers of other inputs (Flink blocks
        such a channel). Publish what is buffered, then wait until it takes tuples again."""
        held_back = self.held_back
        assert held_back is not None
        sources = self.source_tasks
        if not held_back.closed_to(task, sources, time.monotonic()):
            return
        if self.interrupt is not None and self.interrupt():
            return  # a message waits that the emitter must read first: no hold until it has
        self.flush()
        held_back.wait_open(task, sources, self, self.interrupt)

    def _encode(
        self,
        source_task: int,
        source_component: str,
        stream: str,
        stream_id: int,
        values: Sequence[Any],
        anchors: dict[int, int] | None,
    ) -> bytes:
        payload = self._serialize(source_task, stream_id, values, anchors)
        self.encoded_bytes += len(payload)
        if len(payload) > self.max_payload:
            raise MessageTooLargeError(
                f"{source_component!r} emitted a {len(payload)}-byte tuple on stream "
                f"{stream!r}; messaging.max.message.bytes is {self.max_payload}"
            )
        return payload

    def _flush(self, dest: int) -> None:
        buf = self._buffers[dest]
        if not buf:
            return
        # ``pending`` drops only once the put succeeded: a put refused by a halted ring leaves the
        # batch counted, so ``discard`` can report exactly what was lost.
        held = len(buf) + self._extra[dest]
        self._extra[dest] = 0  # the buffer is replaced below, whether the put succeeds or not
        if self.watch is not None:
            self.watch(buf)
        span: Any = None
        if self.tracer is not None:
            span = self.tracer.start_span(EMIT, self.trace_parent, attributes=self.trace_attributes)
            span.set_attribute("tuplemesh.tuples", held)
        try:
            if dest < self._local_count:
                self._buffers[dest] = Batch()
                batch = cast(Batch, buf)  # the buffers of local destinations are Batches
                batch.stamp = time.monotonic()
                if span is not None:
                    batch.trace = context_of(span)
                self._rings[dest].put(batch)
            else:
                self._buffers[dest] = []
                worker = self._workers[dest - self._local_count]
                nbytes = 0
                if self._budget is not None:  # waits while the worker holds too much for others
                    # as packed for the wire, so moving into a send window never adds to it
                    nbytes = sum([len(message[1]) for message in buf]) + MOST_FRAMING_PER_MESSAGE * len(buf)
                    self._budget.acquire(nbytes)
                # a traced batch tells the transfer thread its emit span (its transfer span links it)
                try:
                    self._transfer.put(
                        (worker, buf, nbytes) if span is None else (worker, buf, nbytes, context_of(span))
                    )
                except BaseException:
                    if self._budget is not None:
                        self._budget.release(nbytes)
                    raise
        finally:
            if span is not None:
                span.end()
        self.pending -= held

    def flush(self) -> None:
        """Publish every non-empty buffer (blocks while a destination ring is full)."""
        if self.before_flush is not None:
            self.before_flush()
        for dest, buf in enumerate(self._buffers):
            if buf:
                self._flush(dest)
        self.encoded_bytes = 0
        self.last_flush = time.monotonic()

    def discard(self) -> int:
        """Drop everything still held (a destination halted, nothing can go out) and return how
        many tuples that was, including a batch whose publish was refused."""
        dropped = self.pending
        self._buffers = [Batch() if i < self._local_count else [] for i in range(len(self._buffers))]
        self._extra = [0] * len(self._buffers)
        self.pending = 0
        return dropped


class _One:
    __slots__ = ("_tasks",)

    def __init__(self, task: int) -> None:
        self._tasks = (task,)

    def choose(self, values: Sequence[Any]) -> Sequence[int]:
        return self._tasks

    def split(self, columns: Sequence[Sequence[Any]], count: int) -> list[tuple[int, Selection]]:
        return split_by_rows(self, columns, count)
