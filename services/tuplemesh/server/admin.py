"""The Admin gRPC service: a thin servicer over a running Worker (no routing logic here)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from tuplemesh.grpcutil import json_array
from tuplemesh.topology import Tuple
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc
from tuplemesh.worker.executor import SpoutExecutor
from tuplemesh.worker.worker import Worker

__all__ = ["AdminServicer", "QueueRates"]


class QueueRates:
    """Publish rates of every ring, from the change of its cursor between two reads. Thread-safe."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._lock = threading.Lock()
        self._last: tuple[float, dict[str, int]] = (time.monotonic(), self._cursors())

    def _cursors(self) -> dict[str, int]:
        rings = {f"inbox:{e.name}": e.inbox for e in self._worker.executors}
        rings["transfer"] = self._worker.transfer_ring
        return {name: ring.cursor for name, ring in rings.items()}

    def queues(self) -> list[admin_pb2.QueueInfo]:
        now, cursors = time.monotonic(), self._cursors()
        with self._lock:
            then, before = self._last
            self._last = (now, cursors)
        elapsed = max(now - then, 1e-9)
        return [
            admin_pb2.QueueInfo(
                name=name,
                depth=depth,
                capacity=capacity,
                publish_rate=(cursors.get(name, 0) - before.get(name, 0)) / elapsed,
            )
            for name, (depth, capacity) in self._worker.queue_depths().items()
        ]


