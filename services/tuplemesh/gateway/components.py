"""`IngestSpout` and `ExportBolt`: a topology's doors to the outside world (through the Gateway).

Storm leaves this to Kafka and friends (seed 000: "inter-topology: nothing built into storm").
Both are ordinary components, usable in any topology.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from tuplemesh.gateway.registry import ExportLog, IngestQueue, register_export, register_ingest
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyContext, Tuple

__all__ = ["ExportBolt", "IngestSpout"]


class IngestSpout(Spout):
    """Emits the rows Gateway ``Publish`` puts into its bounded queue (one queue per task).

    ``name`` is what producers put in ``PublishRequest.component`` (use the component's name).
    A full queue slows the publishing stream down; nothing is dropped.
    """

    def __init__(self, name: str, fields: Sequence[str], capacity: int = 20_000, per_call: int = 200) -> None:
        self.name = name
        self.fields = list(fields)
        self.capacity = capacity
        self.per_call = per_call
        self.emitted = 0

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(self.fields)

    def open(self, conf: Mapping[str, Any], context: TopologyContext, collector: Any) -> None:
        self.emit = collector.emit
        self.queue = IngestQueue(self.capacity)
        register_ingest((context.topology.name, context.worker_index, self.name), self.queue)

    def next_tuple(self) -> None:
        rows = self.queue.take(self.per_call)
        emit = self.emit
        for row in rows:
            emit(row)
        self.emitted += len(rows)

    def pending(self) -> int:
        return len(self.queue)

    def report(self) -> Any:
        return {"emitted": self.emitted, "queued": len(self.queue)}


class ExportBolt(Bolt):
    """Keeps its input in a bounded in-memory log per task (= partition) with offsets.

    Readers fetch by offset through the Gateway and ``Commit`` to let the log truncate. When the
    log holds ``retention`` records, ``execute`` waits for a commit: backpressure, not a drop.
    ``schema`` is the Spark DDL of a record (default: every field a string).
    """

    def __init__(self, name: str, retention: int = 100_000, schema: str | None = None) -> None:
        self.name = name
        self.retention = retention
        self.schema = schema

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext, collector: Any) -> None:
        spec = context.topology.components[context.component_id]
        source = spec.inputs[0]
        fields = list(context.topology.components[source.source].streams[source.stream].fields)
        schema = self.schema or ", ".join(f"{f} STRING" for f in fields)
        self.log = ExportLog(self.retention)
        self.stop = threading.Event()
        register_export(
            (context.topology.name, context.worker_index, self.name),
            context.task_index,
            self.log,
            len(context.component_tasks),
            fields,
            schema,
        )

    def execute(self, tup: Tuple) -> None:
        self.log.append(list(tup.values), self.stop)

    def report(self) -> Any:
        return {"start": self.log.start, "end": self.log.end}
