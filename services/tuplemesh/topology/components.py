"""The user-facing component API: spouts, bolts, their collectors, context and declarer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tuplemesh.topology.columns import Columns
from tuplemesh.topology.tuple import DEFAULT_STREAM, Fields, Tuple

__all__ = [
    "BasicBolt",
    "BatchBolt",
    "Bolt",
    "BoltCollector",
    "BoltSource",
    "ColumnarBolt",
    "MetricCounter",
    "MetricGauge",
    "MetricHistogram",
    "OutputFieldsDeclarer",
    "Spout",
    "SpoutCollector",
    "StreamDef",
    "TaskContext",
    "TaskMetrics",
    "entry_point",
]


@dataclass(frozen=True)
class StreamDef:
    """A declared output stream: its field names and whether it is a direct stream."""

    fields: Fields
    direct: bool = False


@dataclass
class OutputFieldsDeclarer:
    """Collects a component's output streams when the topology is built."""

    streams: dict[str, StreamDef] = field(default_factory=dict)

    def declare(self, fields: Sequence[str], direct: bool = False) -> None:
        """Declare the default stream."""
        self.declare_stream(DEFAULT_STREAM, fields, direct)

    def declare_stream(self, stream: str, fields: Sequence[str], direct: bool = False) -> None:
        """Declare a named stream; ``direct`` streams are emitted with ``emit_direct`` only."""
        if not isinstance(stream, str) or not stream:
            raise ValueError(f"stream names must be non-empty strings, got {stream!r}")
        if stream in self.streams:
            raise ValueError(f"stream {stream!r} declared twice")
        self.streams[stream] = StreamDef(Fields(fields), direct)


class SpoutCollector(Protocol):
    """What a spout emits through. Called only from the spout's own executor thread."""

    def emit(self, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None) -> None:
        """Emit one tuple (one value per declared field of ``stream``). With acking on, a tuple
        with a ``msg_id`` is tracked: the spout's ``ack`` or ``fail`` gets that id back."""
        ...

    def emit_many(
        self,
        rows: Sequence[Sequence[Any]],
        stream: str = DEFAULT_STREAM,
        msg_ids: Sequence[Any] | None = None,
    ) -> None:
        """``emit`` for each row (with ``msg_ids[i]`` when given), in one call."""
        ...

    def emit_columns(
        self,
        columns: Sequence[Sequence[Any]],
        stream: str = DEFAULT_STREAM,
        msg_ids: Sequence[Any] | None = None,
        batch_id: Any = None,
    ) -> None:
        """``emit`` for each row held as ``columns`` (one sequence per declared field of
        ``stream``, all of one length; with ``msg_ids[i]`` when given), in one call: each grouping
        routes the whole batch at once and the rows for one task travel as columns. With
        ``batch_id`` instead, the whole batch is one tracked tree: ``ack(batch_id)`` or
        ``fail(batch_id)`` comes once, and a failed batch is the spout's to emit again."""
        ...

    def emit_direct(
        self, task: int, values: Sequence[Any], stream: str = DEFAULT_STREAM, msg_id: Any = None
    ) -> None:
        """``emit`` to one ``task`` of a subscriber of the direct ``stream``."""
        ...