class AdminServicer(admin_pb2_grpc.AdminServicer):
    """Answers Admin rpcs from a Worker's state; ``drain`` and ``state`` come from its process."""

    def __init__(
        self, worker: Worker, transport: str, drain: Callable[[], str], state: Callable[[], str]
    ) -> None:
        self.worker = worker
        self.transport = transport
        self._drain = drain
        self._state = state
        self._rates = QueueRates(worker)

    # -- status ---------------------------------------------------------------------------------
    def GetStatus(
        self, request: admin_pb2.GetStatusRequest, context: grpc.ServicerContext
    ) -> admin_pb2.WorkerStatus:
        worker = self.worker
        consumed, delivered = worker.balance()  # consumed first: see LocalCluster.quiescent
        executors = [
            admin_pb2.ExecutorStatus(
                name=e.name,
                component=e.spec.component,
                tasks=list(e.spec.tasks),
                spout=isinstance(e, SpoutExecutor),
                delivered=e.outbox.delivered,
                finished=isinstance(e, SpoutExecutor) and e.finished.is_set(),
                **as_dict_for_proto(e.counters),
            )
            for e in worker.executors
        ]
        peers = [
            admin_pb2.PeerStatus(
                worker=index,
                address=stats.address,
                state=stats.state,
                sent_batches=stats.sent_batches,
                unacked_batches=stats.unacked_batches,
                reconnects=stats.reconnects,
                resent_batches=stats.resent_batches,
            )
            for index, stats in sorted((i, c.stats()) for i, c in worker.transfer.connections.items())
        ]
        reports = ""
        if request.include_reports:
            reports = json.dumps(
                {c: {str(t): r for t, r in by_task.items()} for c, by_task in worker.live_reports().items()},
                default=repr,
            )
        return admin_pb2.WorkerStatus(
            topology=worker.topology_id,
            worker=worker.index,
            workers=worker.assignment.num_workers,
            uptime_seconds=worker.uptime,
            transport=self.transport,
            state=self._state(),
            executors=executors,
            peers=peers,
            consumed=consumed,
            delivered=delivered,
            unknown_task_messages=worker.receive.unknown,
            duplicate_batches=worker.duplicate_batches,
            spouts_finished=worker.spouts_finished(),
            reports_json=reports,
            transferred_tuples=worker.transfer.sent_messages,
            transferred_batches=worker.transfer.sent_batches,
            lost_tuples=worker.transfer.lost_messages,
            idle=worker.idle(),
            queues=[
                admin_pb2.QueueInfo(name=name, depth=depth, capacity=capacity)
                for name, (depth, capacity) in worker.queue_depths().items()
            ],
        )

    def GetAssignment(
        self, request: admin_pb2.GetAssignmentRequest, context: grpc.ServicerContext
    ) -> admin_pb2.AssignmentInfo:
        assignment = self.worker.assignment
        return admin_pb2.AssignmentInfo(
            workers=assignment.num_workers,
            executors=[
                admin_pb2.AssignedExecutor(
                    index=e.index, component=e.component, tasks=list(e.tasks), worker=e.worker
                )
                for e in assignment.executors
            ],
        )

    def ListQueues(
        self, request: admin_pb2.ListQueuesRequest, context: grpc.ServicerContext
    ) -> admin_pb2.QueueList:
        return admin_pb2.QueueList(queues=self._rates.queues())

    def WatchStats(
        self, request: admin_pb2.WatchStatsRequest, context: grpc.ServicerContext
    ) -> Iterator[admin_pb2.WorkerStats]:
        interval = request.interval_seconds or 1.0
        if interval < 0.05:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"interval_seconds must be >= 0.05, got {interval}"
            )
        rates = QueueRates(self.worker)
        last_time, last = time.monotonic(), self.worker.component_counters()
        stop = threading.Event()
        context.add_callback(stop.set)
        while not stop.wait(interval) and context.is_active():
            now, counters = time.monotonic(), self.worker.component_counters()
            elapsed = max(now - last_time, 1e-9)
            components = [
                admin_pb2.ComponentStats(
                    component=name,
                    emitted=c["emitted"],
                    executed=c["executed"],
                    executed_per_second=(c["executed"] - last.get(name, c)["executed"]) / elapsed,
                    emitted_per_second=(c["emitted"] - last.get(name, c)["emitted"]) / elapsed,
                )
                for name, c in sorted(counters.items())
            ]
            last_time, last = now, counters
            yield admin_pb2.WorkerStats(
                worker=self.worker.index,
                uptime_seconds=self.worker.uptime,
                components=components,
                queues=rates.queues(),
            )
            if self._state() == "NOT_SERVING" and self.worker.idle():
                return  # drained: the stream ends

    # -- actions --------------------------------------------------------------------------------
    def Emit(self, request: admin_pb2.EmitRequest, context: grpc.ServicerContext) -> admin_pb2.EmitResponse:
        worker = self.worker
        if not worker.conf["admin.emit.enabled"]:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "Admin.Emit is off: set admin.emit.enabled: true"
            )
        values = json_array(request.values_json, "values_json", context)
        task, component = self._target(request, context)
        spec = worker.topology.components[component]
        stream = request.stream or "default"
        if request.source_component:
            matches = [s for s in spec.inputs if s.source == request.source_component and s.stream == stream]
            if not matches:
                context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"component {component!r} does not subscribe to {request.source_component!r} "
                    f"stream {stream!r}",
                )
            source = matches[0].source
        else:
            matches = [s for s in spec.inputs if s.stream == stream]
            if not matches:
                context.abort(
                    grpc.StatusCode.NOT_FOUND, f"component {component!r} subscribes to no stream {stream!r}"
                )
            source = matches[0].source
        fields = worker.topology.components[source].streams[stream].fields
        if len(values) != len(fields):
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{source!r} stream {stream!r} has {len(fields)} field(s) {list(fields)}, "
                f"got {len(values)} value(s)",
            )
        worker.inject(task, Tuple(values, 0, source, stream, fields))
        return admin_pb2.EmitResponse(task=task)

    def _target(self, request: admin_pb2.EmitRequest, context: grpc.ServicerContext) -> tuple[int, str]:
        worker = self.worker
        component_of = worker.assignment.component_of_task()
        if request.task:
            if request.task not in component_of:
                context.abort(grpc.StatusCode.NOT_FOUND, f"no task {request.task} in this topology")
            self._check_has_inputs(component_of[request.task], context)
            if request.task not in worker.local_inbox_of_task:
                context.abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"task {request.task} runs on worker {worker.assignment.worker_of_task()[request.task]}, "
                    f"not on worker {worker.index}",
                )
            return request.task, component_of[request.task]
        if not request.component:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "give a component or a task")
        if request.component not in worker.topology.components:
            known = ", ".join(sorted(worker.topology.components))
            context.abort(grpc.StatusCode.NOT_FOUND, f"no component {request.component!r} (known: {known})")
        self._check_has_inputs(request.component, context)
        local = [t for t in worker.assignment.tasks_of(request.component) if t in worker.local_inbox_of_task]
        if not local:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"component {request.component!r} has no task on worker {worker.index}",
            )
        return local[0], request.component

    def _check_has_inputs(self, component: str, context: grpc.ServicerContext) -> None:
        if not self.worker.topology.components[component].inputs:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, f"component {component!r} has no inputs (a spout?)"
            )

    def Drain(
        self, request: admin_pb2.DrainRequest, context: grpc.ServicerContext
    ) -> admin_pb2.DrainResponse:
        if not self.worker.conf["admin.drain.enabled"]:
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED, "Admin.Drain is off: set admin.drain.enabled: true"
            )
        return admin_pb2.DrainResponse(state=self._drain())


def as_dict_for_proto(counters: Any) -> dict[str, int]:
    """The ExecutorStatus fields of an executor's counters."""
    d = counters.as_dict()
    return {k: d[k] for k in ("emitted", "executed", "received", "acked", "failed", "errors")}
