"""The Admin gRPC service: a thin servicer over a running Worker (no routing logic here)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, Protocol

import grpc

from tuplemesh.config import as_config
from tuplemesh.core.feature import Feature, RestoringFeature, TupleWatch, WatchingFeature
from tuplemesh.core.stats import WorkerSnapshot
from tuplemesh.core.summary import component_totals
from tuplemesh.errors import RescaleRefusedError
from tuplemesh.grpcutil import json_array
from tuplemesh.security import REBALANCE, ProofRefused, ProofVerifier, is_worker_certificate, mesh_secret
from tuplemesh.server.settings import ServerSettings
from tuplemesh.server.status_proto import queue_to_proto, snapshot_to_proto
from tuplemesh.topology import Topology, Tuple
from tuplemesh.topology.assignment import Assignment, Epoch
from tuplemesh.ui.graph import topology_graph
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

__all__ = ["AdminServicer", "AdminWorker", "QueueRates", "StatsStream"]

#: WatchTuples: samples per second a watcher gets when it does not say, and the most it may ask.
DEFAULT_TUPLES_PER_SECOND = 10.0
MAX_TUPLES_PER_SECOND = 1000.0

#: WatchStats intervals accepted (seconds): a day at most, which threading's waits can represent.
WATCH_MIN_INTERVAL = 0.05
WATCH_MAX_INTERVAL = 86400.0


class AdminWorker(Protocol):
    """What Admin reads and calls of the Worker it serves (a Protocol: Admin imports nothing of
    the worker package)."""

    @property
    def topology(self) -> Topology: ...

    @property
    def topology_id(self) -> str: ...

    @property
    def index(self) -> int: ...

    @property
    def conf(self) -> Mapping[str, Any]: ...

    @property
    def assignment(self) -> Assignment: ...

    @property
    def epoch(self) -> Epoch: ...

    @property
    def features(self) -> Mapping[str, Feature]: ...

    @property
    def local_tasks(self) -> Collection[int]:
        """The tasks this worker runs."""
        ...

    def executor_names(self, component: str) -> list[str]:
        """The names of this worker's executors of ``component`` (none: it runs no task of it)."""
        ...

    def snapshot(self, feature_sections: bool = True) -> WorkerSnapshot: ...

    def live_reports(self) -> Mapping[str, Mapping[int, Any]]: ...

    def inject(self, task: int, tup: Any) -> None: ...

    def refuse(self, reason: str, where: str, detail: str) -> None: ...


class QueueRates:
    """Publish rates of every ring, from the change of its cursor between two snapshots. Thread-safe."""

    def __init__(self, first: WorkerSnapshot) -> None:
        self._lock = threading.Lock()
        self._last = (time.monotonic(), {q.name: q.published for q in first.queues})

    def queues(self, snapshot: WorkerSnapshot) -> list[admin_pb2.QueueInfo]:
        now, cursors = time.monotonic(), {q.name: q.published for q in snapshot.queues}
        with self._lock:
            then, before = self._last
            self._last = (now, cursors)
        elapsed = max(now - then, 1e-9)
        return [
            queue_to_proto(q, (q.published - before.get(q.name, q.published)) / elapsed)
            for q in snapshot.queues
        ]


def rss_bytes() -> int:
    """Resident memory of this process now (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


class StatsStream:
    """Successive WorkerStats of one worker: counters, rates since the previous call and the full
    status. What WatchStats streams, and what the worker's web UI shows. Not thread-safe."""

    def __init__(self, worker: AdminWorker, transport: str, state: Callable[[], str]) -> None:
        self.worker = worker
        self.transport = transport
        self._state = state
        first = worker.snapshot(feature_sections=False)  # for its counters alone
        self._rates = QueueRates(first)
        self._last_time, self._last = time.monotonic(), component_totals([first])

    def next(self) -> admin_pb2.WorkerStats:
        snapshot = self.worker.snapshot()
        now, counters = time.monotonic(), component_totals([snapshot])
        elapsed = max(now - self._last_time, 1e-9)
        last = self._last
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
        self._last_time, self._last = now, counters
        return admin_pb2.WorkerStats(
            worker=snapshot.worker,
            uptime_seconds=snapshot.uptime_seconds,
            components=components,
            queues=self._rates.queues(snapshot),
            status=snapshot_to_proto(
                snapshot, transport=self.transport, state=self._state(), rss_bytes=rss_bytes()
            ),
        )


