"""`SendWindow`: a sender's bounded window of unacknowledged batches, shared by network plugins.

Sequence numbers start at 1. ``add`` blocks while the window is full (count, bytes, the
receiver's credit, or the tuples and bytes `InFlightTimeLimit` allows): backpressure instead of
a drop.
The receiver's credit is in batches and in bytes: each acknowledgement grants the bytes this
sender may have unacknowledged, its share of the room left under the receiver's ceiling on
bytes it holds (``topology.receive.max.bytes``). A receiver whose executors fall behind grants
less, so senders hold their batches instead of filling the transport's buffers between them.
``ack`` releases everything up to a sequence. A stream (or socket) thread walks the window with
``next_to_send``; after a reconnect it starts again at ``oldest`` so every unacknowledged batch
is resent, in order.

Coalescing (``add_packed``): a batch the sending thread has not taken yet stays open, and what
the transfer thread hands over next joins it instead of taking a sequence of its own. A stream
message costs the receiver the same thread hand-overs whether it holds ten tuples or a thousand,
and a receiver behind on messages is where a cross-worker tuple waited at moderate rates (a
trace of every hand-over: tens of milliseconds between the sender's write and the receiver's
read, a few microseconds everywhere else). ``next_to_send`` with ``hold_until`` keeps the open
batch back until then, so a busy link sends one message per pace with all that came meanwhile,
and an idle one sends at once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from tuplemesh import tracing
from tuplemesh.errors import TransportError
from tuplemesh.transport.base import HeldBytes, OnCongestion, TaskMessage
from tuplemesh.transport.framing import join_packed, pack_within
from tuplemesh.transport.settings import TransportSettings
from tuplemesh.transport.stats import ConnectionStats

__all__ = [
    "MAX_IN_FLIGHT_BYTES",
    "MAX_IN_FLIGHT_TUPLES",
    "MIN_IN_FLIGHT_BYTES",
    "MIN_IN_FLIGHT_TUPLES",
    "InFlightTimeLimit",
    "SendWindow",
    "WindowedConnection",
]

log = logging.getLogger(__name__)

#: No window is held below this many tuples by the time limit: at low rates a burst goes out
#: whole, and one batch always fits (``add`` never waits on an empty window).
MIN_IN_FLIGHT_TUPLES = 1024
#: The largest limit: unbounded in practice (the count and bytes bounds still apply).
MAX_IN_FLIGHT_TUPLES = 1 << 40
#: No window is held below this many bytes by the time limit: small tuples are bounded by
#: `MIN_IN_FLIGHT_TUPLES` first; this one holds back large tuples (1,024 tuples of 1 MiB are a
#: gigabyte), and one batch always goes out whatever its size.
MIN_IN_FLIGHT_BYTES = 1 << 20
#: The largest byte limit: unbounded in practice (messaging.window.bytes still applies).
MAX_IN_FLIGHT_BYTES = 1 << 62
#: An open batch takes more only while it holds fewer tuples than this (the transfer batch size's
#: default: the large message it buys at saturation, never a larger one).
MOST_COALESCED_TUPLES = 10_000
#: Shortest interval over which the acknowledged throughput is measured.
_RATE_SAMPLE_SECONDS = 0.02
#: Weight of the newest throughput sample in its moving average.
_RATE_WEIGHT = 0.25
#: Growth of the limit per acknowledgement while the sender waits and batches come back fast.
_GROWTH = 1.25
#: The round trip is the shortest age over the last one to two of these periods.
_FLOOR_SECONDS = 1.0


def _moved(average: float, measured: float) -> float:
    """A throughput's moving average after the sample ``measured`` (the first sample sets it)."""
    return measured if average == 0.0 else average + _RATE_WEIGHT * (measured - average)


