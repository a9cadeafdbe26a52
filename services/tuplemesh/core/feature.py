"""The feature interface: how something that is not the executor loop plugs into a worker.

A *feature* (ticks, tracing, ...) is built once per worker process by the worker's composition
root, from the factory its `tuplemesh.core.feature_spec.FeatureSpec` names (``build``; the
registry, ``tuplemesh.registry.FEATURES``, names the spec). The worker imports no feature:
it knows only the types here. A feature may

(a) wrap an executor's input: for each bolt executor it is attached to, it may return
    `ExecutorHooks` that wrap the per-tuple call (``execute``), the per-batch call
    (``execute_batch``) and the columnar call (``process``) of each task. The wrapper sees the
    task, the tuple or batch (its source component and stream, hence the grouping's key: see
    `fields_keys`) and may time the call. The executor
    applies wrappers once, when it is built: an executor no feature wraps runs exactly the loop it
    would run without features (no per-tuple or per-batch check);
(b) own background threads: ``start`` runs as the worker starts, before its executors do, and
    ``stop`` once they stopped; per executor,
    ``ExecutorHooks.on_start``/``on_stop`` run as that executor starts and stops, and
    ``ExecutorHooks.markers`` are handlers the executor thread runs when the feature's marker comes
    out of its inbox (a timer puts a marker in, the executor thread does the work);
(c) contribute a snapshot section (``section``: plain JSON-able data) and Prometheus metrics
    (``metrics``: `FeatureMetric` families, the worker label added by the exporter; labels must
    be bounded: no user values);
(d) answer Admin through a narrow interface that Admin looks for among the features, never by
    name: `WatchingFeature` (Admin.WatchTuples' sampling), `RestoringFeature` (tasks whose state
    is not restored yet, whose live reports Admin withholds);
(e) wrap an executor's handling of each whole inbox batch (``ExecutorHooks.wrap_batch``: e.g. a
    tracing span per batch, or checkpoints' barrier alignment, which holds back, drops or acts
    on entries itself: it counts them in ``ExecutorView.counters``, decodes them with
    ``ExecutorView.unpack`` and fails a dropped tree through ``ExecutorView.collectors``), fill
    fields of the executor's snapshot (``ExecutorHooks.snapshot_fields``: its alignment counts)
    and release what only the executor thread used as its loop ends (``ExecutorHooks.on_exit``),
    and set its outbox's hooks (``ExecutorView.outbox``: e.g. the tracer of its emit spans), all
    chosen once, when it is built;
(f) observe, switched on and off at run time, what an executor takes to execute and what it
    emits (``ExecutorView.observe``: e.g. Admin.WatchTuples' sampling, which a client starts and
    ends at any time, so it cannot wrap at construction). While nothing observes, the executor
    makes one ``is None`` check per inbox batch and per emit-buffer flush, never per tuple. The
    observer runs on the executor thread, so it must not block (copy out, drop when full), and
    decodes a payload from another worker only if it needs the values (``ExecutorView.peek``);
(g) serve gRPC calls on the worker process's one server (``serve``: e.g. the Gateway service),
    or add calls to its Admin service (``FeatureServer.admin_calls``, see
    `tuplemesh.core.admin_calls`), release what waits on callers from outside as the worker
    begins to stop (``stopping``: e.g. an export log waiting for a reader), and fill fields of
    the worker's snapshot that predate features (``snapshot_fields``): a feature with nothing
    to do there does nothing;
(h) hand the tasks of its own component types what they need from it (``ExecutorView.tasks``:
    e.g. the Gateway's registry to its IngestSpout and ExportBolt tasks), when attached, before
    they open or prepare: no process-global lookup, so two runs in one process share nothing;
(i) take part in the worker's drain (`DrainingFeature`, looked up on the features the registry
    built: only a feature with a part in it implements it, e.g. checkpointing): when the worker
    begins to drain (its spouts stop emitting) it stops what would keep an idle mesh from reading
    idle (a checkpoint clock's ticks), and hands back what a whole-mesh stop must wait for once
    the mesh is idle, before the executors stop (`DrainWait`: a final checkpoint's commit). A
    narrow protocol of its own rather than a method every feature implements: the drain is the
    one place that asks, and the other features have no part in it. Feeding tuples that count
    as the worker's own (a clock's ticks) goes through ``FeatureContext.inject``;
(j) trace the worker's hops outside its executors (`HopTracingFeature`: OpenTelemetry's
    transfer and receive spans), asked once as the worker builds its transfer and receive paths.

Everything here is read-only for the data path: the hooks are plain callables chosen once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from tuplemesh.core.admin_calls import AdminCalls
from tuplemesh.core.held_back import HeldBack
from tuplemesh.core.markers import Marker
from tuplemesh.core.outbox import Outbox
from tuplemesh.disruptor import RingBuffer
from tuplemesh.topology import Bolt, Columns, Spout, Topology, Tuple
from tuplemesh.topology.assignment import Assignment
from tuplemesh.topology.groupings import FieldsGrouping

if TYPE_CHECKING:
    import grpc

__all__ = [
    "BatchObserver",
    "BatchRun",
    "ControlledSpout",
    "DrainWait",
    "DrainingFeature",
    "ExecuteBatchFn",
    "ExecuteFn",
    "ExecutorCounts",
    "ExecutorHooks",
    "ExecutorView",
    "Feature",
    "FeatureContext",
    "FeatureFactory",
    "FeatureMetric",
    "FeatureServer",
    "FlushObserver",
    "HopTracer",
    "HopTracingFeature",
    "ProcessFn",
    "RestoringFeature",
    "TupleWatch",
    "WatchingFeature",
    "fields_keys",
]

#: A task's per-tuple call (``Bolt.execute`` behind its acking wrapper).
ExecuteFn = Callable[[Tuple], None]
#: A task's per-batch call (``execute_batch`` behind its acking wrapper).
ExecuteBatchFn = Callable[[list[Tuple]], None]
#: A task's columnar call (``process`` behind its acking wrapper).
ProcessFn = Callable[[Columns], None]
#: Sees an inbox batch an executor is about to execute, and when it took it (``time.monotonic``):
#: ``(task, entry)`` pairs, an entry a Tuple, a list of Tuples or a payload from another worker
#: (bytes: see ``ExecutorView.peek``); task None is every task of the executor.
BatchObserver = Callable[[Sequence[tuple[int | None, Any]], float], None]
#: A bolt executor's handling of one inbox batch, or of the part of it a wrapper lets through
#: (``ExecutorHooks.wrap_batch``).
BatchRun = Callable[[list[tuple[int | None, Any]]], None]
#: Sees an emit buffer as the executor's outbox flushes it: ``(destination task, tuple or payload)``.
FlushObserver = Callable[[list[tuple[int, Any]]], None]


@dataclass(frozen=True)
class FeatureContext:
    """What a feature is built from: the worker's topology (with its system components), its
    configuration, which worker of the mesh this is and its assignment, and how to deliver a
    tuple to one of its tasks."""

    topology: Topology
    conf: Mapping[str, Any]
    worker: int
    topology_id: str
    #: the worker's assignment at its epoch (which worker runs which task), as its plan has it;
    #: None: built without a worker plan (a test building one feature by hand)
    assignment: Assignment | None = None
    #: (local task, tuple): deliver the tuple to the task's inbox from outside the data path,
    #: counted with the worker's injected tuples (as Admin.Emit's), so the mesh's delivered and
    #: consumed counts still agree; blocks while the inbox is full, raises AlertError once the
    #: task's executor stopped. None: built without a worker (a test wiring executors by hand).
    inject: Callable[[int, Tuple], None] | None = None
    #: the worker's tasks holding tuples back outside their inbox; a feature that sets tuples
    #: aside (barrier alignment) marks its tasks here while it does, so emitters in this worker
    #: do not take them for idle
    held_back: HeldBack = field(default_factory=HeldBack)


class ExecutorCounts(Protocol):
    """The counts of an executor a feature may add to (see ``ExecutorView.counters``)."""

    received: int  # inbox entries consumed (balances the senders' deliveries)
    errors: int  # exceptions raised by bolt code


class ExecutorView(Protocol):
    """What a feature sees of one executor when it is attached (before the executor starts)."""

    @property
    def component(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def task_ids(self) -> tuple[int, ...]: ...

    @property
    def is_bolt(self) -> bool: ...

    @property
    def inbox(self) -> RingBuffer[Any]: ...

    @property
    def tasks(self) -> Mapping[int, Spout | Bolt]:
        """Its tasks' components (task id -> the task's own spout or bolt instance; a spout of a
        checkpointed topology inside its ``CheckpointedSpout``), not yet opened or prepared: a
        feature may keep those of its own types to read their counts, or hand them what they
        need before they open or prepare."""
        ...

    @property
    def outbox(self) -> Outbox:
        """Its emit path; a feature may set its hooks when attached (``tracer`` and
        ``trace_attributes``: the emit spans), before the executor starts."""
        ...

    @property
    def executed(self) -> int:
        """Execute calls made so far (a broadcast counts once per task): read it on the executor
        thread (a batch wrapper) for an exact count."""
        ...

    @property
    def collectors(self) -> Mapping[int, Any]:
        """Its tasks' collectors (task id -> a bolt's `BoltOutputCollector`, a spout's
        `SpoutOutputCollector`): a batch wrapper emits, acks and fails through them."""
        ...

    @property
    def counters(self) -> ExecutorCounts:
        """Its counts: a batch wrapper that consumes inbox entries itself (drops them, or acts on
        them without executing) counts them here, executor thread only."""
        ...

    def deliver_to_tasks(self, tup: Tuple, what: str) -> None:
        """Executor thread only (a marker handler): hand every task ``tup`` through the bolt's own
        ``execute``/``execute_batch``, neither counted nor acked; an exception is counted and
        logged as raised on ``what``."""
        ...

    def observe(self, inputs: BatchObserver | None, emits: FlushObserver | None) -> None:
        """Any thread: from now on, the executor thread calls ``inputs`` with each inbox batch it
        takes to execute (a bolt executor's; a spout executes none), before executing it, and
        ``emits`` with each emit buffer its outbox flushes; None: stop calling it. Replaces the
        previous observers (one observing feature per executor)."""
        ...

    def peek(self, payload: bytes) -> list[Tuple]:
        """Executor thread only (an observer): the tuples a payload entry carries, decoded apart
        from their execution; none when it does not decode (its execution counts that)."""
        ...

    def tuples_in(self, payload: bytes) -> int:
        """How many tuples a payload entry carries, without decoding it."""
        ...

    def unpack(self, entry: Any) -> tuple[list[Tuple], int]:
        """Executor thread only (a batch wrapper): the tuples an inbox entry other than a Tuple
        carries (a payload, a rows or columns payload, a local batch) and how many tuples it
        stands for; undecodable ones are counted (as failed) and left out."""
        ...


@dataclass(frozen=True)
class ExecutorHooks:
    """What a feature adds to one executor. Every part is optional."""

    #: (task, the task's call) -> the call the executor makes instead
    wrap_execute: Callable[[int, ExecuteFn], ExecuteFn] | None = None
    #: (task, the task's batch call) -> the batch call the executor makes instead
    wrap_execute_batch: Callable[[int, ExecuteBatchFn], ExecuteBatchFn] | None = None
    #: (task, the task's columnar call) -> the columnar call the executor makes instead
    wrap_process: Callable[[int, ProcessFn], ProcessFn] | None = None
    #: the task wrappers run on one inbox batch in this many, the others run the plain calls (a
    #: sampling observer's cost divided by it): the first batch, then batches drawn at random
    #: about this many apart; with several features wrapping the bolt's entry point, the
    #: executor uses the smallest, and every wrapper runs on the same batches
    every_batches: int = 1
    #: (a bolt executor's handling of one inbox batch) -> what the executor runs instead, on
    #: every batch. A wrapper that only observes (a tracing span) calls the handling it was
    #: given exactly once per batch; one that holds entries back or acts on some itself
    #: (checkpoints' barrier alignment) sets ``holds_input``, calls it on what may run now, zero
    #: or more times per batch, and counts what it consumes in ``ExecutorView.counters``
    wrap_batch: Callable[[BatchRun], BatchRun] | None = None
    #: ``wrap_batch`` holds entries back or acts on some itself: the executor puts it innermost,
    #: so that every observing wrapper sees what ran, whatever order the features attached in
    #: (observers nest in that order, the first attached inside). At most one per executor: a
    #: second is refused when the executor is built (two could not agree on what runs).
    holds_input: bool = False
    #: marker -> what the executor thread runs when that marker comes out of its inbox
    markers: Mapping[Marker, Callable[[], None]] = field(default_factory=dict)
    #: run as the executor starts (its threads), and as it stops or halts (any thread)
    on_start: Callable[[], None] | None = None
    on_stop: Callable[[], None] | None = None
    #: run on the executor thread as its loop ends (stopped or halted), after its last batch and
    #: before its final flush: release what only that thread uses (a wrapper's store)
    on_exit: Callable[[], None] | None = None
    #: fields of the executor's snapshot (``ExecutorSnapshot`` in tuplemesh.core.stats) that the
    #: feature fills, by field name: only those of ``EXECUTOR_FEATURE_FIELDS`` (``alignment``),
    #: which the executor checks once, when it is built. Any thread.
    snapshot_fields: Callable[[], Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class FeatureMetric:
    """One Prometheus family a feature exports: ``kind`` "gauge" or "counter"; each sample is its
    label values (in ``labels`` order) and its value. The exporter adds the ``worker`` label."""

    name: str
    help: str
    kind: str
    labels: tuple[str, ...]
    samples: Sequence[tuple[tuple[str, ...], float]]


@dataclass(frozen=True)
class FeatureServer:
    """Where a feature serves gRPC calls (``Feature.serve``): the worker process's one server,
    not started yet (its port, TLS, bearer token and call admission apply to the feature's
    services as to Admin's), the calls features add to Admin, and whether the worker takes new
    work now."""

    server: grpc.Server
    #: False once the worker drains or stops: a call that would bring it new work is refused, so
    #: that its caller goes to another worker
    accepting: Callable[[], bool]
    #: the full names of the services a feature adds that are not in ``tuplemesh.v1`` (whose are
    #: listed already): a feature appends its own, for server reflection (grpcurl) to list them
    services: list[str] = field(default_factory=list)
    #: calls a feature adds to ``tuplemesh.v1.Admin`` (``admin_calls.add``): served, and described
    #: by server reflection, as Admin's own
    admin_calls: AdminCalls = field(default_factory=AdminCalls)


class Feature(Protocol):
    """One feature of a worker process (see the module docstring)."""

    #: Its spec's name (`FeatureSet.build` checks): the worker and its page find the running
    #: part under it.
    name: str

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        """Called once per executor as the worker builds it; None: nothing to add to this one."""
        ...

    def start(self) -> None:
        """The worker starts: called before any of its executors starts (no task has opened or
        prepared yet), e.g. to count a new attempt every task's restore sees; start the
        feature's own threads (what they put into inboxes waits there for the executors)."""
        ...

    def stopping(self) -> None:
        """The worker begins to stop, before its spouts stop and its bolts drain: refuse new work
        from outside and release what waits for outside callers, who will not come any more,
        so the executors drain in time. Returns promptly; ``stop`` follows."""
        ...

    def stop(self) -> None:
        """The worker stopped (its executors ended): stop them. Returns promptly."""
        ...

    def serve(self, where: FeatureServer) -> None:
        """Add the feature's gRPC services to ``where.server``: once, before the server starts.
        Only a worker process serves: a worker run without one (a local cluster) never calls it."""
        ...

    def section(self) -> Mapping[str, Any]:
        """The feature's snapshot section: JSON-able data, read from any thread."""
        ...

    def metrics(self) -> Sequence[FeatureMetric]:
        """The feature's Prometheus families now (bounded labels), read at scrape time."""
        ...

    def snapshot_fields(self) -> Mapping[str, Any]:
        """Fields of the worker's snapshot (``WorkerSnapshot`` in tuplemesh.core.stats) that the
        feature fills, by field name: counts that Admin's status, /metrics and the UI read from
        the snapshot since before features. Any thread. A new count goes in ``section`` and
        ``metrics`` instead."""
        ...


class DrainWait(Protocol):
    """What a whole-mesh stop waits for once the mesh is idle, before the executors stop
    (`tuplemesh.server.stopping.MeshDrain` asks it among its ``finals``)."""

    def settled(self, gone: set[int]) -> bool:
        """Asked on every idle wave (``gone``: peers that drained and stopped) until True; it is
        not asked again once it returned True."""
        ...


@runtime_checkable
class DrainingFeature(Protocol):
    """A feature with a part in the worker's drain (see the module docstring, (i))."""

    def draining(self) -> DrainWait | None:
        """The worker begins to drain (its spouts stop emitting): stop what would keep an idle
        mesh from reading idle, and return what a whole-mesh stop waits for (None: nothing).
        Any thread; returns promptly."""
        ...


class HopTracer(Protocol):
    """The spans of a worker's hops outside its executors (a `HopTracingFeature`'s): its transfer
    path opens one around each batch it hands a peer's connection, its receive path one for each
    batch it publishes into inboxes. Without one, neither path checks anything per batch."""

    def transfer(self, peer: int, tuples: int, emits: Sequence[Any]) -> AbstractContextManager[Any]:
        """A span current in the calling thread for the block, around handing ``tuples`` to
        ``peer``'s connection (which puts the span's context on the wire): the context of the
        first emit span among ``emits`` is its parent, the others are its links. Transfer thread."""
        ...

    def receive(self, tuples: int) -> tuple[Any, Callable[[], None]]:
        """A span for publishing one received batch of ``tuples`` into inboxes, a child of the
        calling thread's current context (the sender's transfer span, which the transport made
        current): the context the executors' spans of that batch take as their parent, and the
        span's end. A receive thread."""
        ...


@runtime_checkable
class HopTracingFeature(Protocol):
    """A feature that traces the worker's hops outside its executors (OpenTelemetry tracing):
    the worker asks it for its `HopTracer` once, as it builds its transfer and receive paths."""

    def hop_tracer(self) -> HopTracer: ...


@runtime_checkable
class RestoringFeature(Protocol):
    """A feature that restores tasks' state as they start (checkpointing). Admin asks every such
    feature before it hands out the tasks' live reports, which until then would show the empty
    state a task starts with."""

    def restoring(self) -> list[int]:
        """This worker's tasks whose state is not restored yet. Any thread."""
        ...


class TupleWatch(Protocol):
    """One running watch of a `WatchingFeature`: the sampled tuples, taken as they come."""

    def take(self, timeout: float) -> Sequence[Any]:
        """What was sampled since the last take, waiting up to ``timeout`` for something."""
        ...


@runtime_checkable
class WatchingFeature(Protocol):
    """A feature that samples tuples of executors while a client watches (Admin.WatchTuples):
    the one Admin call serving it finds it by this interface, not by name."""

    def watch(
        self,
        executors: Sequence[str],
        stream: str | None,
        sample_rate: float,
        max_per_second: float,
        emitted: bool = False,
    ) -> TupleWatch:
        """Start sampling what ``executors`` execute (or, ``emitted``, emit) on ``stream`` (None:
        every stream): ``sample_rate`` of it, at most ``max_per_second``."""
        ...

    def unwatch(self, watch: TupleWatch) -> None:
        """End ``watch`` (idempotent)."""
        ...


@runtime_checkable
class ControlledSpout(Protocol):
    """A spout that takes the system's messages (``on_system_message``) on its inbox besides the
    ackers' verdicts (a
    feature's wrapper around a user spout: e.g. a checkpointed topology's `CheckpointedSpout`,
    told by the coordinator to checkpoint, commit or roll back). Its executor finds it once,
    when it is built; a message for a spout task that is not one is counted and logged."""

    def on_system_message(self, tup: Tuple) -> bool:
        """Executor thread: one message; True when the spout has tuples to emit again (a
        rollback rewound it), so that a finished spout is called again."""
        ...


#: Builds a worker's feature; None when the feature has nothing to do for this topology.
FeatureFactory = Callable[[FeatureContext], Feature | None]


def fields_keys(topology: Topology, component: str) -> dict[tuple[str, str], tuple[int, ...]]:
    """(source component, stream) -> the indices of the grouping's key fields in the stream's
    values, for every fields-grouped input of ``component``."""
    found: dict[tuple[str, str], tuple[int, ...]] = {}
    for sub in topology.components[component].inputs:
        if isinstance(sub.grouping, FieldsGrouping):
            declared = topology.components[sub.source].streams[sub.stream].fields
            found[(sub.source, sub.stream)] = tuple(declared.index(f) for f in sub.grouping.fields)
    return found
