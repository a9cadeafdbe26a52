"""`Worker`: one process's share of a topology: its executors, inboxes, receive and transfer paths.

Threads: one per executor, one transfer thread, one flush timer, plus the transport's receive
thread(s). Start-up: rings and executors are built, the port is bound, peers are connected,
executors start. Shutdown (``stop``): spouts stop, bolts finish their inboxes, the transfer
thread sends what it holds, connections and the binding close.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from tuplemesh.disruptor import RingBuffer, make_wait_strategy
from tuplemesh.errors import InsufficientCapacityError
from tuplemesh.gateway.registry import GatewayRegistry
from tuplemesh.serialization import Serializer, load_serializer
from tuplemesh.topology import Topology
from tuplemesh.transport.base import Binding, Context
from tuplemesh.worker.congestion import CongestionMap, congested_tasks
from tuplemesh.worker.executor import BoltExecutor, Executor, ExecutorWiring, SpoutExecutor
from tuplemesh.worker.markers import FLUSH
from tuplemesh.worker.plan import WorkerPlan
from tuplemesh.worker.receive import ReceivePath
from tuplemesh.worker.transfer import TransferPath

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
        topology_id: str | None = None,
    ) -> None:
        plan = WorkerPlan.build(topology, index, num_workers, conf)
        self.plan = plan
        self.topology = plan.topology  # with the ackers
        self.index = index
        self.conf = conf
        self.context = context
        self.port = port
        self.topology_id = topology_id or topology.name
        self.assignment = plan.assignment
        self.stream_ids = plan.stream_ids
        self.stream_info = plan.stream_info
        queues = self.queue_settings = plan.queue_settings
        settings = self.settings = plan.worker_settings
        strategy, timeout = queues.wait_strategy, queues.wait_timeout_seconds
        my_executors = plan.executors
        self.inboxes: dict[int, RingBuffer[Any]] = {
            e.index: RingBuffer.multi_producer(
                queues.receive_buffer_batches, wait_strategy=make_wait_strategy(strategy, timeout)
            )
            for e in my_executors
        }
        self.local_inbox_of_task = {t: self.inboxes[e] for t, e in plan.executor_of_task.items()}
        self.remote_worker_of_task = plan.remote_worker_of_task
        self.transfer_ring: RingBuffer[Any] = RingBuffer.multi_producer(
            queues.transfer_buffer_batches, wait_strategy=make_wait_strategy(strategy, timeout)
        )
        self._serializer_name = settings.serializer
        load_serializer(self._serializer_name)  # fail at construction, not in an executor thread
        log_interval = settings.log_interval_seconds
        # With per-task backpressure a full inbox must not block the shared receive thread.
        self.receive = ReceivePath(index, self.local_inbox_of_task, log_interval)
        self.transfer = TransferPath(
            self.transfer_ring,
            context,
            self.topology_id,
            {w: addr for w, addr in peers.items() if w != index},
            set(range(num_workers)) - {index},
            queues.transfer_batch_tuples,
            log_interval,
            settings.metrics_enabled,
        )
        # Per-task backpressure (tuplemesh.worker.congestion): what peers report, and what we report.
        self.congestion = CongestionMap() if queues.backpressure_enabled else None
        if self.congestion is not None:
            self.transfer.on_congestion = self.congestion.report
        wiring = ExecutorWiring(
            plan, self.local_inbox_of_task, self.transfer_ring, self.new_serializer, self.congestion
        )
        self.executors: list[Executor] = [
            SpoutExecutor(e, wiring)
            if plan.topology.components[e.component].is_spout
            else BoltExecutor(e, wiring)
            for e in my_executors
        ]
        # Where this worker's IngestSpout/ExportBolt tasks register and its Gateway finds them.
        self.gateway = GatewayRegistry.attach(topology.name, index)
        self._binding: Binding | None = None
        self._flusher: threading.Thread | None = None
        self._stopping = threading.Event()
        self.started_at: float | None = None
        self.injected = 0  # tuples put into inboxes by Admin.Emit (count as deliveries)
        self._inject_lock = threading.Lock()

    def new_serializer(self) -> Serializer:
        """A serializer instance for one thread."""
        return load_serializer(self._serializer_name)

    @property
    def spout_executors(self) -> list[SpoutExecutor]:
        return [e for e in self.executors if isinstance(e, SpoutExecutor)]

    @property
    def bolt_executors(self) -> list[BoltExecutor]:
        return [e for e in self.executors if isinstance(e, BoltExecutor)]

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        """Bind, connect to peers, start every thread. Returns once executors run."""
        congestion = None
        if self.congestion is not None and self.context.capabilities.reports_congestion:
            congestion = congested_tasks(self.local_inbox_of_task, self.queue_settings.backpressure_watermark)
            # Senders hear about full inboxes, so a full one need not block the receive
            # thread (it would stall every task on the stream). Without reports (the local
            # transport) a blocking put is the only backpressure, and stays.
            self.receive.overflow_limit = self.queue_settings.receive_buffer_batches
        self._binding = self.context.bind(self.topology_id, self.port, self.receive.on_batch, congestion)
        self.transfer.start()
        for executor in self.bolt_executors:
            executor.start()
        for spout_executor in self.spout_executors:
            spout_executor.start()
        self._flusher = threading.Thread(target=self._flush_loop, name=f"flusher-{self.index}", daemon=True)
        self._flusher.start()
        self.started_at = time.monotonic()

    @property
    def uptime(self) -> float:
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at

    def inject(self, task: int, tup: Any) -> None:
        """Deliver ``tup`` to local ``task`` as if an upstream executor had (Admin.Emit). Any thread."""
        with self._inject_lock:
            self.injected += 1
        self.local_inbox_of_task[task].put([(task, tup)])

    def deactivate_spouts(self) -> None:
        for executor in self.spout_executors:
            executor.deactivate()

    def stop(self, timeout: float | None = None) -> bool:
        """Stop in data-path order; True when every thread ended within ``timeout``."""
        timeout = self.settings.shutdown_timeout_seconds if timeout is None else timeout
        deadline = time.monotonic() + timeout
        clean = True
        self._stopping.set()
        self.gateway.close()  # no new rows; full export logs stop waiting for readers
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
        if self._flusher is not None:
            self._flusher.join(1.0)
        return clean

    def _flush_loop(self) -> None:
        """Storm 2's flush timer: ask idle executors with partial batches to flush them."""
        interval = self.queue_settings.flush_interval_seconds
        bolts = self.bolt_executors
        while not self._stopping.wait(interval):
            self.receive.move_overflow()
            now = time.monotonic()
            for executor in bolts:
                outbox = executor.outbox
                if outbox.pending and not executor.flush_requested and now - outbox.last_flush >= interval:
                    executor.flush_requested = True
                    try:
                        executor.inbox.try_put(FLUSH)
                    except InsufficientCapacityError:
                        executor.flush_requested = False  # busy: it flushes at its next end of batch

    # -- observation ----------------------------------------------------------------------------
    def balance(self) -> tuple[int, int]:
        """(consumed, delivered): tuples consumed here (read first) and tuples delivered by here.

        Summed over all workers, consumed == delivered means nothing is in flight (see LocalCluster).
        """
        # Refused (halted-inbox) messages are not consumed: the sender still holds and resends them.
        consumed = self.receive.unknown + self.transfer.lost_messages
        consumed += sum(e.counters.received for e in self.executors)
        delivered = sum(e.outbox.delivered for e in self.executors) + self.injected
        return consumed, delivered

    def peers_connected(self) -> bool:
        """Every other worker has a connection that is up."""
        connections = self.transfer.connections
        return len(connections) == len(self.transfer.expected) and all(
            c.stats().channel_state == "READY" for c in connections.values()
        )

    def idle(self, unacked: bool = True) -> bool:
        """Nothing queued in this worker: inboxes, transfer ring, emit buffers, accepted spout
        input, and (with ``unacked``) sends the peers have not acknowledged yet."""
        if any(e.outbox.pending for e in self.executors) or any(e.pending() for e in self.spout_executors):
            return False
        if self.receive.overflowing:
            return False
        rings = [e.inbox for e in self.executors] + [self.transfer_ring]
        if any(r.remaining_capacity() != r.buffer_size for r in rings):
            return False
        return not unacked or not any(c.stats().unacked_batches for c in self.transfer.connections.values())

    @property
    def duplicate_batches(self) -> int:
        """Batches the transport discarded as resends."""
        return 0 if self._binding is None else self._binding.stats().duplicate_batches

    def received_from(self) -> tuple[dict[int, int], dict[int, int]]:
        """(tuples, bytes) received per sending worker (empty for the in-process transport)."""
        if self._binding is None:
            return {}, {}
        stats = self._binding.stats()
        return stats.received_tuples_from, stats.received_bytes_from

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

    def spouts_finished(self) -> bool:
        return all(e.finished.is_set() for e in self.spout_executors)

    def component_counters(self) -> dict[str, dict[str, int]]:
        totals: dict[str, dict[str, int]] = {}
        for executor in self.executors:
            into = totals.setdefault(executor.spec.component, {})
            for name, value in executor.counters.as_dict().items():
                into[name] = into.get(name, 0) + value
        return totals

    def reports(self) -> dict[str, dict[int, Any]]:
        """Final ``report()`` of every task, by component (filled in as executors stop)."""
        out: dict[str, dict[int, Any]] = {}
        for executor in self.executors:
            out.setdefault(executor.spec.component, {}).update(executor.final_reports)
        return out

    def queue_depths(self) -> dict[str, tuple[int, int]]:
        """(depth, capacity) in slots of every inbox and of the transfer ring."""
        depths = {
            f"inbox:{e.name}": (e.inbox.buffer_size - e.inbox.remaining_capacity(), e.inbox.buffer_size)
            for e in self.executors
        }
        ring = self.transfer_ring
        depths["transfer"] = (ring.buffer_size - ring.remaining_capacity(), ring.buffer_size)
        return depths
