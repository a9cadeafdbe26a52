"""Windowed bolts: `WindowedBolt` (what users subclass) and `WindowedBoltRunner` (the Bolt that runs
it, Storm's WindowedBoltExecutor), plus their checkpointed variants.

The runner sits between the executor and the user's bolt: it routes ticks (its clock), watermarks
and data; keeps the windows in a `WindowEngine`; acks each tuple once no window needs it (after
the last window holding it was evaluated; a window whose ``execute_window`` raised fails its
tuples instead); emits late tuples on the late stream; and, under event time, broadcasts its
watermark downstream every ``watermark_interval`` on the ``__watermark`` stream.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from tuplemesh.errors import TopologyError
from tuplemesh.state.base import KeyValueState
from tuplemesh.state.components import StatefulBolt
from tuplemesh.topology.builder import TICK_FREQ_KEY
from tuplemesh.topology.components import Bolt, BoltCollector, OutputFieldsDeclarer, TaskContext
from tuplemesh.topology.tuple import (
    SYSTEM_COMPONENT,
    TICK_STREAM,
    WATERMARK_STREAM,
    AnchoredTuple,
    Fields,
    Tuple,
)
from tuplemesh.windowing.engine import Entry, EntryStore, WindowEngine
from tuplemesh.windowing.spec import Count, Duration, WindowSpec
from tuplemesh.windowing.watermarks import WatermarkTracker
from tuplemesh.windowing.window import Window

__all__ = [
    "LATE_FIELDS",
    "StatefulWindowedBolt",
    "StatefulWindowedBoltRunner",
    "WindowedBolt",
    "WindowedBoltRunner",
]

log = logging.getLogger(__name__)

#: The fields of the late stream: the late tuple's values, where it came from, its timestamp.
LATE_FIELDS = ("values", "component", "stream", "timestamp")
#: Keys a checkpointed windowed bolt keeps its windows under, in the state it shares with the user.
ENTRIES_KEY = "__window.entries"
_TIMESTAMP_TYPES: frozenset[Any] = frozenset({int, float})
_CLOCK_STREAMS = frozenset({TICK_STREAM, WATERMARK_STREAM})
META_KEY = "__window.meta"


class WindowedBolt:
    """Base class of windowed bolts (Storm's BaseWindowedBolt): ``execute_window`` gets each window.

    ``length`` and ``slide`` are both `Count` (tuples) or both `Duration` (seconds); without a
    slide the windows tumble. With a ``timestamp_field`` windows are in event time: tuples are
    placed by that field (seconds), windows are evaluated as the watermark passes their end, and a
    tuple older than the watermark is late: it is emitted on ``late_stream`` (fields
    ``LATE_FIELDS``) instead of joining a window. Without one, windows are in processing time
    (the wall clock, ``time.time()``, when the tuple is executed).

    Emit through the collector given to ``prepare``; anchor a result to ``window.tuples`` to
    keep it in their trees. Do not ack or fail input tuples: the runtime acks each once no window
    needs it any more. Each task gets its own deep copy.
    """

    #: the runner of this task, set as it prepares the task (a class default: a subclass's own
    #: ``__init__`` need not call this one's); the watermark is read from it
    _runner: WindowedBoltRunner | None = None

    def __init__(
        self,
        length: Count | Duration,
        slide: Count | Duration | None = None,
        *,
        timestamp_field: str | None = None,
        lag: float = 0.0,
        watermark_interval: float = 1.0,
        late_stream: str = "late",
        idle_timeout: float | None = None,
    ) -> None:
        self.window_spec = WindowSpec(
            length,
            length if slide is None else slide,
            timestamp_field,
            lag,
            watermark_interval,
            late_stream,
            idle_timeout,
        )

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        """Declare output streams (the late and watermark streams are added for you)."""

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: BoltCollector) -> None:
        """Called once in the task's executor thread before the first window."""

    def execute_window(self, window: Window) -> None:
        """Called with each window as it closes (``window.tuples``, its start and end)."""
        raise NotImplementedError

    def component_config(self) -> Mapping[str, Any]:
        return {}

    def cleanup(self) -> None:
        """Called once when the worker shuts down."""

    def report(self) -> Any:
        """JSON-serialisable state for the run summary and the topology's result check."""
        return None

    def as_bolt(self) -> Bolt:
        """The Bolt that runs this windowed bolt (``TopologyBuilder.set_bolt`` calls it)."""
        return WindowedBoltRunner(self)

    @property
    def watermark(self) -> float | None:
        """This task's event-time watermark: None before every input task has sent (and under
        processing time). Read it in ``execute_window`` or ``report``."""
        runner = self._runner
        return None if runner is None else runner.watermark


class StatefulWindowedBolt(WindowedBolt):
    """A windowed bolt whose windows in flight, watermark and ``init_state`` state are checkpointed
    (Storm's BaseStatefulWindowedBolt): after a failure the mesh rolls back and the windows are
    evaluated again with the same tuples. Keys starting with ``__window.`` are the runtime's."""

    def init_state(self, state: KeyValueState) -> None:
        """Like `StatefulBolt.init_state`; called after every restore."""

    def as_bolt(self) -> Bolt:
        return StatefulWindowedBoltRunner(self)


def _tick_period(spec: WindowSpec) -> float:
    """How often the runner needs its clock: the watermark interval under event time; often
    enough under processing time that a duration window is evaluated within a tenth of its slide
    (or of a second) of its end when no tuple arrives; count windows need none."""
    if spec.event_time:
        return spec.watermark_interval
    if spec.by_count:
        return 0.0
    return min(spec.slide_size, 1.0) / 10


class WindowedBoltRunner(Bolt):
    """Runs a `WindowedBolt` as an ordinary bolt task."""

    def __init__(self, user: WindowedBolt) -> None:
        spec = getattr(user, "window_spec", None)
        if not isinstance(spec, WindowSpec):
            raise TopologyError(f"{type(user).__name__}.__init__ must call WindowedBolt.__init__")
        self.user = user
        self.spec = spec
        #: the builder subscribes an event-time windowed bolt to its inputs' watermarks
        self.follows_watermarks = spec.event_time
        self.clock: Callable[[], float] = time.time
        self.late = 0  # tuples emitted on the late stream
        self.window_errors = 0  # execute_window calls that raised
        self.bad_timestamps = 0  # event-time tuples without a usable timestamp (failed)

    # -- Bolt ------------------------------------------------------------------------------------
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        self.user.declare_output_fields(declarer)
        if self.spec.event_time:
            declarer.declare_stream(self.spec.late_stream, LATE_FIELDS)
            declarer.declare_stream(WATERMARK_STREAM, ["timestamp"])

    def component_config(self) -> Mapping[str, Any]:
        conf = dict(self.user.component_config())
        period = _tick_period(self.spec)
        if period:
            conf.setdefault(TICK_FREQ_KEY, period)
        return conf

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: BoltCollector) -> None:
        self.collector = collector
        self.context = context
        self.failed: set[int] = set()  # ids of tuples in a window whose evaluation raised
        self.engine = self._new_engine()
        spec = self.spec
        self._sent_watermark: float | None = None
        self._ticks = 0
        self._heard: dict[int, int] = {}  # channel -> tick count when it last sent (idle_timeout)
        self._idle_ticks = 0
        self._channels = frozenset(
            task
            for source, stream in context.sources()
            if not stream.startswith("__") or stream == WATERMARK_STREAM
            for task in context.tasks_of(source)
        )
        self.tracker = self._new_tracker()
        if spec.event_time:
            if spec.idle_timeout is not None:
                self._idle_ticks = max(1, math.ceil(spec.idle_timeout / spec.watermark_interval))
            self._timestamp_at = self._timestamp_positions(context)
        self.user._runner = self  # for WindowedBolt.watermark
        self.user.prepare(conf, context, collector)

    def _new_tracker(self) -> WatermarkTracker | None:
        return WatermarkTracker(self._channels, self.spec.lag) if self.spec.event_time else None

    def _timestamp_positions(self, context: TaskContext) -> dict[tuple[str, str], int]:
        """(component, stream) -> index of the timestamp field, for every data input."""
        name = self.spec.timestamp_field
        assert name is not None
        positions = {}
        for source, stream in context.sources():
            if stream.startswith("__"):
                continue
            fields = context.fields_of(source, stream)
            if name not in fields:
                raise TopologyError(
                    f"windowed bolt {context.component_id!r}: input {source!r} stream {stream!r} has no "
                    f"timestamp field {name!r} (fields: {list(fields.names)})"
                )
            positions[(source, stream)] = fields.index(name)
        return positions

    def _new_engine(self, store: EntryStore | None = None) -> WindowEngine:
        return WindowEngine(self.spec, self._evaluate, self._evict, store)

    def execute(self, tup: Tuple) -> None:
        stream = tup.source_stream
        if stream == TICK_STREAM and tup.source_component == SYSTEM_COMPONENT:
            self._on_tick()
            return
        tracker = self.tracker
        if tracker is None:
            if self.spec.by_count:
                self.engine.add(0, tup)
            else:
                now = self.clock()
                self.engine.advance(now)
                self.engine.add(now, tup)
            return
        source = tup.source_task
        if self._idle_ticks:
            self._heard[source] = self._ticks
        if stream == WATERMARK_STREAM:
            if tracker.on_watermark(source, tup.values[0]):
                self._advance()
            return
        timestamp = self._take(tup)
        if timestamp is not None and tracker.on_timestamp(source, timestamp):
            self._advance()

    def execute_batch(self, tuples: list[Tuple]) -> None:
        """Under event time, the watermark moves with every tuple (lateness is exactly as with
        ``execute``), but the windows it passed are evaluated once, after the batch."""
        tracker = self.tracker
        if tracker is None:
            for tup in tuples:
                self.execute(tup)
            return
        engine = self.engine
        add = engine.add
        on_timestamp = tracker.on_timestamp
        heard = self._heard if self._idle_ticks else None
        positions = self._timestamp_at
        component = stream = None
        at: int | None = None
        timestamp: Any
        for tup in tuples:
            if tup.source_stream is not stream or tup.source_component is not component:
                stream, component = tup.source_stream, tup.source_component
                at = None if stream in _CLOCK_STREAMS else positions.get((component, stream))
            if at is None:  # a tick, a watermark, or a stream without a known timestamp position
                if stream in _CLOCK_STREAMS:
                    self.execute(tup)
                    continue
                timestamp = self._take(tup)
                if timestamp is None:
                    continue
            else:
                timestamp = tup.values[at]
                if timestamp.__class__ not in _TIMESTAMP_TYPES:
                    self._take(tup)  # fails it, and says why
                    continue
                if not add(timestamp, tup):
                    self._emit_late(tup, timestamp)
                    continue
            source = tup.source_task
            if heard is not None:
                heard[source] = self._ticks
            if on_timestamp(source, timestamp):
                engine.set_time(tracker.watermark)  # type: ignore[arg-type]
        engine.evaluate()

    def _take(self, tup: Tuple) -> float | None:
        """Put an event-time tuple into its windows; its timestamp, or None when it was late (it
        went out on the late stream) or had no usable timestamp (it failed)."""
        at = self._timestamp_at.get((tup.source_component, tup.source_stream))
        try:
            field = self.spec.timestamp_field
            timestamp: float = tup.values[at] if at is not None else tup.get(field)  # type: ignore[arg-type]
            if timestamp.__class__ not in _TIMESTAMP_TYPES:
                raise TypeError(f"timestamp {timestamp!r} is not a number of seconds")
            taken = self.engine.add(timestamp, tup)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            self.bad_timestamps += 1
            log.warning(
                "windowed bolt %s: %r has no usable timestamp: %r", self.context.component_id, tup, exc
            )
            self.collector.fail(tup)
            return None
        if not taken:
            self._emit_late(tup, timestamp)
            return None
        return timestamp

    def cleanup(self) -> None:
        self.user.cleanup()

    def report(self) -> Any:
        return self.user.report()

    # -- time ------------------------------------------------------------------------------------
    def _advance(self) -> None:
        assert self.tracker is not None and self.tracker.watermark is not None
        self.engine.advance(self.tracker.watermark)

    def _on_tick(self) -> None:
        self._ticks += 1
        tracker = self.tracker
        if tracker is None:
            if not self.spec.by_count:
                self.engine.advance(self.clock())
            return
        if self._idle_ticks:
            silent = [c for c in tracker.channels if self._ticks - self._heard.get(c, 0) >= self._idle_ticks]
            if silent and tracker.mark_idle(silent):
                self._advance()
        self.engine.evaluate()  # every window the watermark passed goes out before the watermark
        watermark = tracker.watermark
        if watermark is not None and watermark != self._sent_watermark:
            self._sent_watermark = watermark
            self.collector.emit([watermark], stream=WATERMARK_STREAM)

    @property
    def watermark(self) -> float | None:
        """This task's event-time watermark (None: not yet, or processing time)."""
        return None if self.tracker is None else self.tracker.watermark

    # -- windows ---------------------------------------------------------------------------------
    def _evaluate(self, window: Window) -> None:
        try:
            self.user.execute_window(window)
        except Exception as exc:
            self.window_errors += 1
            self.failed.update(id(t) for t in window.tuples)
            log.error(
                "windowed bolt %s task %d: execute_window raised %r on %r; its tuples fail",
                self.context.component_id,
                self.context.task_id,
                exc,
                window,
            )

    def _evict(self, tuples: list[Tuple]) -> None:
        collector = self.collector
        failed = self.failed
        for tup in tuples:
            if failed and id(tup) in failed:
                failed.discard(id(tup))
                collector.fail(tup)
            else:
                collector.ack(tup)

    def _emit_late(self, tup: Tuple, timestamp: float) -> None:
        self.late += 1
        self.collector.emit(
            [list(tup.values), tup.source_component, tup.source_stream, timestamp],
            anchors=tup,
            stream=self.spec.late_stream,
        )
        self.collector.ack(tup)


