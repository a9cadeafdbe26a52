"""`GatewayRegistry`: one worker's ingest queues and export logs, where its Gateway finds them.

The worker's Gateway feature (`GatewayFeature`) owns its registry and closes it as the worker
begins to stop. Tasks register when they open or prepare (on their executor thread) and see only
their `TopologyContext`, so the process keeps a directory from (topology, worker index) to the
live registry: a later run of the same topology in the same process (local mode, tests) gets a
fresh registry and never sees a stopped run's queues.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from tuplemesh.gateway.export_log import ExportLog
from tuplemesh.gateway.ingest import IngestQueue

__all__ = ["ExportInfo", "GatewayRegistry"]

WorkerKey = tuple[str, int]  # (topology name, worker index)

_live_lock = threading.Lock()
_live: dict[WorkerKey, GatewayRegistry] = {}


@dataclass
class ExportInfo:
    """One ExportBolt component as its readers see it: partitions here, schema, fields."""

    total_partitions: int
    fields: list[str]
    schema: str
    logs: dict[int, ExportLog] = field(default_factory=dict)


class GatewayRegistry:
    """The ingest queues and export logs of one worker's tasks, by component name. Thread-safe."""

    def __init__(self, topology: str, worker: int) -> None:
        self.key: WorkerKey = (topology, worker)
        self._lock = threading.Lock()
        self._ingest: dict[str, list[IngestQueue]] = {}
        self._exports: dict[str, ExportInfo] = {}
        self.closed = False

    @classmethod
    def attach(cls, topology: str, worker: int) -> GatewayRegistry:
        """A fresh registry for worker ``worker`` of ``topology``, the one its tasks will find."""
        registry = cls(topology, worker)
        with _live_lock:
            _live[registry.key] = registry
        return registry

    @staticmethod
    def of(topology: str, worker: int) -> GatewayRegistry:
        """The live registry of that worker (for its tasks); LookupError when no worker runs."""
        with _live_lock:
            registry = _live.get((topology, worker))
        if registry is None:
            raise LookupError(
                f"no worker {worker} of topology {topology!r} runs in this process: "
                "IngestSpout and ExportBolt only run inside a tuplemesh worker"
            )
        return registry

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

        Idempotent. The process directory forgets this registry (unless a newer run replaced it).
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
        with _live_lock:
            if _live.get(self.key) is self:
                del _live[self.key]