class AdminServicer(admin_pb2_grpc.AdminServicer):
    """Answers Admin rpcs from a Worker's state; ``drain`` and ``state`` come from its process."""

    def __init__(
        self,
        worker: AdminWorker,
        transport: str,
        drain: Callable[[], str],
        state: Callable[[], str],
        rebalance: Callable[[int, str], str] | None = None,
        epoch_history: Callable[[], list[dict[str, Any]]] | None = None,
    ) -> None:
        self.worker = worker
        self._rebalance = rebalance
        # the process's epochs (they outlive this servicer, one per epoch), rows as the UI shows them
        self._epoch_history = epoch_history
        # what a Rebalance naming an epoch (a peer forwarding its rescale) must prove, as a
        # Transfer stream does: the mesh secret, and under mTLS a certificate with the worker role
        secret = mesh_secret(worker.conf)
        conf = as_config(worker.conf)
        self._verifier = (
            ProofVerifier(
                secret,
                worker.topology_id,
                worker.index,
                REBALANCE,
                ServerSettings.from_config(conf).secret_max_skew_seconds,
                conf["mesh.secret.replay.cache.entries"],
            )
            if secret
            else None
        )
        self._worker_certificates = bool(worker.conf["tls.enabled"])
        self.transport = transport
        self._drain = drain
        self._state = state
        self._rates = QueueRates(worker.snapshot(feature_sections=False))

    # -- status ---------------------------------------------------------------------------------
    def GetStatus(
        self, request: admin_pb2.GetStatusRequest, context: grpc.ServicerContext
    ) -> admin_pb2.WorkerStatus:
        worker = self.worker
        snapshot = worker.snapshot()
        reports = ""
        if request.include_reports:
            # tasks whose state a feature (checkpointing) has not restored yet (none without one)
            restoring = sorted(
                task
                for feature in worker.features.values()
                if isinstance(feature, RestoringFeature)
                for task in feature.restoring()
            )
            if restoring:  # their reports would be of the empty state a task starts with
                context.abort(
                    grpc.StatusCode.UNAVAILABLE,
                    f"worker {worker.index}: task(s) {', '.join(map(str, restoring))} are being "
                    "restored from the last checkpoint: ask for reports again shortly",
                )
            reports = json.dumps(
                {c: {str(t): r for t, r in by_task.items()} for c, by_task in worker.live_reports().items()},
                default=repr,
            )
        return snapshot_to_proto(
            snapshot,
            transport=self.transport,
            state=self._state(),
            reports_json=reports,
            rss_bytes=rss_bytes(),
        )

    def GetAssignment(
        self, request: admin_pb2.GetAssignmentRequest, context: grpc.ServicerContext
    ) -> admin_pb2.AssignmentInfo:
        assignment = self.worker.assignment
        return admin_pb2.AssignmentInfo(
            epoch=str(self.worker.epoch),
            workers=assignment.num_workers,
            executors=[
                admin_pb2.AssignedExecutor(
                    index=e.index, component=e.component, tasks=list(e.tasks), worker=e.worker
                )
                for e in assignment.executors
            ],
            graph_json=json.dumps(topology_graph(self.worker.topology)),
        )

    def GetEpochHistory(
        self, request: admin_pb2.GetEpochHistoryRequest, context: grpc.ServicerContext
    ) -> admin_pb2.EpochHistory:
        rows = self._epoch_history() if self._epoch_history is not None else []
        return admin_pb2.EpochHistory(
            epochs=[
                admin_pb2.EpochRecord(epoch=r["epoch"], workers=r["workers"], since_unix_seconds=r["since"])
                for r in rows
            ]
        )

    def ListQueues(
        self, request: admin_pb2.ListQueuesRequest, context: grpc.ServicerContext
    ) -> admin_pb2.QueueList:
        return admin_pb2.QueueList(queues=self._rates.queues(self.worker.snapshot(feature_sections=False)))

    def WatchStats(
        self, request: admin_pb2.WatchStatsRequest, context: grpc.ServicerContext
    ) -> Iterator[admin_pb2.WorkerStats]:
        interval = request.interval_seconds or 1.0
        # NaN compares false both ways (never throttled); inf and huge values overflow Event.wait
        if not WATCH_MIN_INTERVAL <= interval <= WATCH_MAX_INTERVAL:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"interval_seconds must be in [{WATCH_MIN_INTERVAL}, {WATCH_MAX_INTERVAL:g}], got {interval}",
            )
        stream = StatsStream(self.worker, self.transport, self._state)
        stop = threading.Event()
        context.add_callback(stop.set)
        while not stop.wait(interval) and context.is_active():
            stats = stream.next()
            yield stats
            if stats.status.state == "NOT_SERVING" and stats.status.idle:
                return  # drained: the stream ends

    # -- actions --------------------------------------------------------------------------------
    def Emit(self, request: admin_pb2.EmitRequest, context: grpc.ServicerContext) -> admin_pb2.EmitResponse:
        worker = self.worker
        self._check_enabled("admin.emit.enabled", "Emit", context)
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
            if request.task not in worker.local_tasks:
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
        local = [t for t in worker.assignment.tasks_of(request.component) if t in worker.local_tasks]
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
        self._check_enabled("admin.drain.enabled", "Drain", context)
        return admin_pb2.DrainResponse(state=self._drain())

    # -- sampling -------------------------------------------------------------------------------
    def WatchTuples(
        self, request: admin_pb2.WatchTuplesRequest, context: grpc.ServicerContext
    ) -> Iterator[admin_pb2.SampledTuple]:
        self._check_enabled("admin.watch.tuples.enabled", "WatchTuples", context)
        sampling, watch = self._new_watch(request, context)
        stop = threading.Event()
        context.add_callback(stop.set)
        try:
            while not stop.is_set() and context.is_active():
                for sample in watch.take(timeout=0.2):
                    yield admin_pb2.SampledTuple(
                        component=sample.component,
                        task=sample.task,
                        source_component=sample.source_component,
                        source_task=sample.source_task,
                        stream=sample.stream,
                        values_json=sample.values_json,
                        timestamp=sample.timestamp,
                        skipped=sample.skipped,
                    )
                if self._state() == "NOT_SERVING" and self.worker.snapshot(feature_sections=False).idle:
                    return  # drained: nothing more will execute
        finally:
            sampling.unwatch(watch)

    def _new_watch(
        self, request: admin_pb2.WatchTuplesRequest, context: grpc.ServicerContext
    ) -> tuple[WatchingFeature, TupleWatch]:
        """The watch a request asks for, started, and the feature ending it; aborts on a bad
        request."""
        worker, name = self.worker, request.component
        if name not in worker.topology.components:
            known = ", ".join(sorted(worker.topology.components))
            context.abort(grpc.StatusCode.NOT_FOUND, f"no component {name!r} (known: {known})")
        spec = worker.topology.components[name]
        if spec.is_spout and not request.emitted:
            context.abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"component {name!r} is a spout: it executes nothing; watch what it emits "
                '("emitted": true) or a bolt subscribed to it',
            )
        streams = sorted(spec.streams) if request.emitted else sorted({s.stream for s in spec.inputs})
        if request.stream and request.stream not in streams:
            verb = "declares" if request.emitted else "subscribes to"
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"component {name!r} {verb} no stream {request.stream!r} (it has: {', '.join(streams)})",
            )
        rate, per_second = request.sample_rate or 1.0, request.max_per_second or DEFAULT_TUPLES_PER_SECOND
        if not 0 < rate <= 1:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"sample_rate must be in (0, 1], got {rate}")
        if not 0 < per_second <= MAX_TUPLES_PER_SECOND:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"max_per_second must be in (0, {MAX_TUPLES_PER_SECOND:g}], got {per_second}",
            )
        executors = worker.executor_names(name)
        if not executors:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"component {name!r} has no task on worker {worker.index}"
            )
        sampling = next((f for f in worker.features.values() if isinstance(f, WatchingFeature)), None)
        if sampling is None:  # not registered (an embedding's own feature list)
            context.abort(grpc.StatusCode.UNIMPLEMENTED, f"worker {worker.index} runs no tuple sampling")
        assert sampling is not None  # abort raised
        return sampling, sampling.watch(executors, request.stream or None, rate, per_second, request.emitted)

    def Rebalance(
        self, request: admin_pb2.RebalanceRequest, context: grpc.ServicerContext
    ) -> admin_pb2.RebalanceResponse:
        self._check_enabled("admin.rebalance.enabled", "Rebalance", context)
        if request.epoch:
            self._check_member(context)
        if request.workers < 1:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"workers must be >= 1, got {request.workers}")
        if request.epoch:  # a peer's rescale names the epoch it moves the mesh to
            try:
                target = Epoch.parse(request.epoch)
            except ValueError as exc:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"epoch: {exc}")
            if target.workers != request.workers:
                context.abort(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"epoch {request.epoch!r} is for {target.workers} worker(s), the request for "
                    f"{request.workers}",
                )
        if self._rebalance is None:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, "this worker does not run in a worker process")
        assert self._rebalance is not None
        try:
            epoch = self._rebalance(request.workers, request.epoch)
        except RescaleRefusedError as exc:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return admin_pb2.RebalanceResponse(epoch=epoch)

    def _check_member(self, context: grpc.ServicerContext) -> None:
        """A Rebalance naming an epoch is a worker forwarding the rescale it started, so it must
        come from a member, proven as on Transfer: under mTLS a certificate with the worker role
        (PERMISSION_DENIED otherwise), with a mesh secret the calling worker's proof
        (UNAUTHENTICATED otherwise: no or a wrong proof, one made for another worker, stale or
        already used; RESOURCE_EXHAUSTED when too many were taken within the skew window). The
        admin token alone does not make a member. Each refusal is counted with the Transfer
        refusals; nothing reaches the worker."""
        where = f"Admin.Rebalance naming an epoch, from {context.peer()}"
        how = "to rescale, give only the worker count"
        if self._worker_certificates and not is_worker_certificate(context):
            self.worker.refuse("not_a_worker", where, "a certificate without the worker role")
            context.abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"a Rebalance naming an epoch comes from a worker: it needs a certificate with "
                f"the worker role; {how}",
            )
        if self._verifier is not None:
            metadata = {str(k): str(v) for k, v in context.invocation_metadata() or ()}
            try:
                self._verifier.verify_metadata(metadata)
            except ProofRefused as refused:
                self.worker.refuse(refused.reason, where, str(refused))
                context.abort(
                    refused.code,
                    f"a Rebalance naming an epoch comes from a worker: it needs a fresh proof of the "
                    f"mesh secret: {refused}; {how}",
                )

    def _check_enabled(self, key: str, call: str, context: grpc.ServicerContext) -> None:
        """PERMISSION_DENIED naming ``key`` unless the worker's config turns ``call`` on."""
        if not self.worker.conf[key]:
            context.abort(grpc.StatusCode.PERMISSION_DENIED, f"Admin.{call} is off: set {key}: true")