class StatefulWindowedBoltRunner(WindowedBoltRunner, StatefulBolt):
    """Runs a `StatefulWindowedBolt`: its windows' tuples and counters live in the task's state,
    so every checkpoint holds them as they were at its barriers."""

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: BoltCollector) -> None:
        self.state: KeyValueState | None = None
        super().prepare(conf, context, collector)

    def _new_engine(self, store: EntryStore | None = None) -> WindowEngine:
        return super()._new_engine(EntryStore() if store is None else store)

    def init_state(self, state: KeyValueState) -> None:
        for _ts, _key, tup in self.engine.entries():
            if isinstance(tup, AnchoredTuple):  # of the attempt a rollback ended: its spout replays it
                self.collector.fail(tup)
        self.failed.clear()
        entries: dict[int, list[Any]] = state.get(ENTRIES_KEY) or {}
        store = EntryStore(entries)
        state[ENTRIES_KEY] = store.entries  # kept current as tuples come and go
        # a restore replaces everything the windows knew: their tuples, time and watermark
        self.engine = self._new_engine(store)
        self.tracker = self._new_tracker()
        self._sent_watermark = None
        meta = state.get(META_KEY)
        if meta is not None:
            restored: list[Entry] = []
            released: dict[int, int] = {}
            for key, (ts, values, task, component, stream, release) in sorted(entries.items()):
                restored.append(
                    (ts, key, Tuple(values, task, component, stream, self._fields(component, stream)))
                )
                if release is not None:
                    released[key] = release
            self.engine.restore(meta[0], restored, released)
            if self.tracker is not None and meta[1] is not None:
                self.tracker.restore(meta[1])
        self.state = state
        self.user.init_state(state)  # type: ignore[attr-defined]

    def _fields(self, component: str, stream: str) -> Fields:
        return self.context.fields_of(component, stream)

    def execute(self, tup: Tuple) -> None:
        super().execute(tup)
        self._keep_meta()

    def execute_batch(self, tuples: list[Tuple]) -> None:
        super().execute_batch(tuples)
        self._keep_meta()

    def _keep_meta(self) -> None:
        """The engine's and the watermark's counters into the state, current at every barrier
        (barriers are aligned between the executor's calls, never inside one)."""
        if self.state is not None:
            self.state[META_KEY] = [
                self.engine.export(),
                None if self.tracker is None else self.tracker.export(),
            ]
