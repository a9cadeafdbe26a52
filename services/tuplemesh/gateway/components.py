"""`IngestSpout` and `ExportBolt`: a topology's doors to the outside world (through the Gateway).

Storm leaves this to Kafka and friends: it has nothing built in between topologies.
Both are ordinary components, usable in any topology.
"""

from __future__ import annotations

import logging
import secrets
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.core.acking import AckingSettings
from tuplemesh.gateway.export_log import ExportLog
from tuplemesh.gateway.ingest import IngestChunk, IngestEntry, IngestQueue, joined_columns
from tuplemesh.gateway.registry import GatewayTask
from tuplemesh.gateway.ticket import PublishTicket
from tuplemesh.state.base import KeyValueState
from tuplemesh.state.components import ReplayableSpout, StatefulBolt
from tuplemesh.state.protocol import COORDINATOR
from tuplemesh.topology import Columns, OutputFieldsDeclarer, TaskContext, Tuple

__all__ = ["ExportBolt", "IngestSpout"]

log = logging.getLogger(__name__)

#: an ExportBolt task's state key: its log as of the checkpoint (``ExportLog.mark``)
_LOG_KEY = "log"


class IngestSpout(ReplayableSpout, GatewayTask):
    """Emits the rows Gateway ``Publish`` puts into its bounded queue (one queue per task).

    ``name`` is what producers put in ``PublishRequest.component`` (use the component's name).
    A full queue slows the publishing stream down; nothing is dropped.

    With acking off, rows leave the spout as batches of columns (``emit_columns``): the rows of
    one request taken in one call (at most ``per_call``) are one batch, and a request is
    acknowledged once all its rows are emitted. With acking on, every row is the root of a tuple
    tree of its own and the Gateway acknowledges a request once all its rows' trees complete (a
    failed or timed-out row makes the producer retry that row alone, so a row whose tree
    completed is never published twice). A call then takes no more rows than
    ``topology.max.spout.pending`` leaves room for: the trees open at once stay within it, where
    Storm's bound holds only between calls.

    In a checkpointed topology a row is held only once a checkpoint with its effect commits: the
    spout keeps the rows it emitted since (at most ``capacity`` more), acknowledges them when
    that checkpoint commits, and emits them again after a rollback. A worker that dies takes its
    unacknowledged rows with it; their producers publish them again elsewhere.
    """

    def __init__(
        self, name: str, fields: Sequence[str], capacity: int = 20_000, per_call: int = 1000
    ) -> None:
        if not fields:
            raise ValueError(f"IngestSpout {name!r} declares no field: a row is one value per field")
        self.name = name
        self.fields = list(fields)
        self.capacity = capacity
        self.per_call = per_call
        self.emitted = 0

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self.fields)

    def open(self, conf: Mapping[str, Any], context: TaskContext, collector: Any) -> None:
        registry = self._registry(self.name)  # first: nothing else happens without one
        self.emit, self.emit_columns = collector.emit, collector.emit_columns
        # acking off: no message ids, whose "acked at once" would cost a call per row for nothing
        acking = AckingSettings.from_config(conf)
        self.tracked = acking.acker_executors > 0
        #: trees this task may have open (0: no limit), and how many are open now
        self.max_pending = acking.max_spout_pending if self.tracked else 0
        self.open_trees = 0
        self.queue = IngestQueue(self.capacity, self.fields)
        # checkpointed (the runtime rewound the spout): rows since the last committed checkpoint
        self.checkpointed = False
        self.instance = secrets.token_hex(8)  # positions of another process mean nothing here
        # the chunks taken since the last committed checkpoint, as they came (columns), and the
        # rows they hold
        self._uncommitted: deque[IngestChunk] = deque()
        self._buffered = 0
        self._base = 0  # the sequence number of the first row of _uncommitted
        self._cursor = 0  # the sequence number of the next row to emit
        registry.register_ingest(self.name, self.queue)

    def next_tuple(self) -> None:
        """Each request's rows taken now go out as one batch of columns (acking off), or row by
        row with a tree each (acking on: a row that fails is republished alone)."""
        if self.checkpointed:
            self._emit_checkpointed()
            return
        if self.tracked:
            room = (
                self.per_call
                if not self.max_pending
                else min(self.per_call, self.max_pending - self.open_trees)
            )
            if room > 0:
                self._emit_tracked([entry for chunk in self.queue.take(room) for entry in chunk.entries()])
            return
        chunks = self.queue.take(self.per_call)
        emit_columns = self.emit_columns
        done = 0
        try:
            for chunk in chunks:
                emit_columns(chunk.columns)
                chunk.ticket.ack_many(chunk.indices)
                done += 1
                self.emitted += len(chunk)
        except Exception:
            # rows the runtime refused (their values): they and the rows taken after them fail,
            # so their publishers get an answer (and retry) instead of waiting for one forever;
            # an emit that raised delivered none of its rows
            for chunk in chunks[done:]:
                chunk.ticket.fail_many(chunk.indices)
            raise

    def _emit_tracked(self, entries: list[IngestEntry]) -> None:
        """One tree per row, ``(ticket, index)`` its message id. A row the runtime refuses fails
        with the rows after it; the rows before it are out, and their trees decide for them."""
        emit = self.emit
        done = 0
        try:
            for ticket, index, row in entries:
                emit(row, msg_id=(ticket, index))
                done += 1
        except Exception:
            for ticket, index, _ in entries[done:]:
                ticket.fail(index)
            raise
        finally:
            self.emitted += done
            self.open_trees += done

    def _emit_checkpointed(self) -> None:
        """Replayed rows first, then new ones while fewer than ``capacity`` wait for a commit,
        as one batch of columns. No ids: a rollback replays, and a commit acknowledges. Rows
        stay in the columns they came in, from the request to the emit and in the replay buffer."""
        pieces = self._replayed(self.per_call)
        count = sum(len(piece) for piece in pieces)
        room = self.capacity - self._buffered
        if count < self.per_call and room > 0:
            taken = self.queue.take(min(self.per_call - count, room))
            rows = sum(len(chunk) for chunk in taken)
            self._uncommitted.extend(taken)
            self._buffered += rows
            pieces.extend(taken)
            count += rows
        if pieces:
            self.emit_columns(joined_columns(pieces, len(self.fields)))
            self._cursor += count
            self.emitted += count

    def _replayed(self, budget: int) -> list[IngestChunk]:
        """Up to ``budget`` rows from the cursor that were emitted before a rollback (none
        otherwise: the cursor is then past every buffered row)."""
        pieces: list[IngestChunk] = []
        skip = self._cursor - self._base  # buffered rows emitted since the rollback
        if skip >= self._buffered:  # the common case, no rollback: nothing to walk
            return pieces
        for chunk in self._uncommitted:
            if budget <= 0:
                break
            size = len(chunk)
            if skip >= size:
                skip -= size
                continue
            stop = min(size, skip + budget)
            pieces.append(chunk if skip == 0 and stop == size else chunk.slice(skip, stop))
            budget -= stop - skip
            skip = 0
        return pieces

    def position(self) -> Any:
        return [self.instance, self._cursor]

    def rewind(self, position: Any) -> None:
        self.checkpointed = True
        if position is not None and position[0] == self.instance:
            self._release(position[1])  # rows before it are in the checkpoint resumed from
        self._cursor = self._base  # the rest had effects the rollback took back: again

    def committed(self, position: Any) -> None:
        if position[0] == self.instance:
            self._release(position[1])

    def _release(self, sequence: int) -> None:
        """Acknowledge (to their producers) the rows before ``sequence``: their effect is committed."""
        done = max(0, min(sequence - self._base, self._buffered))
        left = done
        while left:
            chunk = self._uncommitted[0]
            if len(chunk) <= left:
                chunk.ticket.ack_many(chunk.indices)
                self._uncommitted.popleft()
                left -= len(chunk)
            else:
                chunk.ticket.ack_many(chunk.indices[:left])
                self._uncommitted[0] = chunk.slice(left, len(chunk))
                left = 0
        self._buffered -= done
        self._base += done

    def ack(self, msg_id: tuple[PublishTicket, int]) -> None:
        self._closed_tree()
        msg_id[0].ack(msg_id[1])

    def fail(self, msg_id: tuple[PublishTicket, int]) -> None:
        # no replay from here: the producer hears of the failure and publishes the row again
        self._closed_tree()
        msg_id[0].fail(msg_id[1])

    def _closed_tree(self) -> None:
        # never below 0: a row whose emit raised after its tree was opened is not counted open,
        # yet its timeout closes it
        if self.open_trees:
            self.open_trees -= 1

    def pending(self) -> int:
        return len(self.queue) + self._base + self._buffered - self._cursor

    def report(self) -> Any:
        report = {"emitted": self.emitted, "queued": len(self.queue)}
        if self.checkpointed:  # rows waiting for a checkpoint with their effect to commit
            report["uncommitted"] = self._buffered
        return report


