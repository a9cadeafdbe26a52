"""`Worker`: one process's share of a topology: its executors, inboxes, receive and transfer paths.

Threads: one per executor, one transfer thread, one flush timer, plus the transport's receive
thread(s). Start-up: rings and executors are built, the port is bound, peers are connected,
executors start. Shutdown (``stop``): spouts stop, bolts finish their inboxes, the transfer
thread sends what it holds, connections and the binding close.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tuplemesh.core.budget import ByteBudget
from tuplemesh.core.congestion import CongestionMap, congested_tasks
from tuplemesh.core.feature import (
    DrainingFeature,
    DrainWait,
    Feature,
    FeatureContext,
    FeatureMetric,
    FeatureServer,
    HopTracer,
    HopTracingFeature,
)
from tuplemesh.core.feature_spec import FeatureSet
from tuplemesh.core.held_back import HeldBack
from tuplemesh.core.markers import FLUSH
from tuplemesh.core.stats import (
    WorkerSnapshot,
)
from tuplemesh.discovery.base import DiscoveryStats, PeerDirectory
from tuplemesh.disruptor import RingBuffer, WaitStrategy, make_wait_strategy
from tuplemesh.errors import InsufficientCapacityError
from tuplemesh.serialization import Serializer, load_serializer
from tuplemesh.topology import Topology
from tuplemesh.topology.assignment import Epoch
from tuplemesh.topology.user_metrics import UserMetrics
from tuplemesh.transport.base import Admission, Binding, Context
from tuplemesh.transport.stats import BindingStats
from tuplemesh.worker.executor import BoltExecutor, SpoutExecutor
from tuplemesh.worker.executor_base import Executor, ExecutorWiring
from tuplemesh.worker.flush_timer import FlushTimer
from tuplemesh.worker.part_snapshots import (
    executor_snapshot,
    peer_snapshots,
    queue_snapshot,
    receive_snapshot,
    transfer_totals,
)
from tuplemesh.worker.plan import WorkerPlan
from tuplemesh.worker.receive import ReceivePath
from tuplemesh.worker.transfer import TransferPath

if TYPE_CHECKING:
    import grpc

__all__ = ["Worker"]

log = logging.getLogger(__name__)


class Worker:
    """Runs the executors assigned to worker ``index`` of ``num_workers``."""

    def __init__(
        self,
        topology: Topology,
        index: int,
        num_workers: int,
        conf: Mapping[str, Any],
        context: Context,
        *,
        port: int,
        peers: Mapping[int, tuple[str, int]],
        features: FeatureSet,
        topology_id: str | None = None,
        epoch: Epoch | None = None,
        directory: PeerDirectory | None = None,
    ) -> None:
        """Built by `tuplemesh.worker.assembly.assemble_worker`. ``features``: the features to
        run, in order: their topology parts and acking go into the plan, their running parts are
        built here (a checkpointed topology runs only with the checkpoints feature: it is the
        barrier alignment its stateful bolts need);
        ``epoch``: the assignment epoch the process chose (None: the configured one);
        ``directory``: where the worker process finds its peers (None: fixed ``peers``)."""
        plan = WorkerPlan.build(topology, index, num_workers, conf, epoch, features)
        self.plan = plan
        self.topology = plan.topology  # with the ackers
        self.index = index
        self.conf = conf
        self.context = context
        self.port = port
        self.topology_id = topology_id or topology.name
        self.assignment = plan.assignment
        queues = plan.queue_settings
        settings = self.settings = plan.worker_settings
        self.local_inbox_of_task, self.transfer_ring = _rings(plan)
        #: the ceiling on serialized bytes held for other workers (executors take, acknowledgements
        #: give back)
        self.transfer_budget = ByteBudget(queues.transfer_max_bytes)
        load_serializer(settings.serializer)  # fail at construction, not in an executor thread
        log_interval = settings.log_interval_seconds
        # With per-task backpressure a full inbox must not block the shared receive thread.
        #: Storm's flush timer, resting while nothing is pending (executors and the receive path wake it)
        self.flush_timer = FlushTimer(queues.flush_interval_seconds)
        # Per-task backpressure (tuplemesh.core.congestion): what peers report, and what we report.
        congestion = CongestionMap() if queues.backpressure_enabled else None
        #: Senders hear about full inboxes (a transport that reports congestion), so a full one
        #: need not block the receive thread (it would stall every task on the stream): past it,
        #: batches wait in a bounded overflow. Without reports (a plugin that cannot tell its
        #: senders) a blocking put is the only backpressure, and stays.
        self.reports_congestion = congestion is not None and context.capabilities.reports_congestion
        if not self.reports_congestion and plan.remote_worker_of_task:
            # Storm 1's answer, unbounded receive queues, is not ours: every buffer is bounded
            why = (
                "topology.backpressure.enable is false"
                if congestion is None
                else f"transport {conf['messaging.transport']!r} cannot report congested tasks"
            )
            log.warning(
                "worker %d: no per-task backpressure (%s): a full inbox blocks the receive thread, "
                "holding up every task fed over the same connection, and workers that send to "
                "each other can block one another for good",
                index,
                why,
            )
        #: Counters, gauges and histograms the components define (``context.metrics``).
        self.user_metrics = UserMetrics()
        self.injected = 0  # tuples put into inboxes by Admin.Emit or a feature (count as deliveries)
        self._inject_lock = threading.Lock()
        # the features' running parts: built here, before the paths that take their hop tracer,
        # each offered every executor below
        #: tasks setting tuples aside outside their inbox (marked by features, read by shuffles)
        self.held_back = HeldBack()
        feature_context = FeatureContext(
            plan.topology,
            conf,
            index,
            self.topology_id,
            plan.assignment,
            inject=self.inject,
            held_back=self.held_back,
        )
        #: the features this worker was assembled with (their specs), and their running parts here
        #: by feature name
        self.feature_set = features
        self.features: dict[str, Feature] = features.build(feature_context)
        hops = _hop_tracer(self.features.values())
        self.receive = ReceivePath(
            index,
            self.local_inbox_of_task,
            log_interval,
            overflow_limit=queues.receive_buffer_batches if self.reports_congestion else 0,
            max_held_bytes=queues.receive_max_bytes,
            on_overflow=self.flush_timer.wake,
            tracer=hops,
        )
        # read at every snapshot: the per-worker backpressure signal an autoscaler scales on
        self._congested_now = congested_tasks(self.local_inbox_of_task, queues.backpressure_watermark)
        self.transfer = TransferPath(
            self.transfer_ring,
            context,
            self.topology_id,
            {w: addr for w, addr in peers.items() if w != index},
            set(range(num_workers)) - {index},
            queues.transfer_batch_tuples,
            log_interval,
            settings.metrics_enabled,
            self.transfer_budget,
            queues.queue_target_seconds,
            str(plan.epoch),
            congestion.report if congestion is not None else None,
            tracer=hops,
        )
        wiring = ExecutorWiring(
            plan,
            self.local_inbox_of_task,
            self.transfer_ring,
            self.new_serializer,
            congestion,
            self.user_metrics,
            self.transfer_budget,
            tuple(self.features.values()),
            self.flush_timer,
            self.held_back,
        )
        self.executors: list[Executor] = [
            SpoutExecutor(e, wiring)
            if plan.topology.components[e.component].is_spout
            else BoltExecutor(e, wiring)
            for e in plan.executors
        ]
        self._binding: Binding | None = None
        self._flusher: threading.Thread | None = None
        #: what a whole-mesh stop waits for, from the features that take part in the drain
        self._drain_waits: list[DrainWait] = []
        self.started_at: float | None = None
        #: Where the peers were found (its counts go into ``snapshot``).
        self.directory = directory

    @property
    def epoch(self) -> Epoch:
        """The assignment this worker routes by (its plan's), as every Transfer stream names it."""
        return self.plan.epoch

    def new_serializer(self) -> Serializer:
        """A serializer instance for one thread."""
        return load_serializer(self.settings.serializer)

    @property
    def local_tasks(self) -> Collection[int]:
        """The tasks this worker runs."""
        return self.local_inbox_of_task.keys()

    def executor_names(self, component: str) -> list[str]:
        """The names of this worker's executors of ``component`` (none: it runs no task of it)."""
        return [e.name for e in self.executors if e.spec.component == component]

    @property
    def spout_executors(self) -> list[SpoutExecutor]:
        return [e for e in self.executors if isinstance(e, SpoutExecutor)]

    @property
    def bolt_executors(self) -> list[BoltExecutor]:
        return [e for e in self.executors if isinstance(e, BoltExecutor)]

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self, *, hold_spouts: bool = False) -> None:
        """Bind, connect to peers, start every thread. Returns once executors run.

        ``hold_spouts``: the spouts open but emit nothing until `release_spouts` (a worker whose
        assignment epoch no peer has confirmed yet must not send what they may refuse)."""
        for feature in self.features.values():
            feature.start()  # before any task runs (e.g. a new attempt counted before restores)
        congestion = None
        if self.reports_congestion:
            congestion = congested_tasks(
                self.local_inbox_of_task, self.plan.queue_settings.backpressure_watermark
            )
        self._binding = self.context.bind(
            self.topology_id,
            self.port,
            self.receive.on_batch,
            congestion,
            self.receive.granted_bytes,
            str(self.epoch),
        )
        self.transfer.start()
        for executor in self.bolt_executors:
            executor.start()
        for spout_executor in self.spout_executors:
            if hold_spouts:
                spout_executor.switch.hold()
            spout_executor.start()
        self._flusher = threading.Thread(target=self._flush_loop, name=f"flusher-{self.index}", daemon=True)
        self._flusher.start()
        self.started_at = time.monotonic()

    @property
    def uptime(self) -> float:
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at

    def inject(self, task: int, tup: Any) -> None:
        """Deliver ``tup`` to local ``task`` as if an upstream executor had (Admin.Emit, a
        feature's own tuples). Any thread."""
        with self._inject_lock:
            self.injected += 1
        self.local_inbox_of_task[task].put([(task, tup)])

    def admit(self, admission: Admission | None) -> None:
        """Ask ``admission`` about every batch received from now on (None: take every batch)."""
        if self._binding is not None:
            self._binding.admit(admission)

    def epoch_refused_batches(self) -> int:
        """Batches refused so far for naming another assignment epoch than this worker's: a
        peer that routes by a newer one sends them (the epoch follower looks at this count)."""
        return 0 if self._binding is None else self._binding.stats().epoch_refused_batches

    def stopped_by_notice(self) -> bool:
        """True once a peer's shutdown notice stopped this worker receiving: for good, as Storm's
        receive thread ends on ``task == -1`` (the binding counts each notice it honoured)."""
        return self._binding is not None and self._binding.stats().shutdown_messages > 0

    def refuse(self, reason: str, where: str, detail: str) -> None:
        """Count a caller refused as no member of the mesh with the binding's refusals (the
        ``refused`` counts: one place for every membership refusal), and log it. Any thread."""
        if self._binding is not None:
            self._binding.refuse(reason, where, detail)
        else:  # not bound yet: nothing counts refusals; the log still says
            log.warning("%s: refused (%s): %s", where, reason, detail)

    def drain_waits(self) -> list[DrainWait]:
        """What a whole-mesh stop waits for once the mesh is idle, before the executors stop
        (e.g. a checkpointed topology's final checkpoint): what the features that take part in
        the drain handed back as ``deactivate_spouts`` began it."""
        return list(self._drain_waits)

    def release_spouts(self) -> None:
        """End the hold `start` put on the spouts: they emit from now on. Any thread."""
        for executor in self.spout_executors:
            executor.switch.release()

    def deactivate_spouts(self, timeout: float = 5.0) -> bool:
        """Stop the spouts' next_tuple calls and wait (up to ``timeout``) until each spout loop has
        seen it: afterwards every tuple they emit is already counted, so a drain that finds the
        counters still is not fooled by a next_tuple call under way. False when one did not
        return in time. The features that take part in the drain hear of it first (e.g. a
        checkpoint clock pauses) and hand back what a whole-mesh stop waits for (`drain_waits`)."""
        self._drain_waits = [
            wait
            for feature in self.features.values()
            if isinstance(feature, DrainingFeature) and (wait := feature.draining()) is not None
        ]
        for executor in self.spout_executors:
            executor.switch.deactivate()
        deadline = time.monotonic() + timeout
        quiet = True
        for executor in self.spout_executors:
            if not executor.switch.wait_deactivated(max(0.0, deadline - time.monotonic())):
                log.warning("worker %d: spout %s is still inside next_tuple", self.index, executor.name)
                quiet = False
        return quiet

    def stop(self, timeout: float | None = None) -> bool:
        """Stop in data-path order; True when every thread ended within ``timeout``."""
        timeout = self.settings.shutdown_timeout_seconds if timeout is None else timeout
        deadline = time.monotonic() + timeout
        clean = True
        self.flush_timer.stop()
        for feature in self.features.values():
            feature.stopping()  # e.g. no new rows from outside, and nothing waits for outside readers
        for spout_executor in self.spout_executors:
            spout_executor.request_stop()
        for spout_executor in self.spout_executors:
            # bounded: a spout blocked on a full transfer queue ends when the transfer path halts
            clean &= spout_executor.join(min(5.0, max(0.0, deadline - time.monotonic())))
        while self.receive.move_overflow() and time.monotonic() < deadline:
            time.sleep(0.001)  # batches waiting for full inboxes go in before the stop markers
        for bolt_executor in self.bolt_executors:
            bolt_executor.request_stop()
        for bolt_executor in self.bolt_executors:
            if not bolt_executor.join(max(0.0, deadline - time.monotonic())):
                clean = False
                log.warning(
                    "worker %d: executor %s did not drain in time; halting it", self.index, bolt_executor.name
                )
                bolt_executor.halt()
        remaining = min(5.0, max(0.0, deadline - time.monotonic()))
        if not self.transfer.request_stop(remaining) or not self.transfer.join(
            max(0.0, deadline - time.monotonic())
        ):
            clean = False
            self.transfer.halt()
        self.transfer.close_connections()
        if self._binding is not None:
            self._binding.close()
        self.receive.abandon_overflow()  # nothing takes it any more: counted, not silently gone
        if self._flusher is not None:
            self._flusher.join(1.0)
        for feature in self.features.values():
            feature.stop()
        return clean

    def _flush_loop(self) -> None:
        """Storm 2's flush timer: ask idle executors with partial batches to flush them (and move
        batches waiting in the receive overflow into inboxes that have room again)."""
        timer = self.flush_timer
        interval = timer.interval
        bolts = self.bolt_executors
        while timer.next_tick():
            busy = self.receive.move_overflow() > 0
            now = time.monotonic()
            for executor in bolts:
                outbox = executor.outbox
                if not outbox.pending:
                    continue
                busy = True
                if not executor.flush_requested and now - outbox.last_flush >= interval:
                    executor.flush_requested = True
                    try:
                        executor.inbox.try_put(FLUSH)
                    except InsufficientCapacityError:
                        executor.flush_requested = False  # busy: it flushes at its next end of batch
            timer.found(busy)

    # -- observation ----------------------------------------------------------------------------
    def snapshot(self, feature_sections: bool = True) -> WorkerSnapshot:
        """Every counter of this worker, each read once. Any thread; read-side only.
        ``feature_sections``: ask each feature for its section too (what Admin's status shows;
        /metrics and the drain, which read the snapshot often, leave them out).

        The consumed side (executors' ``received``, the receive path, transfer losses) is read
        before any delivery count, so a tuple in flight is counted as delivered and not yet
        consumed: summed over all workers, consumed == delivered proves an empty mesh (read
        every worker's ``consumed`` before any worker's ``delivered``, see LocalCluster).
        """
        counters = [(e, e.counters.as_dict()) for e in self.executors]
        received = receive_snapshot(self.receive)
        transfer = self.transfer.stats()
        binding = BindingStats() if self._binding is None else self._binding.stats()
        # Refused (halted-inbox) messages are not consumed: the sender still holds and resends them.
        consumed = received.unknown_tasks + transfer.lost_tuples + sum(c["received"] for _, c in counters)
        injected = self.injected
        executors = tuple(executor_snapshot(e, c) for e, c in counters)
        delivered = sum(e.delivered for e in executors) + injected
        queues = tuple(queue_snapshot(name, ring) for name, ring in self._rings())
        peers = peer_snapshots(self.transfer, transfer)
        # spouts know their pending input once opened (start); before that they hold none
        holds_input = any(e.outbox.pending for e in self.executors) or (
            self.started_at is not None and any(e.pending() for e in self.spout_executors)
        )
        congested = self._congested_now()
        return WorkerSnapshot(
            topology=self.topology_id,
            worker=self.index,
            workers=self.assignment.num_workers,
            uptime_seconds=self.uptime,
            executors=executors,
            queues=queues,
            peers=peers,
            binding=binding,
            receive=received,
            transfer=transfer_totals(self.transfer, transfer, self.transfer_budget),
            discovery=DiscoveryStats() if self.directory is None else self.directory.stats(),
            consumed=consumed,
            delivered=delivered,
            injected=injected,
            local_queues_empty=not holds_input
            and not received.overflow_batches
            and all(q.depth == 0 for q in queues),
            spouts_finished=all(e.finished for e in executors if e.spout),
            spouts_quiet=all(e.switch.quiet for e in self.spout_executors),
            epoch=str(self.epoch),
            congested_tasks=len(congested),
            congested_task_ids=tuple(congested),
            tasks=len(self.local_inbox_of_task),
            feature_sections=self._feature_sections() if feature_sections else {},
            **self._feature_snapshot_fields(),
        )

    def serve_features(self, server: grpc.Server, accepting: Callable[[], bool]) -> FeatureServer:
        """Let every feature add its gRPC services to the process's ``server``, before it starts;
        ``accepting`` is False once the worker drains or stops (calls bringing work go elsewhere).
        Returns what they added: the services reflection is to list, and the calls they add to
        Admin (which the caller serves beside Admin's own)."""
        where = FeatureServer(server, accepting)
        for feature in self.features.values():
            feature.serve(where)
        return where

    def feature_metrics(self) -> list[FeatureMetric]:
        """Every feature's Prometheus families now (the exporter adds the worker label)."""
        return [metric for feature in self.features.values() for metric in feature.metrics()]

    def _rings(self) -> list[tuple[str, RingBuffer[Any]]]:
        """Every ring of this worker by queue name: executor inboxes, then the transfer ring."""
        return [(f"inbox:{e.name}", e.inbox) for e in self.executors] + [("transfer", self.transfer_ring)]

    def _feature_snapshot_fields(self) -> dict[str, Any]:
        """The snapshot fields the features fill (e.g. ``export_lost``), by field name."""
        fields: dict[str, Any] = {}
        for feature in self.features.values():
            fields.update(feature.snapshot_fields())
        return fields

    def _feature_sections(self) -> dict[str, dict[str, Any]]:
        """What each feature reports of itself, by feature name; empty sections left out. Each
        is taken through JSON here, so a status carries it as it stands in the snapshot (tuples
        as lists), and a section JSON cannot hold fails alone, never the status."""
        sections: dict[str, dict[str, Any]] = {}
        for name, feature in self.features.items():
            try:
                section = json.loads(json.dumps(dict(feature.section()), allow_nan=False, default=repr))
            except Exception as exc:  # a section is diagnostics: never fail the snapshot
                section = {"error": repr(exc)}  # shown to whoever reads it, every time
            if section:
                sections[name] = section
        return sections

    def peers_connected(self) -> bool:
        """Every other worker has a connection that is up."""
        connections = self.transfer.connections
        return len(connections) == len(self.transfer.expected) and all(
            c.stats().channel_state == "READY" for c in connections.values()
        )

    def live_reports(self) -> dict[str, dict[int, Any]]:
        """Every task's ``report()`` now; consistent only once the topology is quiescent."""
        out: dict[str, dict[int, Any]] = {}
        for executor in self.executors:
            into = out.setdefault(executor.spec.component, {})
            for task, component in executor.tasks.items():
                try:
                    into[task] = component.report()
                except Exception as exc:  # a report is diagnostics: never fail the caller
                    into[task] = {"error": repr(exc)}
        return out

    def reports(self) -> dict[str, dict[int, Any]]:
        """Final ``report()`` of every task, by component (filled in as executors stop)."""
        out: dict[str, dict[int, Any]] = {}
        for executor in self.executors:
            out.setdefault(executor.spec.component, {}).update(executor.final_reports)
        return out


