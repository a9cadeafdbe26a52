"""What spout and bolt executors share: their counters (`ExecutorCounters`), what they are
connected to (`ExecutorWiring`), and `Executor`, which builds an executor's tasks, collectors,
emit path and inbox reader from its spec and wiring, and is what the worker's features see of it
(`tuplemesh.core.feature.ExecutorView`). The loops themselves are in
`tuplemesh.worker.executor`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tuplemesh.buckets import SECONDS_BUCKETS, make_buckets
from tuplemesh.core.acking import ExecutorAcking
from tuplemesh.core.budget import ByteBudget
from tuplemesh.core.collectors import BoltOutputCollector, SpoutOutputCollector, StreamRoute, build_routes
from tuplemesh.core.congestion import CongestionMap
from tuplemesh.core.feature import BatchObserver, Feature, FlushObserver
from tuplemesh.core.held_back import HeldBack
from tuplemesh.core.outbox import Outbox
from tuplemesh.core.stats import ErrorSnapshot
from tuplemesh.core.target_load import TargetLoad
from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import AlertError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.serialization import Serializer
from tuplemesh.topology import Bolt, ExecutorSpec, Spout, TopologyContext, Tuple
from tuplemesh.topology.user_metrics import UserMetrics
from tuplemesh.worker.executor_features import ExecutorFeatures
from tuplemesh.worker.flush_timer import FlushTimer
from tuplemesh.worker.inbox_reader import InboxReader, InputTrees
from tuplemesh.worker.plan import WorkerPlan
from tuplemesh.worker.user_code import UserCode

__all__ = ["COUNTER_NAMES", "CollectorT", "Executor", "ExecutorCounters", "ExecutorWiring"]

log = logging.getLogger("tuplemesh.worker.executor")  # one logger for all of an executor's lines


#: The fields of ExecutorCounters, in ``as_dict`` order (a compiled class has no ``__slots__``).
COUNTER_NAMES = (
    "abandoned_on_halt",
    "acked",
    "deserialize_errors",
    "dropped_on_stop",
    "emitted",
    "errors",
    "executed",
    "failed",
    "received",
    "spout_errors",
    "timed_out",
)


class ExecutorCounters:
    """Plain integer counters, written by the executor thread only, read by anyone."""

    __slots__ = COUNTER_NAMES

    def __init__(self) -> None:
        self.emitted = 0  # emit calls
        self.executed = 0  # execute calls (a broadcast counts once per task)
        self.received = 0  # inbox entries consumed (balances the senders' deliveries)
        self.acked = 0  # bolts: ack calls; spouts: tuple trees completed (spout.ack called)
        self.failed = 0  # bolts: fail calls and errors; spouts: trees failed or timed out
        self.timed_out = 0  # spouts: trees failed by topology.message.timeout.secs
        self.errors = 0  # exceptions raised by bolt code (execute, prepare, cleanup, report)
        self.spout_errors = 0  # exceptions raised by spout code (open, next_tuple, ack, fail, close, report)
        self.deserialize_errors = 0
        self.dropped_on_stop = 0  # emitted tuples abandoned in the emit buffers: a destination halted
        # bolts: tuples taken from the inbox, or still in it, that a halt left unexecuted (lost)
        self.abandoned_on_halt = 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNTER_NAMES}


@dataclass(frozen=True)
class ExecutorWiring:
    """What an executor is connected to: the plan and the worker's rings (built by the Worker)."""

    plan: WorkerPlan
    #: local task -> the inbox ring of the executor running it
    local_inboxes: Mapping[int, RingBuffer[Any]]
    transfer_ring: RingBuffer[Any]
    new_serializer: Callable[[], Serializer]  # one serializer per thread
    congestion: CongestionMap | None  # per-task backpressure reports, None when it is off
    #: the worker's user metrics (``context.metrics``), exported with its own on /metrics
    user_metrics: UserMetrics = field(default_factory=UserMetrics)
    #: the worker's ceiling on serialized bytes queued for other workers
    transfer_budget: ByteBudget = field(default_factory=lambda: ByteBudget(0))
    #: the worker's features (tuplemesh.core.feature): each is offered every executor once
    features: tuple[Feature, ...] = ()
    #: the worker's flush timer: woken when a partial batch is left while it rests
    flush_timer: FlushTimer = field(default_factory=lambda: FlushTimer(0.001))
    #: the worker's tasks holding tuples back outside their inbox (what its features mark)
    held_back: HeldBack = field(default_factory=HeldBack)


#: the collector type of an executor's tasks (a spout's or a bolt's)
CollectorT = TypeVar("CollectorT", SpoutOutputCollector, BoltOutputCollector)