class ExportBolt(StatefulBolt, GatewayTask):
    """Keeps its input in a bounded in-memory log per task (= partition) with offsets.

    With acking on, a record is acked once it is in the log (so a Gateway producer's rows count
    as held when their records are exportable), and failed when it could not be exported.

    In a checkpointed topology (one with another StatefulBolt: an ExportBolt alone does not make
    one) the log is the task's checkpointed state: records become readable once a checkpoint
    holding them commits, and after a rollback or a worker restart the log is the committed
    checkpoint's, with its epoch and offsets, so a reader neither loses nor sees twice a record.

    Readers fetch by offset through the Gateway and ``Commit`` to let the log truncate. When the
    log holds ``retention`` records, ``execute`` waits for a commit: backpressure, not a drop.
    Once the worker stops nobody may commit again, so records that find the log full then are
    not exported: they are counted (``lost`` in the task's report) and logged.
    ``schema`` is the Spark DDL of a record (default: every field a string).
    """

    checkpoints_topology = False

    def __init__(self, name: str, retention: int = 100_000, schema: str | None = None) -> None:
        self.name = name
        self.retention = retention
        self.schema = schema
        #: Records not exported because the log was full while the worker stopped (any thread reads).
        self.lost = 0

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: Any) -> None:
        registry = self._registry(self.name)  # first: nothing else happens without one
        fields = list(context.fields_of(*context.sources()[0]))
        schema = self.schema or ", ".join(f"{f} STRING" for f in fields)
        self.log = ExportLog(self.retention)
        try:
            context.tasks_of(COORDINATOR)
        except KeyError:
            pass  # not checkpointed: the log is complete from the start
        else:  # checkpointed: the log is the restored checkpoint's, once its rollback restores it
            self.log.await_restore()
        self.collector = collector
        self.tracked = AckingSettings.from_config(conf).acker_executors > 0
        self.where = f"{self.name} task {context.task_id}"
        registry.register_export(
            self.name,
            context.task_index,
            self.log,
            len(context.component_tasks),
            fields,
            schema,
        )

    def process(self, batch: Columns) -> None:
        """A batch of records into the log in one step, kept as its columns (the records are
        the rows' values)."""
        count = len(batch)
        appended = self.log.extend_columns(batch.columns, count)
        if appended == count:
            if self.tracked:
                self.collector.ack(batch)
            return
        if self.tracked:  # the records that did fit are held; the rest fail, row by row
            rows = batch.tuples()
            for row in rows[:appended]:
                self.collector.ack(row)
            for row in rows[appended:]:
                self.collector.fail(row)  # the producer hears of it instead of an OK
        self._lost(count - appended)

    def execute(self, tup: Tuple) -> None:
        """One record (a per-tuple caller; the runtime calls `process`)."""
        if self.log.append(tup.values):
            if self.tracked:
                self.collector.ack(tup)
            return
        if self.tracked:
            self.collector.fail(tup)
        self._lost(1)

    def _lost(self, records: int) -> None:
        if not self.lost:  # once per task: the rest of a stopping worker's input follows
            log.warning(
                "ExportBolt %s: log full (%d records) while the worker stops; "
                "records that do not fit are counted as lost",
                self.where,
                self.retention,
            )
        self.lost += records

    def init_state(self, state: KeyValueState) -> None:
        self.state = state
        self.log.hold_back()
        self.log.restore(state.get(_LOG_KEY))

    def pre_checkpoint(self, checkpoint: int) -> None:
        self.state[_LOG_KEY] = self.log.mark(checkpoint)

    def checkpoint_committed(self, checkpoint: int) -> None:
        self.log.checkpoint_committed(checkpoint)

    def report(self) -> Any:
        return {"start": self.log.start, "end": self.log.end, "lost": self.lost}
