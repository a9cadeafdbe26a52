"""`GatewayRegistry`: one worker's ingest queues and export logs, where its Gateway finds them.

The worker's Gateway feature (`GatewayFeature`) owns its registry, hands it to each of its tasks
that registers there (a `GatewayTask`: IngestSpout, ExportBolt) as it attaches to the task's
executor, before the task opens or prepares, and closes it as the worker begins to stop. Nothing
is process-global: a later run of the same topology in the same process (local mode, tests) has
its own feature, hence its own registry, and never sees a stopped run's queues.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tuplemesh.gateway.export_log import ExportLog
from tuplemesh.gateway.ingest import IngestQueue

__all__ = ["ExportInfo", "GatewayRegistry", "GatewayTask"]


@dataclass
class ExportInfo:
    """One ExportBolt component as its readers see it: partitions here, schema, fields."""

    total_partitions: int
    fields: list[str]
    schema: str
    logs: dict[int, ExportLog] = field(default_factory=dict)


class GatewayRegistry:
    """The ingest queues and export logs of one worker's tasks, by component name. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ingest: dict[str, list[IngestQueue]] = {}
        self._exports: dict[str, ExportInfo] = {}
        self.closed = False

    def register_ingest(self, name: str, queue: IngestQueue) -> None:
        with self._lock:
            if self.closed:
                queue.close()  # a task opening while its worker stops gets no rows
                return
            self._ingest.setdefault(name, []).append(queue)

    def register_export(
        self, name: str, partition: int, log: ExportLog, total: int, fields: list[str], schema: str
    ) -> None:
        with self._lock:
            if self.closed:
                log.close()
                return
            info = self._exports.setdefault(name, ExportInfo(total, fields, schema))
            info.logs[partition] = log

    def ingest_queues(self, name: str) -> list[IngestQueue]:
        with self._lock:
            return list(self._ingest.get(name, []))

    def export(self, name: str) -> ExportInfo | None:
        with self._lock:
            return self._exports.get(name)

    def close(self) -> None:
        """The worker stops: refuse new rows, stop export logs waiting for room, forget everything.

        Idempotent.
        """
        with self._lock:
            self.closed = True
            queues = [q for qs in self._ingest.values() for q in qs]
            logs = [log for info in self._exports.values() for log in info.logs.values()]
            self._ingest.clear()
            self._exports.clear()
        for queue in queues:
            queue.close()
        for log in logs:
            log.close()


class GatewayTask:
    """A task component that registers with its worker's `GatewayRegistry` (IngestSpout,
    ExportBolt). The worker's Gateway feature sets ``gateway_registry`` when it attaches to the
    task's executor, before the task opens or prepares; the task reads it once, there."""

    #: set by the worker's Gateway feature; None: the task runs in no worker with a Gateway
    gateway_registry: GatewayRegistry | None = None

    def _registry(self, component: str) -> GatewayRegistry:
        """The registry the feature handed this task; a clear error when none did."""
        if self.gateway_registry is None:
            raise RuntimeError(
                f"{type(self).__name__} {component!r} has no Gateway registry: it runs only in a "
                "tuplemesh worker with the gateway feature (registered in tuplemesh.registry), which "
                "hands the registry to it before it opens or prepares"
            )
        return self.gateway_registry
