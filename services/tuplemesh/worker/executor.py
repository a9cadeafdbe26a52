"""Executors' loops: one thread running the tasks of one component, fed by its inbox ring.

A bolt executor is a BatchEventProcessor over its inbox: each event is a batch of
``(task, tuple or payload)``; payloads from other workers are deserialized here, on the executor
thread, so the receive thread stays cheap (a rows payload, from ``emit_many``, in one call for all
of its tuples). A bolt with ``execute_batch`` gets its task's part of each inbox batch in one call.
A spout executor loops over ``next_tuple`` and polls its inbox between calls. Both flush their
Outbox at the batch size or on the flush interval. What they share (construction, counters, the
view the features get) is `tuplemesh.worker.executor_base`; when a spout may emit is its
`SpoutSwitch`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from tuplemesh.core.acking import ExecutorAcking
from tuplemesh.core.collectors import BoltOutputCollector, SpoutOutputCollector, StreamRoute
from tuplemesh.core.feature import BatchRun, ControlledSpout
from tuplemesh.core.markers import FLUSH, STOP, Batch, Marker
from tuplemesh.core.tracker import SpoutTracker
from tuplemesh.disruptor import BatchEventProcessor, EventPoller
from tuplemesh.errors import AlertError
from tuplemesh.topology import BatchBolt, Bolt, ColumnarBolt, Columns, ExecutorSpec, Spout, Tuple
from tuplemesh.topology.components import entry_point
from tuplemesh.worker.bolt_input import BoltFailures, Halt, abandoned_in
from tuplemesh.worker.debloat import QueueTimeLimit
from tuplemesh.worker.executor_base import Executor, ExecutorWiring
from tuplemesh.worker.flush_timer import LONGEST_REST
from tuplemesh.worker.inbox_reader import InputTrees
from tuplemesh.worker.input_chain import input_chain
from tuplemesh.worker.spout_outcomes import SpoutOutcomes
from tuplemesh.worker.spout_switch import SpoutSwitch

__all__ = ["BoltExecutor", "SpoutExecutor"]

log = logging.getLogger(__name__)


class BoltExecutor(Executor[BoltOutputCollector]):
    """Runs bolt tasks on a BatchEventProcessor over the inbox."""

    def __init__(self, spec: ExecutorSpec, wiring: ExecutorWiring) -> None:
        self.collectors = {}
        #: set by ``halt`` (any thread); the runs stop at the next tuple
        self.halting = Halt()
        super().__init__(spec, wiring)
        self.bolts: dict[int, Bolt] = {task: cast(Bolt, bolt) for task, bolt in self.tasks.items()}
        #: each task's entry point (``process``, ``execute_batch`` or ``execute``), chosen once
        self._entry = {task: entry_point(bolt) for task, bolt in self.bolts.items()}
        entry = self._entry[spec.tasks[0]]  # a component's tasks are of one class
        self.processor = BatchEventProcessor(self.inbox, self.inbox.new_barrier(), self, release_slots=True)
        self.inbox.add_gating_sequences(self.processor.sequence)
        # what waits in the inbox is bounded in time: this executor's measured time per batch
        # sets how many slots its producers may fill (None: all of them)
        target = wiring.plan.queue_settings.queue_target_seconds
        self.queue_limit: QueueTimeLimit | None = (
            QueueTimeLimit(self.inbox.sequencer, target) if target > 0 else None
        )
        #: the worker's tasks setting tuples aside, and this executor's: a batch taken while one
        #: of its tasks sets tuples aside (aligning barriers) does not measure its pace. Setting
        #: aside is nearly free, so those batches would raise the limit to the whole ring, and
        #: the batch that runs what was set aside would drop it to the least.
        self._held_back = wiring.held_back
        self._own_tasks = spec.tasks
        failures = BoltFailures(spec.component, self.collectors, self.user_code.record_error, self.errors_log)
        chain = input_chain(
            spec.name,
            entry,
            self.bolts,
            self.collectors,
            self.acking,
            self.features.hooks,
            wiring.plan.queue_settings.producer_batch_tuples,  # the most tuples per batch call
            (self.reader, self.counters, self.halting, failures),
        )
        #: what runs an inbox batch's tuples, and the whole handling of a batch around it
        self._run_batch: BatchRun = chain.run
        self._take_batch: BatchRun = chain.take
        self._markers: Mapping[Marker, Callable[[], None]] = chain.markers

    def _add_collector(self, task: int, routes: dict[str, StreamRoute], acking: ExecutorAcking) -> None:
        self.collectors[task] = acking.bolt_collector(task, routes, self.counters)

    def _input_trees(self) -> InputTrees | None:
        return next(iter(self.collectors.values()))  # the executor's tasks share their trees

    def start(self) -> None:
        self._loop_thread = self.processor.start(name=f"executor-{self.name}")
        self.features.start()

    def request_stop(self) -> None:
        """Finish everything already in the inbox, flush, clean up, exit."""
        try:
            self.inbox.put(STOP)
        except AlertError:
            pass  # already halted: nothing left to finish

    def halt(self) -> None:
        """Stop now: after the tuple in hand (not the rest of its batch: a slow bolt would run
        past the shutdown timeout), abandoning whatever is still in the inbox; both are counted
        in ``abandoned_on_halt``."""
        self.halting.on = True
        self.features.stop()
        self.processor.halt()

    # -- EventHandler ---------------------------------------------------------------------------
    def on_start(self) -> None:
        for task, bolt in self.bolts.items():
            self.user_code.call(
                "prepare", task, bolt.prepare, self.conf, self.contexts[task], self.collectors[task]
            )

    def on_shutdown(self) -> None:
        self.features.stop()
        if self.halting.on:
            self._count_left_in_inbox()
        self.features.exit()
        self._final_flush()
        self._record_reports()
        for task, bolt in self.bolts.items():
            self.user_code.call("cleanup", task, bolt.cleanup)

    def on_event(self, batch: Any, sequence: int, end_of_batch: bool) -> None:
        kind = batch.__class__
        if kind is Batch or kind is list:
            start = time.monotonic()
            held_back = self._held_back  # empty but for alignments: one check of a dict
            paced = not (held_back.since and held_back.holding_any(self._own_tasks, start))
            if kind is Batch:  # a plain list (injected input) was never published with a stamp
                stamp = batch.stamp
                if stamp is not None:
                    self.inbox_wait.observe(start - stamp)
            observer = self.input_observer
            if observer is not None:
                observer(batch, start)
            executed_before = self.counters.executed
            self._take_batch(batch)
            executed = self.counters.executed - executed_before
            end = time.monotonic()
            if executed:
                self.execute_seconds.observe((end - start) / executed, executed)
            if self.queue_limit is not None and paced:
                self.queue_limit.observe(end - start)
            if end_of_batch and self.outbox.pending:
                if time.monotonic() - self.outbox.last_flush >= self.flush_interval:
                    self.outbox.flush()
                elif self.flush_timer.resting:
                    self.flush_timer.wake()  # the partial batch is flushed within the interval
        elif batch is FLUSH:
            self.flush_requested = False
            self.outbox.flush()
        elif batch is STOP:
            self.processor.halt()
        else:
            handler = self._markers.get(batch) if isinstance(batch, Marker) else None
            if handler is not None:  # a feature's marker (e.g. a tick): its work, on this thread
                handler()
            else:
                log.error("executor %s: unexpected inbox event %r", self.name, batch)

    @property
    def is_bolt(self) -> bool:
        return True

    def deliver_to_tasks(self, tup: Tuple, what: str) -> None:
        """Hand every task ``tup`` straight to the bolt (no acking wrapper, no alignment, not
        counted as received or executed: a feature's control input such as a tick, not data)."""
        for task, bolt in self.bolts.items():
            # the bolt's own methods: ``tup`` is neither acked (BasicBolt) nor failed on an error
            method = self._entry[task]
            try:
                if method == "process":
                    cast(ColumnarBolt, bolt).process(Columns.from_tuples([tup]))
                elif method == "execute_batch":
                    cast(BatchBolt, bolt).execute_batch([tup])
                else:
                    bolt.execute(tup)
            except AlertError:
                raise
            except Exception as exc:
                self.user_code.record_error(method, task, exc)
                self.errors_log.log("bolt %s task %s raised %r on %s", self.spec.component, task, exc, what)
        if self.outbox.pending and time.monotonic() - self.outbox.last_flush >= self.flush_interval:
            self.outbox.flush()

    def _count_left_in_inbox(self) -> None:
        """After a halt: count the tuples of the batches still published in the inbox."""
        low = self.processor.sequence.value + 1
        high = self.inbox.sequencer.highest_published(low, self.inbox.cursor)
        for sequence in range(low, high + 1):
            entry = self.inbox.get(sequence)
            if entry.__class__ is Batch or entry.__class__ is list:
                self.counters.abandoned_on_halt += abandoned_in(self.reader, entry, 0)


class SpoutExecutor(Executor[SpoutOutputCollector]):
    """Runs spout tasks in a loop: poll the inbox, call next_tuple, flush on size or time.

    With acking on, the inbox also brings the ackers' verdicts on the trees this executor's tasks
    started; the spout's ``ack`` or ``fail`` is called for each, and trees past their timeout are
    failed here. A finite spout is finished only once no tree of it is open.
    """

    def __init__(self, spec: ExecutorSpec, wiring: ExecutorWiring) -> None:
        acking = wiring.plan.acking_settings
        self.tracker = SpoutTracker(acking.message_timeout_seconds, acking.max_spout_pending)
        self.collectors = {}
        super().__init__(spec, wiring)
        self.poller = EventPoller(self.inbox, release_slots=True)
        self.inbox.add_gating_sequences(self.poller.sequence)
        self.spout_wait = wiring.plan.worker_settings.spout_wait_seconds
        self.finished = threading.Event()  # every task's is_finished(), no open tree, emits flushed
        self._running = False
        #: whether next_tuple may be called: held until the worker's epoch is confirmed,
        #: deactivated by a drain (the worker throws it; the loop reads it every turn)
        self.switch = SpoutSwitch()
        self._started = threading.Event()
        self._spouts: dict[int, Spout] = {task: cast(Spout, spout) for task, spout in self.tasks.items()}
        #: the spouts that take the system's messages (a checkpointed topology's), by task
        self._controlled: dict[int, Callable[[Tuple], bool]] = {
            task: spout.on_system_message
            for task, spout in self._spouts.items()
            if isinstance(spout, ControlledSpout)
        }
        #: the spouts' ack and fail: verdicts, trees completed at once, trees timed out
        self.outcomes = SpoutOutcomes(self.tracker, self._spouts, self.counters, self.user_code)
        #: the last inbox sequence `_controlled_message_waiting` looked at
        self._looked_upto = -1
        if self._controlled:
            # A spout held on a congested task reads its inbox only once the hold ends: a
            # checkpoint's trigger waited up to the hold (0.2 s a congestion lease), its barriers
            # that much behind the other spouts', and every aligning task held that much more.
            self.outbox.interrupt = self._controlled_message_waiting

    def _count_user_error(self) -> None:
        self.counters.spout_errors += 1

    def _add_collector(self, task: int, routes: dict[str, StreamRoute], acking: ExecutorAcking) -> None:
        self.collectors[task] = acking.spout_collector(task, routes, self.counters, self.tracker)

    def start(self) -> None:
        self._running = True
        self.switch.looping(True)
        self._loop_thread = threading.Thread(target=self._loop, name=f"executor-{self.name}", daemon=True)
        try:
            self._loop_thread.start()
        except BaseException:
            self.switch.looping(False)  # no loop runs
            raise
        self._started.wait()
        self.features.start()

    def pending(self) -> int:
        """Accepted input the spouts still have to emit (read from any thread: a snapshot)."""
        return sum(spout.pending() for spout in self._spouts.values())

    @property
    def open_trees(self) -> int:
        """Tuple trees started here and not yet acked, failed or timed out (a snapshot)."""
        return len(self.tracker)

    def request_stop(self) -> None:
        self.switch.deactivate()
        self._running = False

    def halt(self) -> None:
        """Stop after the current loop iteration (a spout has nothing to abandon: as request_stop)."""
        self.request_stop()

    def _on_control(self, event: Any, sequence: int, end_of_batch: bool) -> None:
        kind = event.__class__
        if kind is Batch or kind is list:
            self.counters.received += len(event)
            for task, item in event:
                if item.__class__ is bytes:
                    item = self.reader.decode(item)
                    if item is None:
                        continue
                elif item is None:  # undecodable, found so while a hold looked for messages
                    continue
                try:
                    verdict = self.acking.verdict(item)
                    if verdict is None:
                        self._to_controlled_spout(task, item)
                        continue
                    acked, failed = verdict
                except (ValueError, TypeError) as exc:  # not a well-formed verdict: logged, ignored
                    self.errors_log.log("spout executor %s: ignored %r: %s", self.name, item, exc)
                    continue
                self.outcomes.on_verdict(acked, failed)
        elif event is STOP:
            self.request_stop()
        elif event is FLUSH:
            self.flush_requested = False
            self.outbox.flush()
        else:
            log.error("executor %s: unexpected inbox event %r", self.name, event)

    def _controlled_message_waiting(self) -> bool:
        """Whether a message for a controlled spout (a checkpoint's trigger, a rollback) waits
        unread in the inbox: a hold of this executor's emits ends then, one tuple goes to the
        task it waited on, and the loop reads the message as soon as ``next_tuple`` returns.
        Payloads from other workers are decoded here, in place (the poll would anyway)."""
        sequencer = self.inbox.sequencer
        low = max(self.poller.sequence.value, self._looked_upto) + 1
        cursor = sequencer.cursor.value
        if cursor < low:
            return False
        high = sequencer.highest_published(low, cursor)
        for sequence in range(low, high + 1):
            event = self.inbox.get(sequence)
            if event.__class__ is not Batch and event.__class__ is not list:
                continue  # a stop or a flush: read by the next poll
            for index, (task, item) in enumerate(event):
                if item.__class__ is bytes:
                    item = self.reader.decode(item)  # None: undecodable, counted once, skipped
                    event[index] = (task, item)
                if item is None:
                    continue
                try:
                    verdict = self.acking.verdict(item)
                except (ValueError, TypeError):  # not a well-formed verdict: the poll logs it
                    continue
                if verdict is None:
                    return True
            self._looked_upto = sequence
        return False

    def _to_controlled_spout(self, task: int | None, tup: Tuple) -> None:
        """A message for a spout task other than a verdict (a checkpoint coordinator's)."""
        handler = None if task is None else self._controlled.get(task)
        if handler is None:
            self.errors_log.log("spout executor %s: ignored unexpected tuple %r", self.name, tup)
        elif handler(tup):
            self.finished.clear()  # rewound: it has tuples to emit again

    def _loop(self) -> None:
        """The thread: the loop, and its end told to the switch however it ends (a feature's
        hook or a flush raising on the way out included: a drain must not wait for it)."""
        try:
            self._run_loop()
        finally:
            self.switch.looping(False)

    def _run_loop(self) -> None:
        spouts = list(self._spouts.items())
        for task, spout in spouts:
            self.user_code.call(
                "open", task, spout.open, self.conf, self.contexts[task], self.collectors[task]
            )
        self._started.set()
        outbox = self.outbox
        counters = self.counters
        tracker = self.tracker
        outcomes = self.outcomes
        may_emit = tracker.may_emit
        poll = self.poller.poll
        monotonic = time.monotonic
        sleep = time.sleep
        next_tuples = [(task, spout.next_tuple) for task, spout in spouts]
        switch = self.switch
        rest = 0.0  # the current sleep of a finished, idle loop
        try:
            while self._running:
                poll(self._on_control)
                if tracker.acked_at_once or len(tracker):
                    outcomes.settle(monotonic())
                active = switch.active
                if switch.held and active:
                    callers = []  # the worker's epoch is not confirmed yet: emit nothing
                elif active and not self.finished.is_set():
                    callers = [c for c in next_tuples if may_emit(c[0])] if len(tracker) else next_tuples
                else:  # deactivated: only spouts still holding accepted input keep emitting
                    switch.seen_inactive()
                    callers = [(t, fn) for t, fn in next_tuples if self._spouts[t].pending()]
                if callers:
                    before = counters.emitted
                    for task, next_tuple in callers:
                        try:
                            next_tuple()
                        except AlertError:
                            raise
                        except Exception as exc:
                            self.user_code.record_error("next_tuple", task, exc)
                            self.errors_log.log(
                                "spout %s task %d next_tuple raised %r", self.spec.component, task, exc
                            )
                    if counters.emitted != before:
                        if outbox.pending and monotonic() - outbox.last_flush >= self.flush_interval:
                            outbox.flush()
                        continue
                if (
                    switch.active
                    and not switch.held
                    and not self.finished.is_set()
                    and not len(tracker)
                    and not tracker.acked_at_once
                    and all(spout.is_finished() for _, spout in spouts)
                ):
                    outbox.flush()
                    self.finished.set()
                    continue
                if outbox.pending:
                    outbox.flush()
                if not callers and self.finished.is_set() and not len(tracker):
                    # every spout finished, none holds input and nothing is in flight: only a
                    # control message (a stop, a rewind, a checkpoint's trigger) can come, so the
                    # loop rests on its inbox instead of waking 1,000 times a second; a message
                    # wakes it at once (a resting spout that slept held each trigger up to the
                    # rest, and a checkpoint interval below it kept a mesh from ever going idle)
                    rest = min(max(rest * 2, self.spout_wait, 0.001), LONGEST_REST)
                    self.poller.rest(rest)
                    continue
                rest = 0.0
                sleep(self.spout_wait)
        except AlertError:
            log.warning("spout executor %s: a destination was halted; stopping", self.name)
        finally:
            self.features.stop()
            self.features.exit()
            self._final_flush()
            self._record_reports()
            for task, spout in spouts:
                self.user_code.call("close", task, spout.close)
