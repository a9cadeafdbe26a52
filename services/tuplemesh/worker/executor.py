"""Executors: one thread running the tasks of one component, fed by its inbox ring.

A bolt executor is a BatchEventProcessor over its inbox: each event is a batch of
``(task, tuple or payload)``; payloads from other workers are deserialized here, on the executor
thread, so the receive thread stays cheap. A spout executor loops over ``next_tuple`` and polls
its inbox between calls. Both flush their Outbox at the batch size or on the flush interval.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, cast

from tuplemesh.disruptor import BatchEventProcessor, EventPoller, RingBuffer
from tuplemesh.errors import AlertError, SerializationError
from tuplemesh.logutil import RateLimitedLog
from tuplemesh.metrics.buckets import SECONDS_BUCKETS, make_buckets
from tuplemesh.topology import Bolt, ExecutorSpec, Spout, TopologyContext, Tuple
from tuplemesh.worker.collectors import OutputCollector, build_routes
from tuplemesh.worker.markers import FLUSH, STOP, Batch
from tuplemesh.worker.outbox import Outbox

if TYPE_CHECKING:
    from tuplemesh.worker.worker import Worker

__all__ = ["BoltExecutor", "Executor", "ExecutorCounters", "SpoutExecutor"]

log = logging.getLogger(__name__)


class ExecutorCounters:
    """Plain integer counters, written by the executor thread only, read by anyone."""

    __slots__ = ("acked", "deserialize_errors", "emitted", "errors", "executed", "failed", "received")

    def __init__(self) -> None:
        self.emitted = 0  # emit calls
        self.executed = 0  # execute calls (a broadcast counts once per task)
        self.received = 0  # inbox entries consumed (balances the senders' deliveries)
        self.acked = 0
        self.failed = 0
        self.errors = 0  # exceptions raised by user code
        self.deserialize_errors = 0

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in self.__slots__}


class Executor:
    """State shared by spout and bolt executors. Started and stopped by its Worker."""

    def __init__(self, spec: ExecutorSpec, worker: Worker) -> None:
        self.spec = spec
        self.worker = worker
        self.inbox: RingBuffer[Any] = worker.inboxes[spec.index]
        self.counters = ExecutorCounters()
        conf = worker.conf
        self.flush_interval = conf["topology.batch.flush.interval.millis"] / 1000.0
        self.outbox = Outbox(
            local_inboxes=worker.local_inbox_of_task,
            remote_workers=worker.remote_worker_of_task,
            transfer_ring=worker.transfer_ring,
            serializer=worker.new_serializer(),
            batch_size=conf["topology.producer.batch.size"],
            send_capacity=conf["topology.executor.send.buffer.size"],
            max_payload=conf["messaging.max.message.bytes"],
        )
        component = worker.topology.components[spec.component]
        local_tasks = frozenset(worker.local_inbox_of_task)
        self.tasks: dict[int, Spout | Bolt] = {}
        self.collectors: dict[int, OutputCollector] = {}
        self.contexts: dict[int, TopologyContext] = {}
        for task in spec.tasks:
            self.tasks[task] = component.new_instance()
            routes = build_routes(
                worker.topology,
                spec.component,
                worker.assignment.component_tasks,
                local_tasks,
                worker.stream_ids,
            )
            self.collectors[task] = OutputCollector(task, spec.component, routes, self.outbox, self.counters)
            self.contexts[task] = TopologyContext(
                worker.topology, worker.assignment, task, spec.component, worker.index, conf
            )
        self.final_reports: dict[int, Any] = {}
        enabled = conf["metrics.enabled"]
        self.execute_seconds = make_buckets(SECONDS_BUCKETS, enabled)  # per-tuple mean of each batch
        self.inbox_wait = make_buckets(SECONDS_BUCKETS, enabled)  # publish -> first execute, per batch
        self.flush_requested = False
        self.errors_log = RateLimitedLog(log, conf["tuplemesh.log.rate.limit.secs"])
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    def _user_call(self, what: str, task: int, fn: Any, *args: Any) -> bool:
        try:
            fn(*args)
            return True
        except Exception as exc:
            self.counters.errors += 1
            log.error("%s %s task %d failed: %r", what, self.spec.component, task, exc, exc_info=exc)
            return False

    def _record_reports(self) -> None:
        for task, component in self.tasks.items():
            try:
                self.final_reports[task] = component.report()
            except Exception as exc:
                self.counters.errors += 1
                log.error("report() of %s task %d failed: %r", self.spec.component, task, exc)

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()


class BoltExecutor(Executor):
    """Runs bolt tasks on a BatchEventProcessor over the inbox."""

    def __init__(self, spec: ExecutorSpec, worker: Worker) -> None:
        super().__init__(spec, worker)
        self.bolts: dict[int, Bolt] = {task: cast(Bolt, bolt) for task, bolt in self.tasks.items()}
        self._execute = {task: bolt.execute for task, bolt in self.bolts.items()}
        self._stream_info = worker.stream_info
        self._deserialize = worker.new_serializer().deserialize
        self._debug = bool(worker.conf["topology.debug"])
        self.processor = BatchEventProcessor(self.inbox, self.inbox.new_barrier(), self, release_slots=True)
        self.inbox.add_gating_sequences(self.processor.sequence)

    def start(self) -> None:
        self._thread = self.processor.start(name=f"executor-{self.name}")

    def request_stop(self) -> None:
        """Finish everything already in the inbox, flush, clean up, exit."""
        try:
            self.inbox.put(STOP)
        except AlertError:
            pass  # already halted: nothing left to finish

    def halt(self) -> None:
        """Stop now, abandoning whatever is still in the inbox."""
        self.processor.halt()

    # -- EventHandler ---------------------------------------------------------------------------
    def on_start(self) -> None:
        for task, bolt in self.bolts.items():
            self._user_call(
                "prepare", task, bolt.prepare, self.worker.conf, self.contexts[task], self.collectors[task]
            )

    def on_shutdown(self) -> None:
        try:
            self.outbox.flush()
        except AlertError:
            log.warning("executor %s: destination halted during final flush", self.name)
        self._record_reports()
        for task, bolt in self.bolts.items():
            self._user_call("cleanup", task, bolt.cleanup)

    def on_event(self, batch: Any, sequence: int, end_of_batch: bool) -> None:
        kind = batch.__class__
        if kind is Batch or kind is list:
            start = time.monotonic()
            stamp = getattr(batch, "stamp", None)
            if stamp is not None:
                self.inbox_wait.observe(start - stamp)
            self._execute_batch(batch)
            if batch:
                self.execute_seconds.observe((time.monotonic() - start) / len(batch))
            if (
                end_of_batch
                and self.outbox.pending
                and time.monotonic() - self.outbox.last_flush >= self.flush_interval
            ):
                self.outbox.flush()
        elif batch is FLUSH:
            self.flush_requested = False
            self.outbox.flush()
        elif batch is STOP:
            self.processor.halt()
        else:
            log.error("executor %s: unexpected inbox event %r", self.name, batch)

    def _execute_batch(self, batch: list[tuple[int | None, Any]]) -> None:
        execute = self._execute
        counters = self.counters
        executed = 0
        for task, item in batch:
            if item.__class__ is bytes:
                item = self._decode(item)
                if item is None:
                    continue
            if task is None:  # no task: broadcast to every task of this executor
                for fn in execute.values():
                    executed += 1
                    self._run(fn, item)
                continue
            executed += 1
            try:
                execute[task](item)
            except Exception as exc:
                self._bolt_error(task, item, exc)
        counters.executed += executed
        counters.received += len(batch)

    def _run(self, fn: Any, item: Tuple) -> None:
        try:
            fn(item)
        except Exception as exc:
            self._bolt_error(-1, item, exc)

    def _bolt_error(self, task: int | None, item: Any, exc: Exception) -> None:
        counters = self.counters
        counters.errors += 1
        counters.failed += 1
        self.errors_log.log(
            "bolt %s task %s raised %r on %r; tuple failed", self.spec.component, task, exc, item
        )

    def _decode(self, payload: bytes) -> Tuple | None:
        try:
            source_task, stream_id, values = self._deserialize(payload)
            component, stream, fields = self._stream_info[stream_id]
        except (SerializationError, KeyError, ValueError, TypeError) as exc:
            self.counters.deserialize_errors += 1
            self.counters.failed += 1
            self.errors_log.log("executor %s: undecodable %d-byte payload: %s", self.name, len(payload), exc)
            return None
        return Tuple(values, source_task, component, stream, fields)


class SpoutExecutor(Executor):
    """Runs spout tasks in a loop: poll the inbox, call next_tuple, flush on size or time."""

    def __init__(self, spec: ExecutorSpec, worker: Worker) -> None:
        super().__init__(spec, worker)
        self.poller = EventPoller(self.inbox, release_slots=True)
        self.inbox.add_gating_sequences(self.poller.sequence)
        self.spout_wait = worker.conf["topology.sleep.spout.wait.strategy.time.ms"] / 1000.0
        self.finished = threading.Event()  # every task's is_finished() and all emits flushed
        self._running = False
        self._active = True
        self._started = threading.Event()

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run_loop, name=f"executor-{self.name}", daemon=True)
        self._thread.start()
        self._started.wait()

    def deactivate(self) -> None:
        """Stop calling next_tuple, except on spouts whose ``pending()`` input must go out. Any thread."""
        self._active = False

    def pending(self) -> int:
        """Accepted input the spouts still have to emit (read from any thread: a snapshot)."""
        return sum(cast(Spout, s).pending() for s in self.tasks.values())

    def request_stop(self) -> None:
        self._active = False
        self._running = False

    halt = request_stop

    def _on_control(self, event: Any, sequence: int, end_of_batch: bool) -> None:
        if event is STOP:
            self.request_stop()
        elif event is FLUSH:
            self.flush_requested = False
            self.outbox.flush()
        # acks and failures arrive here once guaranteed processing exists

    def _run_loop(self) -> None:
        spouts = [(task, cast(Spout, spout)) for task, spout in self.tasks.items()]
        for task, spout in spouts:
            self._user_call(
                "open", task, spout.open, self.worker.conf, self.contexts[task], self.collectors[task]
            )
        self._started.set()
        outbox = self.outbox
        counters = self.counters
        poll = self.poller.poll
        monotonic = time.monotonic
        sleep = time.sleep
        next_tuples = [(task, spout.next_tuple) for task, spout in spouts]
        spouts_by_task = dict(spouts)
        try:
            while self._running:
                poll(self._on_control)
                if self._active and not self.finished.is_set():
                    callers = next_tuples
                else:  # deactivated: only spouts still holding accepted input keep emitting
                    callers = [
                        (t, spouts_by_task[t].next_tuple)
                        for t, _ in next_tuples
                        if spouts_by_task[t].pending()
                    ]
                if callers:
                    before = counters.emitted
                    for task, next_tuple in callers:
                        try:
                            next_tuple()
                        except AlertError:
                            raise
                        except Exception as exc:
                            counters.errors += 1
                            self.errors_log.log(
                                "spout %s task %d next_tuple raised %r", self.spec.component, task, exc
                            )
                    if counters.emitted != before:
                        if outbox.pending and monotonic() - outbox.last_flush >= self.flush_interval:
                            outbox.flush()
                        continue
                    if self._active and all(spout.is_finished() for _, spout in spouts):
                        outbox.flush()
                        self.finished.set()
                        continue
                if outbox.pending:
                    outbox.flush()
                sleep(self.spout_wait)
        except AlertError:
            log.warning("spout executor %s: a destination was halted; stopping", self.name)
        finally:
            try:
                outbox.flush()
            except AlertError:
                pass
            self._record_reports()
            for task, spout in spouts:
                self._user_call("close", task, spout.close)