class InFlightTimeLimit:
    """How many unacknowledged tuples and bytes a sender may have in flight: what the peer takes
    in its round trip plus ``target`` seconds, from the throughput (in tuples and in bytes)
    measured on its acknowledgements. Tuples bound small tuples, bytes large ones: each limit
    has its own floor, below which time does not hold a window back. At the byte floor a batch
    of 1 MiB or more is alone in flight (the batch that crosses a limit goes out); the limit
    grows again while acknowledgements come back early.

    A slot or byte count says nothing about time: 32 batches of 3,000 tuples in front of a
    receiver taking 200k tuples/s is half a second that every tuple behind them waits. This
    limit follows the age of each batch when its acknowledgement comes back (time in the
    window, on the wire and in the receiver's hands) against the shortest age seen lately (the
    round trip with nothing queued: threads handing the batch over, the wire, the ack). Once a
    batch waited more than ``target`` beyond that, the limit drops to the throughput times the
    round trip plus the target: enough to keep the peer busy, and at most ``target`` of queue.
    While the sender waits for room and batches come back within half the target, it grows,
    so a link that is not the bottleneck is never held back by a stale estimate. (Flink's buffer
    debloating sizes in-flight data per channel to a time the same way; TCP Vegas and BBR size
    their windows from the same two measurements.) Called under the window's lock.
    """

    __slots__ = (
        "_current_floor",
        "_floor_started",
        "_previous_floor",
        "_sample_bytes",
        "_sample_started",
        "_sample_tuples",
        "byte_rate",
        "bytes_limit",
        "floor",
        "limit",
        "rate",
        "target",
    )

    def __init__(self, target_seconds: float) -> None:
        self.target = target_seconds
        self.limit = MAX_IN_FLIGHT_TUPLES
        #: unacknowledged bytes allowed (`MAX_IN_FLIGHT_BYTES`: not held back by time)
        self.bytes_limit = MAX_IN_FLIGHT_BYTES
        #: moving averages of the tuples and bytes acknowledged per second (0.0: not measured yet)
        self.rate = 0.0
        self.byte_rate = 0.0
        #: the shortest age seen in this and the previous `_FLOOR_SECONDS` (the round trip)
        self.floor = float("inf")
        self._previous_floor = float("inf")
        self._current_floor = float("inf")
        self._floor_started = 0.0
        self._sample_started = 0.0
        self._sample_tuples = 0
        self._sample_bytes = 0

    def acknowledged(self, tuples: int, age: float, waited: bool, now: float, nbytes: int = 0) -> None:
        """``tuples`` in ``nbytes`` were acknowledged at ``now``; the newest of their batches was
        added ``age`` seconds ago; ``waited``: a sender waited for room since the previous
        acknowledgement."""
        if self._sample_started == 0.0:
            self._sample_started = self._floor_started = now
        self._sample_tuples += tuples
        self._sample_bytes += nbytes
        elapsed = now - self._sample_started
        if elapsed >= _RATE_SAMPLE_SECONDS:
            self.rate = _moved(self.rate, self._sample_tuples / elapsed)
            self.byte_rate = _moved(self.byte_rate, self._sample_bytes / elapsed)
            self._sample_started, self._sample_tuples, self._sample_bytes = now, 0, 0
        if now - self._floor_started >= _FLOOR_SECONDS:  # forget round trips of another load
            self._previous_floor, self._floor_started = self._current_floor, now
            self._current_floor = age
        elif age < self._current_floor:
            self._current_floor = age
        self.floor = min(self._previous_floor, self._current_floor)
        round_trip = 0.0 if self.floor == float("inf") else self.floor
        if age > round_trip + self.target:
            if self.rate > 0.0:
                limit = round(self.rate * (round_trip + self.target))
                bytes_limit = round(self.byte_rate * (round_trip + self.target))
            else:  # no throughput measured yet: halve the limits
                limit = self.limit // 2
                bytes_limit = self.bytes_limit // 2
            self.limit = max(MIN_IN_FLIGHT_TUPLES, min(self.limit, limit))
            self.bytes_limit = max(MIN_IN_FLIGHT_BYTES, min(self.bytes_limit, bytes_limit))
        elif waited and age < round_trip + self.target / 2:
            if self.limit < MAX_IN_FLIGHT_TUPLES:
                self.limit = min(MAX_IN_FLIGHT_TUPLES, int(self.limit * _GROWTH) + 1)
            if self.bytes_limit < MAX_IN_FLIGHT_BYTES:
                self.bytes_limit = min(MAX_IN_FLIGHT_BYTES, int(self.bytes_limit * _GROWTH) + 1)