class BoltCollector(Protocol):
    """What a bolt emits, acks and fails through. Called only from the bolt's executor thread."""

    def emit(
        self,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """Emit one tuple (one value per declared field of ``stream``), anchored to ``anchors``:
        with acking on, it joins their tuple trees, so a failure downstream replays their roots."""
        ...

    def emit_many(
        self,
        rows: Sequence[Sequence[Any]],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """``emit`` for each row, all anchored to ``anchors``, in one call."""
        ...

    def emit_columns(
        self,
        columns: Sequence[Sequence[Any]],
        anchors: Sequence[Tuple] | Tuple | Columns | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """``emit`` for each row held as ``columns`` (one sequence per declared field of
        ``stream``, all of one length), all anchored to ``anchors``, in one call: each grouping
        routes the whole batch at once and the rows for one task travel as columns. Anchored to
        the batch ``process`` was given, when that batch is tracked as a whole, each task's part
        is one node of its trees; anchored to tuples, rows go row by row (each delivery in a
        tree has its own edge ids)."""
        ...

    def emit_direct(
        self,
        task: int,
        values: Sequence[Any],
        anchors: Sequence[Tuple] | Tuple | None = None,
        stream: str = DEFAULT_STREAM,
    ) -> None:
        """``emit`` to one ``task`` of a subscriber of the direct ``stream``."""
        ...

    def ack(self, tup: Tuple | Columns) -> None:
        """This bolt is done with ``tup``: ack or fail every input once (a ``BasicBolt`` acks
        for you). A batch given to ``process`` is acked in one call."""
        ...

    def fail(self, tup: Tuple | Columns) -> None:
        """``tup`` could not be processed: with acking on, its spout tuples fail and are replayed.
        A batch given to ``process`` is failed in one call."""
        ...


class MetricCounter(Protocol):
    """A user counter (``context.metrics.counter``). Executor thread only; a plain add."""

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` (>= 0)."""
        ...


class MetricGauge(Protocol):
    """A user gauge (``context.metrics.gauge``); exported as the sum over the component's tasks
    in the worker. Executor thread only."""

    def set(self, value: float) -> None:
        """Set this task's value."""
        ...

    def inc(self, amount: float = 1.0) -> None:
        """Add ``amount`` to this task's value."""
        ...

    def dec(self, amount: float = 1.0) -> None:
        """Subtract ``amount`` from this task's value."""
        ...


class MetricHistogram(Protocol):
    """A user histogram (``context.metrics.histogram``). Executor thread only; no lock."""

    def observe(self, value: float) -> None:
        """Count ``value`` in its bucket and add it to the sum."""
        ...


class TaskMetrics(Protocol):
    """Define user metrics, exported on /metrics as ``tuplemesh_user_<name>`` with the labels
    ``worker`` and ``component`` (summed over the component's tasks in the worker).

    Call these in ``open``/``prepare`` and keep the handle; asking again for a name gives the
    same handle. A bad name, or one name defined twice differently, raises TopologyError.
    """

    def counter(self, name: str, help: str) -> MetricCounter:
        """A counter, exported as ``tuplemesh_user_<name>_total``; ``help`` is its description."""
        ...

    def gauge(self, name: str, help: str) -> MetricGauge:
        """A gauge, exported as ``tuplemesh_user_<name>``."""
        ...

    def histogram(self, name: str, help: str, buckets: Sequence[float] | None = None) -> MetricHistogram:
        """A histogram with these bucket bounds (default: seconds, 10 microseconds to 1 second)."""
        ...


class TaskContext(Protocol):
    """What a task may ask about its place in the topology (`TopologyContext` is the runtime's)."""

    @property
    def task_id(self) -> int:
        """This task's id, unique in the topology."""
        ...

    @property
    def component_id(self) -> str:
        """The name of this task's spout or bolt."""
        ...

    @property
    def worker_index(self) -> int:
        """The index of the worker this task runs in."""
        ...

    @property
    def conf(self) -> Mapping[str, Any]:
        """The configuration of the worker this task runs in (the ``conf`` of ``open``/``prepare``)."""
        ...

    @property
    def component_tasks(self) -> tuple[int, ...]:
        """Every task id of this task's component, across all workers."""
        ...

    @property
    def task_index(self) -> int:
        """Position of this task among its component's tasks (0-based)."""
        ...

    @property
    def topology_name(self) -> str:
        """The name given to ``TopologyBuilder``."""
        ...

    @property
    def metrics(self) -> TaskMetrics:
        """This task's user metrics (counters, gauges, histograms under its component's labels)."""
        ...

    def tasks_of(self, component: str) -> tuple[int, ...]:
        """Every task id of ``component``, across all workers."""
        ...

    def output_fields(self, stream: str = DEFAULT_STREAM) -> Fields:
        """The fields this task's component declared on ``stream``."""
        ...

    def sources(self) -> list[tuple[str, str]]:
        """(component, stream) of every input of this task's component (Storm's getThisSources)."""
        ...

    def fields_of(self, component: str, stream: str = DEFAULT_STREAM) -> Fields:
        """The fields ``component`` declared on ``stream`` (Storm's getComponentOutputFields)."""
        ...


class Spout:
    """Base class of spouts. Each task gets its own deep copy of the instance given to the builder.

    ``next_tuple`` should emit a few tuples (or none) and return; it must not block for long.
    A finite spout returns True from ``is_finished`` once it has emitted everything: a run ends
    when every spout is finished and every emitted tuple has been executed.
    """

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare output streams (called once when the topology is built)."""

    def open(self, conf: Mapping[str, Any], context: TaskContext, collector: SpoutCollector) -> None:
        """Called once in the task's executor thread before the first ``next_tuple``."""

    def next_tuple(self) -> None:
        """Emit zero or more tuples."""

    def ack(self, msg_id: Any) -> None:
        """The tuple tree of ``msg_id`` was fully processed."""

    def fail(self, msg_id: Any) -> None:
        """The tuple tree of ``msg_id`` failed or timed out."""

    def is_finished(self) -> bool:
        """True when a finite spout has nothing more to emit."""
        return False

    def pending(self) -> int:
        """Tuples this spout already accepted from outside (acknowledged to a producer) and must
        still emit. A deactivated spout keeps being called until this is 0, so a drain loses none."""
        return 0

    def close(self) -> None:
        """Called once when the worker shuts down."""

    def report(self) -> Any:
        """JSON-serialisable state for the run summary and the topology's result check."""
        return None


class Bolt:
    """Base class of bolts. Each task gets its own deep copy of the instance given to the builder.

    Batch execution: a bolt that defines ``execute_batch(self, tuples: list[Tuple]) -> None`` is
    handed each inbox batch, split by task in arrival order, in calls of at most
    ``topology.producer.batch.size`` tuples instead of one ``execute`` per tuple (``execute`` is
    then never called). Acking stays per tuple: ack or fail each input through the collector as
    ``execute`` would. If ``execute_batch`` raises, the error is counted once and every tuple of
    that call is failed, including any it acked already (their trees replay).
    ``collector.emit_many(rows, anchors)`` emits many tuples in one call; the rows bound for one
    task in another worker then travel, and are decoded, as one payload.

    Columnar execution: a bolt that defines ``process(self, batch: Columns) -> None`` is handed
    its input as `Columns` (``batch.column("word")``, ``len(batch)``, a `Tuple` per row when
    iterated), one call per source stream's run of an inbox batch, at most
    ``topology.producer.batch.size`` rows at a time; ``execute`` and ``execute_batch`` are then
    never called. ``collector.emit_columns(columns)`` emits a batch held as columns: each grouping
    routes it at once (a fields grouping partitions the key column in one pass) and the rows for
    one task travel, and are decoded, as columns, with no object per row. If ``process`` raises,
    the error is counted once and every row of that call is failed.
    """

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare output streams (called once when the topology is built)."""

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: BoltCollector) -> None:
        """Called once in the task's executor thread before the first ``execute``."""

    def execute(self, tup: Tuple) -> None:
        """Process one tuple. An exception is counted, logged and fails the tuple; the bolt lives on.

        With ticks on (``topology.tick.tuple.freq.secs``) it also gets tick tuples
        (``tup.is_tick()``): the bolt's clock, not data, so never ack, fail or anchor to them."""
        raise NotImplementedError

    def component_config(self) -> Mapping[str, Any]:
        """Configuration this component sets for itself (Storm's getComponentConfiguration), for
        now ``topology.tick.tuple.freq.secs``; a declarer's ``tick_every`` overrides it."""
        return {}

    def cleanup(self) -> None:
        """Called once when the worker shuts down."""

    def report(self) -> Any:
        """JSON-serialisable state for the run summary and the topology's result check."""
        return None


@runtime_checkable
class BatchBolt(Protocol):
    """A bolt with the batch entry point (see `Bolt`): checked once, when its executor is built."""

    def execute_batch(self, tuples: list[Tuple]) -> None: ...


@runtime_checkable
class ColumnarBolt(Protocol):
    """A bolt with the columnar entry point (see `Bolt`): checked once, when its executor is built."""

    def process(self, batch: Columns) -> None: ...


def entry_point(bolt: Bolt) -> str:
    """The entry point the runtime calls on ``bolt``, chosen once per executor: ``"process"``
    when it defines a callable ``process`` (columns), else ``"execute_batch"`` when it defines a
    callable ``execute_batch``, else ``"execute"``. An attribute of either name that is not
    callable (``self.process = some_handle``) is not an entry point."""
    if isinstance(bolt, ColumnarBolt) and callable(bolt.process):
        return "process"
    if isinstance(bolt, BatchBolt) and callable(bolt.execute_batch):
        return "execute_batch"
    return "execute"


class BoltSource(Protocol):
    """Something ``set_bolt`` accepts in place of a Bolt because it knows the Bolt that runs it
    (a windowed bolt is run by a bolt that keeps its windows)."""

    def as_bolt(self) -> Bolt: ...


class BasicBolt(Bolt):
    """A bolt whose input is acked for it (Storm's BaseBasicBolt).

    With acking on, every emit made during ``execute`` is anchored to the tuple being executed,
    and that tuple is acked when ``execute`` returns, or failed when it raises. With acking off
    it is an ordinary Bolt, at no extra cost.

    With ``execute_batch`` every input of the call is acked when it returns, or failed when it
    raises; an emit is anchored only to the inputs passed as its ``anchors`` (which of the batch
    it came from is the bolt's to say).
    """