class Executor(Generic[CollectorT]):
    """State shared by spout and bolt executors. Started and stopped by its Worker."""

    #: its tasks' collectors (set by the subclass before this __init__ adds them)
    collectors: dict[int, CollectorT]

    def __init__(self, spec: ExecutorSpec, wiring: ExecutorWiring) -> None:
        plan = wiring.plan
        conf = plan.conf
        self.spec = spec
        self.conf = conf
        self.inbox: RingBuffer[Any] = wiring.local_inboxes[spec.tasks[0]]
        self.counters = ExecutorCounters()
        queues, settings = plan.queue_settings, plan.worker_settings
        self.flush_interval = queues.flush_interval_seconds
        self.flush_timer = wiring.flush_timer
        self.outbox = Outbox(
            local_inboxes=wiring.local_inboxes,
            remote_workers=plan.remote_worker_of_task,
            transfer_ring=wiring.transfer_ring,
            serializer=wiring.new_serializer(),
            batch_size=queues.producer_batch_tuples,
            send_capacity=queues.send_buffer_tuples,
            max_payload=queues.max_message_bytes,
            congestion=wiring.congestion,
            budget=wiring.transfer_budget,
        )
        component = plan.topology.components[spec.component]
        local_tasks = plan.local_tasks
        target_load = (
            TargetLoad(
                wiring.local_inboxes,
                wiring.congestion,
                queues.backpressure_watermark,
                queues.producer_batch_tuples,
                wiring.held_back,
            )
            if queues.load_aware
            else None
        )
        streams = plan.streams[spec.component]
        self.tasks: dict[int, Spout | Bolt] = {}
        self.contexts: dict[int, TopologyContext] = {}
        acking: ExecutorAcking | None = None
        for task in spec.tasks:
            self.tasks[task] = component.new_instance()
            routes = build_routes(streams, local_tasks, target_load)
            if acking is None:  # one per executor: its tasks share the Outbox and the acker mailbox
                acking = plan.acking(self.outbox, spec.component, task, routes, local_tasks)
            self._add_collector(task, routes, acking)
            self.contexts[task] = TopologyContext(
                plan.topology, plan.assignment, task, spec.component, plan.index, conf, wiring.user_metrics
            )
        assert acking is not None  # an executor runs at least one task
        self.acking = acking
        self.final_reports: dict[int, Any] = {}
        enabled = settings.metrics_enabled
        # per tuple: each batch's mean, weighted by the tuples it executed (one timer per batch)
        self.execute_seconds = make_buckets(SECONDS_BUCKETS, enabled)
        self.inbox_wait = make_buckets(SECONDS_BUCKETS, enabled)  # publish -> first execute, per batch
        self.flush_requested = False
        self.errors_log = RateLimitedLog(log, settings.log_interval_seconds)
        #: reads what crossed workers as bytes (its own deserializer: one per thread)
        self.reader = InboxReader(
            spec.name,
            wiring.new_serializer(),
            plan.stream_info,
            self.counters,
            self.errors_log,
            self._input_trees(),
        )
        #: how its components' own code is called: errors counted, the first one kept, logged
        self.user_code = UserCode(
            spec.component, plan.index, self._count_user_error, settings.log_interval_seconds
        )
        #: a feature's observer of each inbox batch taken to execute (`observe`); None while no
        #: feature observes (the one per-batch check)
        self.input_observer: BatchObserver | None = None
        self._loop_thread: threading.Thread | None = None
        #: what the worker's features add to this executor (asked once, here)
        self.features = ExecutorFeatures(self, wiring.features)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def component(self) -> str:
        return self.spec.component

    @property
    def task_ids(self) -> tuple[int, ...]:
        return tuple(self.spec.tasks)

    @property
    def is_bolt(self) -> bool:
        return False

    @property
    def executed(self) -> int:
        return self.counters.executed

    def deliver_to_tasks(self, tup: Tuple, what: str) -> None:
        """A bolt executor's (see BoltExecutor); a spout takes no feature input."""
        raise TypeError(f"executor {self.name}: a spout executor takes no {what}")

    def _add_collector(self, task: int, routes: dict[str, StreamRoute], acking: ExecutorAcking) -> None:
        raise NotImplementedError

    def _input_trees(self) -> InputTrees | None:
        """What its reader fails and expands tracked batches with (a bolt executor's: None)."""
        return None

    def observe(self, inputs: BatchObserver | None, emits: FlushObserver | None) -> None:
        """From now on, call ``inputs`` with each inbox batch this executor takes to execute (a
        bolt's) and ``emits`` with each emit buffer its outbox flushes; None: none. Any thread."""
        self.input_observer = inputs
        self.outbox.watch = emits

    def tuples_in(self, payload: bytes) -> int:
        """How many tuples an inbox payload carries, without decoding it."""
        return self.reader.tuples_in(payload)

    def peek(self, payload: bytes) -> list[Tuple]:
        """The tuples of a payload, for an observer (`InboxReader.peek`)."""
        return self.reader.peek(payload)

    def unpack(self, entry: Any) -> tuple[list[Tuple], int]:
        """The tuples an inbox entry other than a Tuple carries and the count it stands for
        (`InboxReader.unpack`)."""
        return self.reader.unpack(entry)

    def _final_flush(self) -> None:
        """Flush on the way out. Tuples that cannot go out any more (a destination halted, now or
        earlier in the run) are counted in ``dropped_on_stop``, not only logged."""
        try:
            self.outbox.flush()
        except AlertError:
            pass  # counted below: the refused batch is still in ``pending``
        dropped = self.outbox.discard()
        if dropped:
            self.counters.dropped_on_stop += dropped
            log.warning("executor %s: a destination halted; %d emitted tuples dropped", self.name, dropped)

    def _count_user_error(self) -> None:
        """One exception raised by this executor's user code (bolts and spouts counted apart)."""
        self.counters.errors += 1

    def _record_reports(self) -> None:
        self.final_reports = self.user_code.reports(self.tasks)

    @property
    def first_error(self) -> ErrorSnapshot | None:
        """The first exception its components' code raised (None: none yet). Any thread."""
        return self.user_code.first_error

    def join(self, timeout: float | None = None) -> bool:
        if self._loop_thread is None:
            return True
        self._loop_thread.join(timeout)
        return not self._loop_thread.is_alive()