class SendWindow:
    """Thread-safe: one producer (``add``), one sending thread, any thread for ``ack``/``close``."""

    def __init__(
        self,
        batches: int,
        max_bytes: int,
        address: str,
        target_seconds: float = 0.0,
        held: HeldBytes | None = None,
    ) -> None:
        self.batches = batches
        self.max_bytes = max_bytes
        self.address = address
        self.cond = threading.Condition()
        # (sequence, item, size, tuples, monotonic time added: 0.0 without a time limit)
        self._items: deque[tuple[int, Any, int, int, float]] = deque()
        self._bytes = 0
        self._tuples = 0
        #: the worker's ceiling on outgoing bytes: holds ``_bytes`` until they are acknowledged
        #: (None: the window's own bounds only)
        self.held = held
        self._credit = batches
        #: The bytes the receiver's last acknowledgement let this sender have unacknowledged
        #: (0: it grants none; ``max_bytes`` alone bounds the window).
        self.granted_bytes = 0
        #: Sizes the tuples in flight to a time (None: ``target_seconds`` 0, slots and bytes only).
        self.time_limit = InFlightTimeLimit(target_seconds) if target_seconds > 0 else None
        self._waited = False  # an ``add`` waited since the last acknowledgement
        self.next_seq = 1
        #: the newest batch while it may still take more (`add_packed`); 0: none is open
        self._open_seq = 0
        #: Batches that joined an open batch instead of taking a sequence of their own.
        self.coalesced = 0
        self.closed = False
        #: Batches whose ``add`` had to wait for room, and the seconds they waited in all.
        self.waits = 0
        self.wait_seconds = 0.0
        #: Called (under ``cond``) whenever ``next_to_send``'s waiters are woken: a sender that
        #: does not wait on ``cond`` (one on an event loop) hears there may be more to send.
        self.on_change: Callable[[], None] | None = None
        #: The sequence a thread in ``next_to_send`` waits for while its pace runs (0: none). It
        #: wakes by itself when the pace ends, so a new open batch there does not wake it: it
        #: would only find the batch held and wait again.
        self._paced_seq = 0

    def _changed(self) -> None:
        """Wake whoever waits to send (held by ``cond``)."""
        self._paced_seq = 0  # a woken thread looks again: a mark left by one may not hold
        self.cond.notify_all()
        if self.on_change is not None:
            self.on_change()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def unacked_tuples(self) -> int:
        """Tuples in the batches not acknowledged yet."""
        return self._tuples

    @property
    def unacked_bytes(self) -> int:
        """Bytes of the batches not acknowledged yet."""
        return self._bytes

    @property
    def tuple_limit(self) -> int:
        """Unacknowledged tuples allowed now (`InFlightTimeLimit`; unbounded without one)."""
        return MAX_IN_FLIGHT_TUPLES if self.time_limit is None else self.time_limit.limit

    @property
    def time_limited_tuples(self) -> int:
        """The tuple limit the time target set, for the stats (0: none, or nothing measured yet)."""
        limit = self.tuple_limit
        return 0 if limit >= MAX_IN_FLIGHT_TUPLES else limit

    @property
    def time_bytes_limit(self) -> int:
        """Unacknowledged bytes the time target allows now (`InFlightTimeLimit`; unbounded
        without one). Like the tuple limit, the batch that crosses it goes out."""
        return MAX_IN_FLIGHT_BYTES if self.time_limit is None else self.time_limit.bytes_limit

    @property
    def time_limited_bytes(self) -> int:
        """The byte limit the time target set, for the stats (0: none, or not below the window's
        own bytes: time holds nothing back)."""
        limit = self.time_bytes_limit
        return 0 if limit >= self.max_bytes else limit

    @property
    def byte_limit(self) -> int:
        """Unacknowledged bytes allowed now: the window's bytes, or less when the receiver grants
        less (a batch still goes out alone whatever its size)."""
        granted = self.granted_bytes
        return granted if 0 < granted < self.max_bytes else self.max_bytes

    @property
    def full(self) -> bool:
        """``add`` would wait for an acknowledgement now by count or the receiver's credit, in
        batches or in bytes (another batch the size of the newest would not fit, or the bytes the
        time limit allows are in flight): what a sender asks the receiver to acknowledge at once
        for (receivers acknowledge every credit/4 batches). The tuple limit needs no asking: it
        is never below the tuples after which a receiver acknowledges anyway (ACK_TUPLES). The
        byte limit is never below ACK_BYTES either, but a joined batch is counted here at the
        sum of its parts, a few bytes more than the receiver counts it, so it asks."""
        items = self._items
        if len(items) >= min(self.batches, self._credit):
            return True
        bytes_ = self._bytes
        return bool(items) and (bytes_ + items[-1][2] > self.byte_limit or bytes_ >= self.time_bytes_limit)

    @property
    def oldest(self) -> int:
        """Sequence of the oldest unacknowledged batch (``next_seq`` when none)."""
        with self.cond:
            return self._items[0][0] if self._items else self.next_seq

    def add(self, make_item: Callable[[int], Any], size: int, tuples: int = 0) -> int:
        """Append the item ``make_item(sequence)`` of ``size`` bytes holding ``tuples`` tuples;
        blocks while full. Returns its sequence."""
        return self._append(make_item, size, tuples, False)

    def _append(self, make_item: Callable[[int], Any], size: int, tuples: int, opens: bool) -> int:
        """``add``; with ``opens`` the batch stays open to joins (`add_packed`)."""
        with self.cond:
            if self._must_wait(size, tuples):
                # timed only when it waits: a batch that finds room costs no clock read
                started = time.monotonic()
                self._waited = True
                while self._must_wait(size, tuples):
                    self.cond.wait()
                self.waits += 1
                self.wait_seconds += time.monotonic() - started
            if self.closed:
                raise TransportError(f"connection to {self.address} is closed; batch not accepted")
            seq = self.next_seq
            self.next_seq += 1
            # only the newest batch may take more: open until the sending thread takes it
            self._open_seq = seq if opens else 0
            added = 0.0 if self.time_limit is None else time.monotonic()
            self._items.append((seq, make_item(seq), size, tuples, added))
            self._bytes += size
            self._tuples += tuples
            if self.held is not None:
                self.held.hold(size)
            if opens and seq == self._paced_seq:
                # the sender would wake, find it held open and wait for its pace again
                if self.on_change is not None:
                    self.on_change()
            else:
                self._changed()
            return seq

    def add_packed(self, packed: bytes, tuples: int, most_bytes: int) -> int:
        """``add`` a packed batch (`pack_within`) that is its own window item, joining it to the
        open batch when there is one and the two fit ``most_bytes`` and `MOST_COALESCED_TUPLES`
        (and the window's bytes and time limits: joining never passes what ``add`` would wait
        for). Returns the sequence it went out under."""
        size = len(packed)
        with self.cond:
            if self._open_seq and self._items and not self.closed:
                seq, item, held, held_tuples, added = self._items[-1]
                if (
                    held + size <= most_bytes
                    and held_tuples + tuples <= MOST_COALESCED_TUPLES
                    and self._bytes + size <= self.byte_limit
                    and self._tuples < self.tuple_limit
                    and self._bytes < self.time_bytes_limit
                ):
                    joined = join_packed(item, packed)
                    self._items[-1] = (seq, joined, held + size, held_tuples + tuples, added)
                    self._bytes += size
                    self._tuples += tuples
                    if self.held is not None:
                        self.held.hold(size)
                    self.coalesced += 1
                    return seq
            return self._append(lambda _: packed, size, tuples, True)

    def _must_wait(self, size: int, tuples: int) -> bool:
        """``add`` of ``size`` bytes waits: the window is open and holds something, and one more
        batch would pass the count, the receiver's credit, the bytes (the window's or the
        receiver's grant), or what is in flight already reaches the tuples or bytes the time
        limit allows (held by ``cond``). The time limits let the batch that crosses them go: a
        limit below one large batch must not turn the link into stop-and-wait, each batch sent
        only once the previous one is acknowledged."""
        return (
            not self.closed
            and bool(self._items)
            and (
                len(self._items) >= min(self.batches, self._credit)
                or self._bytes + size > self.byte_limit
                or self._tuples >= self.tuple_limit
                or self._bytes >= self.time_bytes_limit
            )
        )

    def ack(self, sequence: int, credit: int = 0, granted_bytes: int = 0) -> int:
        """Release every batch up to ``sequence``; returns how many were released. ``credit`` (0:
        unchanged) and ``granted_bytes`` (0: no grant) are what the receiver allows from now on."""
        released = 0
        released_tuples = 0
        released_bytes = 0
        newest_added = 0.0
        with self.cond:
            while self._items and self._items[0][0] <= sequence:
                _, _, size, tuples, newest_added = self._items.popleft()
                released_bytes += size
                released_tuples += tuples
                released += 1
            self._bytes -= released_bytes
            self._tuples -= released_tuples
            if released_bytes and self.held is not None and not self.closed:
                self.held.release(released_bytes)
            if credit:
                self._credit = credit
            self.granted_bytes = granted_bytes
            if released and self.time_limit is not None:
                now = time.monotonic()
                self.time_limit.acknowledged(
                    released_tuples, now - newest_added, self._waited, now, released_bytes
                )
                self._waited = False
            self._paced_seq = 0
            self.cond.notify_all()
        return released

    def get(self, position: int) -> tuple[int, Any] | None:
        """(position, item) to send at ``position`` (skipping what was acknowledged meanwhile),
        or None when nothing is queued there yet. Never blocks."""
        with self.cond:
            if not self._items or position >= self.next_seq:
                return None
            position = max(position, self._items[0][0])
            if position == self._open_seq:
                self._open_seq = 0  # taken to be sent: what comes next is a batch of its own
            return position, self._items[position - self._items[0][0]][1]

    def held_open(self, position: int) -> bool:
        """The batch at ``position`` is the open one: it may still take more (``add_packed``)."""
        return self._open_seq == position

    def rewind(self, position: int) -> tuple[int, int]:
        """(where to send next, batches that will be sent again): the oldest unacknowledged
        batch, for a sender that was at ``position`` when it learned the peer missed some."""
        oldest = self.oldest
        return oldest, max(0, position - oldest)

    def next_to_send(
        self, position: int, alive: Callable[[], bool], timeout: float | None = None, hold_until: float = 0.0
    ) -> tuple[int, Any] | None:
        """Like ``get`` but waits for a batch at ``position``; None once ``alive()`` is false or
        ``timeout`` seconds (when given) passed with nothing to send. An open batch at
        ``position`` is kept back until ``hold_until`` (``time.monotonic``), taking what comes
        meanwhile; a batch behind it, or one that can no longer grow, goes at once."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            while alive():
                if hold_until and (self._open_seq == position or position >= self.next_seq):
                    now = time.monotonic()
                    held = hold_until - now
                    if held > 0:
                        if deadline is not None and position >= self.next_seq:
                            if deadline <= now:
                                return None  # nothing to send: the caller's probe is due
                            held = min(held, deadline - now)
                        # ``add`` of a batch behind it (or of one at ``position`` that cannot
                        # grow) wakes this; an open one at ``position`` waits for the pace
                        self._paced_seq = position
                        try:
                            self.cond.wait(held)
                        finally:
                            self._paced_seq = 0
                        continue
                found = self.get(position)
                if found is not None:
                    return found
                if deadline is None:
                    self.cond.wait()
                    continue
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self.cond.wait(remaining)
            return None

    def wake(self) -> None:
        """Wake threads waiting in ``next_to_send`` (their ``alive`` may have changed)."""
        with self.cond:
            self._changed()

    def abort(self) -> None:
        """Close at once: a blocked ``add`` raises, and ``drain`` waits for nothing."""
        with self.cond:
            self._close()

    def _close(self) -> None:
        """Take nothing more; the worker holds the unacknowledged bytes no longer (they are
        counted lost by the caller, from ``unacked_tuples``). Held by ``cond``."""
        if not self.closed and self.held is not None and self._bytes:
            self.held.release(self._bytes)
        self.closed = True
        self._changed()

    def drain(self, timeout: float) -> int:
        """Wait up to ``timeout`` for every batch to be acknowledged, then close the window.

        Returns how many batches were still unacknowledged (given up: counted by the caller).
        """
        deadline = time.monotonic() + timeout
        with self.cond:
            self._open_seq = 0  # nothing more will join: a batch held for more goes now
            self._changed()
            while self._items and not self.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self.cond.wait(min(remaining, 0.1))
            self._close()
            return len(self._items)


class WindowedConnection:
    """What every windowed network connection shares: identity, limits, window, counters.

    Subclasses say what one window item is (``_item``: a protobuf message, a frame, ...) and
    run the thread that sends the window and applies acknowledgements.
    """

    def __init__(
        self,
        settings: TransportSettings,
        topology_id: str,
        address: str,
        on_congestion: OnCongestion | None = None,
        held: HeldBytes | None = None,
    ) -> None:
        self.address = address
        self.topology_id = topology_id
        self.sender = settings.worker_index
        self.session = random.getrandbits(63) + 1  # sequences restart with every connection
        self.max_payload = settings.max_message_bytes
        self.close_timeout = settings.close_timeout_seconds
        self.window = SendWindow(
            settings.window_batches, settings.window_bytes, address, settings.window_target_seconds, held
        )
        #: Hears (this connection, the peer's congested tasks) from every acknowledgement.
        self.on_congestion = on_congestion
        self.state = "CONNECTING"
        self.channel_state = "CONNECTING"
        self.sent_batches = 0
        self.sent_tuples = 0
        self.sent_bytes = 0
        self.resent_batches = 0
        self.reconnects = 0
        self.retargets = 0
        self.lost_on_close = 0
        self.unknown_tasks = 0
        self.traced = tracing.tracer() is not None  # decided once: no per-batch check when off
        #: batches join the open one (messaging.coalesce.ms 0: a message per batch, always)
        self.coalescing = self.coalesces and settings.coalesce_seconds > 0

    def link_state(self) -> str:
        """The state of the link underneath (READY when it can carry batches now)."""
        return self.channel_state

    def stats(self) -> ConnectionStats:
        """A snapshot of the counters (each read once; any thread)."""
        return ConnectionStats(
            address=self.address,
            state=self.state,
            channel_state=self.link_state(),
            sent_batches=self.sent_batches,
            sent_tuples=self.sent_tuples,
            sent_bytes=self.sent_bytes,
            unacked_batches=len(self.window),
            unacked_tuples=self.window.unacked_tuples,
            unacked_bytes=self.window.unacked_bytes,
            window_waits=self.window.waits,
            window_wait_seconds=self.window.wait_seconds,
            window_limit_tuples=self.window.time_limited_tuples,
            window_limit_bytes=self.window.time_limited_bytes,
            granted_bytes=self.window.granted_bytes,
            resent_batches=self.resent_batches,
            reconnects=self.reconnects,
            retargets=self.retargets,
            lost_on_close=self.lost_on_close,
            unknown_tasks=self.unknown_tasks,
            coalesced_batches=self.window.coalesced,
        )

    #: ``_item`` is the packed batch itself, so a batch may join the open one
    #: (`SendWindow.add_packed`); a transport that frames its items otherwise leaves it False
    coalesces = False

    def _item(self, sequence: int, packed: bytes) -> Any:
        """The window item for one packed batch with ``sequence``."""
        raise NotImplementedError

    def _traced_item(self, sequence: int, packed: bytes, carrier: dict[str, str]) -> Any:
        """``_item`` carrying W3C trace context, where the transport's items have room for it."""
        return self._item(sequence, packed)

    def send(self, batch: list[TaskMessage]) -> None:
        """Queue ``batch`` for the peer; blocks while the window is full. Never drops."""
        # sent inside a transfer span (tracing on): its context travels with every batch
        carrier = tracing.current_carrier() if self.traced else None
        sent = 0
        for packed, tuples in pack_within(batch, self.max_payload):
            sent += tuples
            self.sent_bytes += len(packed)
            if carrier:
                traced = partial(self._traced_item, packed=packed, carrier=carrier)
                self.window.add(traced, len(packed), tuples)
                continue
            if self.coalescing:
                self.window.add_packed(packed, tuples, self.max_payload)
                continue
            self.window.add(lambda seq, packed=packed: self._item(seq, packed), len(packed), tuples)  # type: ignore[misc]
        self.sent_tuples += sent  # counted once, by pack_within

    def abort(self) -> None:
        """Give up on the peer (the worker halts): what is unacknowledged is counted at ``close``."""
        self.window.abort()

    def _drain_window(self) -> None:
        """Wait for every batch to be acknowledged (up to the close timeout); count what was not."""
        if self.window.drain(self.close_timeout):
            # Not silent: what the peer never acknowledged is counted and logged.
            self.lost_on_close = self.window.unacked_tuples
            log.warning(
                "connection to %s closed with %d unacknowledged tuple(s) (peer unreachable)",
                self.address,
                self.lost_on_close,
            )