def _rings(plan: WorkerPlan) -> tuple[dict[int, RingBuffer[Any]], RingBuffer[Any]]:
    """The worker's rings: each local task's inbox (one per executor, its tasks sharing it) and
    the transfer ring to the other workers, sized and waiting as the plan's queue settings say."""
    queues = plan.queue_settings

    def strategy() -> WaitStrategy:
        return make_wait_strategy(queues.wait_strategy, queues.wait_timeout_seconds, queues.wait_yields)

    inboxes: dict[int, RingBuffer[Any]] = {
        e.index: RingBuffer.multi_producer(queues.receive_buffer_batches, wait_strategy=strategy())
        for e in plan.executors
    }
    transfer_ring: RingBuffer[Any] = RingBuffer.multi_producer(
        queues.transfer_buffer_batches, wait_strategy=strategy()
    )
    return {t: inboxes[e] for t, e in plan.executor_of_task.items()}, transfer_ring


def _hop_tracer(features: Iterable[Feature]) -> HopTracer | None:
    """The spans of the worker's transfer and receive hops, from the one feature that traces
    them (None: none does)."""
    tracing = [f for f in features if isinstance(f, HopTracingFeature)]
    if len(tracing) > 1:  # two would each trace half the hops
        raise TypeError(f"more than one feature traces the hops: {', '.join(f.name for f in tracing)}")
    return tracing[0].hop_tracer() if tracing else None
