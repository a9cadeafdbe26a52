"""`WindowEngine`: which tuples form which window, and when a tuple is no longer needed.

Pure bookkeeping, no clock and no I/O: the windowed bolt feeds it tuples with their timestamps
and tells it how far time has got (the watermark under event time, the clock under processing
time); the engine calls back with each window to evaluate and with the tuples no later window
needs (to be acked).

- Count windows: every ``slide`` tuples, the last ``length`` tuples form a window. Under event
  time tuples count in timestamp order, once the watermark has passed them.
- Duration windows: time is cut into slide-long slots (slot ``s`` is ``[s*slide, (s+1)*slide)``);
  window ``k`` is the ``length / slide`` slots before ``k*slide``. It is evaluated when time
  reaches its end, if it holds any tuple. A tuple's slot is computed once, from its timestamp,
  so an edge falls on the same tuple in every task and every run.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tuplemesh.topology.tuple import Tuple
from tuplemesh.windowing.spec import WindowSpec
from tuplemesh.windowing.window import Window

__all__ = ["Entry", "EntryStore", "WindowEngine"]

#: (timestamp, key, tuple): key is the tuple's arrival number in this task
Entry = tuple[float, int, Tuple]


_floor = math.floor
#: the slot of "no time yet": every slot is at or after it
_NO_SLOT = -(1 << 62)


def _timestamp(entry: Entry) -> float:
    return entry[0]


class EntryStore:
    """Keeps the engine's tuples as plain values (for a checkpoint): key -> ``[timestamp, values,
    source task, component, stream, release]``, ``release`` being the order in which a count
    window counted it (None: not yet)."""

    def __init__(self, entries: dict[int, list[Any]] | None = None) -> None:
        self.entries: dict[int, list[Any]] = {} if entries is None else entries

    def added(self, entry: Entry) -> None:
        ts, key, tup = entry
        self.entries[key] = [
            ts,
            list(tup.values),
            tup.source_task,
            tup.source_component,
            tup.source_stream,
            None,
        ]

    def released(self, key: int, order: int) -> None:
        self.entries[key][5] = order

    def removed(self, entries: list[Entry]) -> None:
        for entry in entries:
            self.entries.pop(entry[1], None)


class WindowEngine:
    """One task's windows. Executor thread only."""

    def __init__(
        self,
        spec: WindowSpec,
        on_window: Callable[[Window], None],
        on_evict: Callable[[list[Tuple]], None],
        store: EntryStore | None = None,
    ) -> None:
        self.spec = spec
        self._on_window = on_window
        self._on_evict = on_evict
        self.store = store
        self._length = spec.length_size
        self._slide = spec.slide_size
        self._count_only = spec.by_count and not spec.event_time
        self._by_count = spec.by_count
        self._sorted = spec.event_time  # window tuples in timestamp order
        #: event-time count windows: the tuples not yet counted
        self.buffer: list[Entry] = []
        #: duration windows: the tuples held, by slot (a slide-long stretch of time)
        self.slots: dict[int, list[Entry]] = {}
        #: duration windows: how many slots a window spans
        self._span = round(self._length / self._slide)
        self.counted: list[Entry] = []  # count windows: the tuples counted, the last ``length``
        self.since_fire = 0
        self.releases = 0  # count windows: tuples counted so far
        self.next_k: int | None = None  # duration windows: the next window to evaluate
        self.time: float | None = None  # how far time has got (the watermark under event time)
        self._time_slot = _NO_SLOT  # duration windows: the slot of ``time``
        self.next_key = 0
        self.previous: list[Tuple] = []
        self.windows = 0  # windows evaluated

    def __len__(self) -> int:
        return len(self.buffer) + len(self.counted) + sum(len(s) for s in self.slots.values())

    def entries(self) -> list[Entry]:
        """Every tuple held, in no particular order."""
        return [*self.buffer, *self.counted, *(e for s in self.slots.values() for e in s)]

    def add(self, timestamp: float, tup: Tuple) -> bool:
        """Take ``tup`` into the windows, unless it came too late to be counted (event time): it
        is behind the watermark (count windows), or the first window it belongs to was evaluated
        already (duration windows: its slot is behind the watermark's). False when late."""
        if not self._by_count:  # first: the common case, kept to a few operations
            slot = _floor(timestamp / self._slide + 1e-9)
            if slot < self._time_slot:
                return False
            key = self.next_key
            self.next_key = key + 1
            entry = (timestamp, key, tup)
            if self.store is not None:
                self.store.added(entry)
            held = self.slots.get(slot)
            if held is None:
                self.slots[slot] = [entry]
            else:
                held.append(entry)
            return True
        if self._count_only:
            entry = (timestamp, self.next_key, tup)
            self.next_key += 1
            if self.store is not None:
                self.store.added(entry)
            self._count(entry)
            return True
        if self.time is not None and timestamp < self.time:
            return False
        entry = (timestamp, self.next_key, tup)
        self.next_key += 1
        if self.store is not None:
            self.store.added(entry)
        self.buffer.append(entry)
        return True

    def advance(self, now: float) -> None:
        """Time (the watermark, or the clock) reached ``now``: evaluate every window that ends
        at or before it."""
        self.set_time(now)
        self.evaluate()

    def set_time(self, now: float) -> None:
        """Time reached ``now``: from here on, tuples behind it are late. The windows it passed
        are evaluated by the next ``evaluate`` (their contents are settled already: a tuple
        that would still fall in one is late)."""
        if self.time is None or now > self.time:
            self.time = now
            if not self._by_count:
                self._time_slot = _floor(now / self._slide + 1e-9)

    def evaluate(self) -> None:
        """Evaluate every window that time has passed."""
        now = self.time
        if now is None or self._count_only:
            return
        if self._by_count:  # event-time count windows: count what the watermark passed, in order
            ready = [e for e in self.buffer if e[0] < now]
            if ready:
                self.buffer = [e for e in self.buffer if e[0] >= now]
                ready.sort(key=_timestamp)
                for entry in ready:
                    self._count(entry)
            return
        self._fire_until()

    # -- count windows ---------------------------------------------------------------------------
    def _count(self, entry: Entry) -> None:
        if self.store is not None:
            self.store.released(entry[1], self.releases)
        self.releases += 1
        counted = self.counted
        counted.append(entry)
        self.since_fire += 1
        if self.since_fire < self._slide:
            return
        self.since_fire = 0
        self._evaluate(counted, None, None)
        keep = int(self._length - self._slide)
        gone = counted[: len(counted) - keep]
        self.counted = counted[len(counted) - keep :]
        self._evict(gone)

    # -- duration windows ------------------------------------------------------------------------
    def slot(self, timestamp: float) -> int:
        """The slide-long slot ``timestamp`` falls in: slot ``s`` is ``[s*slide, (s+1)*slide)``.
        A billionth of a slot of tolerance, so 0.3 s is in slot 3 of a 0.1 s slide although
        0.3 / 0.1 < 3 in floats."""
        return _floor(timestamp / self._slide + 1e-9)

    def _fire_until(self) -> None:
        slots = self.slots
        span = self._span
        last = self._time_slot  # window k (slots k-span .. k-1) ends at k*slide: due once k <= last
        sort = self._sorted
        while True:
            if self.next_k is None:
                if not slots:
                    return
                self.next_k = min(slots) + 1
            k = self.next_k
            if k > last:
                return
            if span == 1:
                inside = slots.get(k - 1, [])
            else:
                inside = [e for s in range(k - span, k) for e in slots.get(s, ())]
            if inside:
                if sort:
                    inside.sort(key=_timestamp)
                self._evaluate(inside, (k - span) * self._slide, k * self._slide)
            self._evict(slots.pop(k - span, []))
            if not slots:
                self.next_k = None
                return
            self.next_k = max(k + 1, min(slots) + 1)  # skip the empty windows of a gap

    # -- both ------------------------------------------------------------------------------------
    def _evaluate(self, entries: list[Entry], start: float | None, end: float | None) -> None:
        tuples = [e[2] for e in entries]
        self.windows += 1
        window = Window(tuples, start, end, self.previous)
        self.previous = tuples
        self._on_window(window)

    def _evict(self, entries: list[Entry]) -> None:
        if not entries:
            return
        if self.store is not None:
            self.store.removed(entries)
        self._on_evict([e[2] for e in entries])

    # -- checkpoints -----------------------------------------------------------------------------
    def export(self) -> list[Any]:
        """The engine's counters as plain values (its tuples are in the EntryStore)."""
        return [self.next_k, self.since_fire, self.releases, self.time, self.next_key, self.windows]

    def restore(self, exported: list[Any], entries: list[Entry], released: dict[int, int]) -> None:
        """Rebuild from ``export`` and the EntryStore's tuples (``released``: key -> count order)."""
        self.next_k, self.since_fire, self.releases, self.time, self.next_key, self.windows = exported
        self._time_slot = _NO_SLOT if self.time is None or self._by_count else self.slot(self.time)
        waiting = [e for e in entries if e[1] not in released]
        self.buffer, self.slots = [], {}
        if self._by_count:
            self.buffer = waiting
        else:
            for entry in waiting:
                self.slots.setdefault(self.slot(entry[0]), []).append(entry)
        self.counted = sorted((e for e in entries if e[1] in released), key=lambda e: released[e[1]])
        self.previous = []
