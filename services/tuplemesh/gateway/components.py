"""`IngestSpout` and `ExportBolt`: a topology's doors to the outside world (through the Gateway).

Storm leaves this to Kafka and friends: it has nothing built in between topologies.
Both are ordinary components, usable in any topology.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.acking.settings import AckingSettings
from tuplemesh.gateway.export_log import ExportLog
from tuplemesh.gateway.ingest import IngestQueue
from tuplemesh.gateway.registry import GatewayRegistry
from tuplemesh.gateway.ticket import PublishTicket
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TaskContext, Tuple

__all__ = ["ExportBolt", "IngestSpout"]

log = logging.getLogger(__name__)


class IngestSpout(Spout):
    """Emits the rows Gateway ``Publish`` puts into its bounded queue (one queue per task).

    ``name`` is what producers put in ``PublishRequest.component`` (use the component's name).
    A full queue slows the publishing stream down; nothing is dropped.

    With acking on, every row is the root of a tuple tree and the Gateway acknowledges a request
    once all its rows' trees complete (a failed or timed-out row makes the producer retry).
    With acking off, a request is acknowledged once all its rows are emitted.
    """

    def __init__(self, name: str, fields: Sequence[str], capacity: int = 20_000, per_call: int = 200) -> None:
        self.name = name
        self.fields = list(fields)
        self.capacity = capacity
        self.per_call = per_call
        self.emitted = 0

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self.fields)

    def open(self, conf: Mapping[str, Any], context: TaskContext, collector: Any) -> None:
        self.emit = collector.emit
        # acking off: no message ids, whose "acked at once" would cost a call per row for nothing
        self.tracked = AckingSettings.from_config(conf).acker_executors > 0
        self.queue = IngestQueue(self.capacity)
        GatewayRegistry.of(context.topology_name, context.worker_index).register_ingest(self.name, self.queue)

    def next_tuple(self) -> None:
        entries = self.queue.take(self.per_call)
        emit = self.emit
        if self.tracked:
            for ticket, index, row in entries:
                emit(row, msg_id=(ticket, index))
        else:
            for _, _, row in entries:
                emit(row)
            for ticket, index, _ in entries:
                ticket.ack(index)
        self.emitted += len(entries)

    def ack(self, msg_id: tuple[PublishTicket, int]) -> None:
        msg_id[0].ack(msg_id[1])

    def fail(self, msg_id: tuple[PublishTicket, int]) -> None:
        # no replay from here: the producer hears of the failure and publishes the row again
        msg_id[0].fail(msg_id[1])

    def pending(self) -> int:
        return len(self.queue)

    def report(self) -> Any:
        return {"emitted": self.emitted, "queued": len(self.queue)}


class ExportBolt(Bolt):
    """Keeps its input in a bounded in-memory log per task (= partition) with offsets.

    With acking on, a record is acked once it is in the log (so a Gateway producer's rows count
    as held when their records are exportable), and failed when it could not be exported.

    Readers fetch by offset through the Gateway and ``Commit`` to let the log truncate. When the
    log holds ``retention`` records, ``execute`` waits for a commit: backpressure, not a drop.
    Once the worker stops nobody may commit again, so records that find the log full then are
    not exported: they are counted (``lost`` in the task's report) and logged.
    ``schema`` is the Spark DDL of a record (default: every field a string).
    """

    def __init__(self, name: str, retention: int = 100_000, schema: str | None = None) -> None:
        self.name = name
        self.retention = retention
        self.schema = schema
        #: Records not exported because the log was full while the worker stopped (any thread reads).
        self.lost = 0

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: Any) -> None:
        fields = list(context.fields_of(*context.sources()[0]))
        schema = self.schema or ", ".join(f"{f} STRING" for f in fields)
        self.log = ExportLog(self.retention)
        self.collector = collector
        self.tracked = AckingSettings.from_config(conf).acker_executors > 0
        self.where = f"{self.name} task {context.task_id}"
        GatewayRegistry.of(context.topology_name, context.worker_index).register_export(
            self.name,
            context.task_index,
            self.log,
            len(context.component_tasks),
            fields,
            schema,
        )

    def execute(self, tup: Tuple) -> None:
        if self.log.append(list(tup.values)):
            if self.tracked:
                self.collector.ack(tup)
            return
        if self.tracked:
            self.collector.fail(tup)  # the producer hears of it instead of an OK
        if not self.lost:  # once per task: the rest of a stopping worker's input follows
            log.warning(
                "ExportBolt %s: log full (%d records) while the worker stops; "
                "records that do not fit are counted as lost",
                self.where,
                self.retention,
            )
        self.lost += 1

    def report(self) -> Any:
        return {"start": self.log.start, "end": self.log.end, "lost": self.lost}
