"""Per-task backpressure (Storm 2's BackPressureStatus, carried on Transfer acks).

Receiving side: a task is *congested* while its executor's inbox has more than
``topology.backpressure.watermark`` of the slots it may fill in use (its limit, which follows
``topology.backpressure.target.ms``). Every Transfer ack carries the
receiver's congested tasks, and a receiver sends an ack at once when that set changes.

Sending side: `CongestionMap` remembers, per peer, which of its tasks are congested. An executor
about to deliver a tuple to a congested remote task flushes its other buffers and waits until
the task is clear, so only the producers feeding the slow task slow down. Everything else on the
worker, including the shared connection to that peer, keeps flowing: the slow inbox never fills
to the point where it would block the receive path. A congestion report is a lease of
``LEASE`` seconds: a sender with nothing else to send to that peer gets no more acks, so it
tries again when the lease ends, and the ack of that batch renews or clears it.

Why per task and not Flink-style credits per channel: tuplemesh multiplexes every task pair
between two workers on one stream; a credit per (sender task, receiver task) would need a
window per pair, whereas one set of congested tasks per peer is a few integers per ack.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from tuplemesh.disruptor import RingBuffer

__all__ = ["LEASE", "CongestionMap", "HoldCounts", "above_watermark", "congested_tasks", "hold_while"]

LEASE = 0.2  # seconds a congestion report holds without a renewal


class HoldCounts(Protocol):
    """Where a producer's holds on congested tasks are counted (an executor's outbox)."""

    backpressure_holds: int
    backpressure_hold_seconds: float


def hold_while(
    blocked: Callable[[float], bool],
    look: float,
    held: HoldCounts | None = None,
    interrupt: Callable[[], bool] | None = None,
) -> None:
    """Sleep ``look`` at a time while ``blocked(now)`` (monotonic) holds, or until ``interrupt``
    returns True. A hold (one that waits at all) is counted in ``held`` when it starts and its
    time added as it goes, so a long hold shows at once and the counts never go down."""
    last = 0.0
    while True:
        now = time.monotonic()
        if held is not None and last:
            held.backpressure_hold_seconds += now - last
        if not blocked(now) or (interrupt is not None and interrupt()):
            return
        if held is not None and not last:
            held.backpressure_holds += 1
        last = now
        time.sleep(look)


def above_watermark(ring: RingBuffer[Any], watermark: float) -> bool:
    """More than ``watermark`` of the slots producers may fill now (fewer than the ring's when
    its queue time is bounded) are in use: its tasks are congested."""
    return ring.buffer_size - ring.remaining_capacity() > int(ring.sequencer.limit * watermark)


def congested_tasks(
    inbox_of_task: Mapping[int, RingBuffer[Any]], watermark: float
) -> Callable[[], list[int]]:
    """A function listing the tasks whose inbox is above ``watermark`` (a fraction of its slots)."""
    by_ring: dict[int, tuple[RingBuffer[Any], list[int]]] = {}
    for task, ring in sorted(inbox_of_task.items()):
        by_ring.setdefault(id(ring), (ring, []))[1].append(task)
    groups = list(by_ring.values())

    def current() -> list[int]:
        out: list[int] = []
        for ring, tasks in groups:
            if above_watermark(ring, watermark):
                out.extend(tasks)
        return out

    return current


class CongestionMap:
    """Congested remote tasks, as reported by each peer. Updated by connection threads, read by
    executor threads: readers see an immutable dict that updates replace (no lock on reads)."""

    def __init__(self, lease: float = LEASE) -> None:
        self.lease = lease
        self.blocked: dict[int, float] = {}  # task -> lease end (monotonic)
        self._by_peer: dict[Any, frozenset[int]] = {}
        self._lock = threading.Lock()

    def report(self, peer: Any, tasks: Iterable[int]) -> None:
        """``peer``'s full set of congested tasks right now (from one of its acks)."""
        now_set = frozenset(tasks)
        with self._lock:
            if not now_set and not self._by_peer.get(peer):
                return  # the common case: nothing congested before or now
            until = time.monotonic() + self.lease
            blocked = {t: e for t, e in self.blocked.items() if t not in self._by_peer.get(peer, ())}
            for task in now_set:
                blocked[task] = until
            self._by_peer[peer] = now_set
            self.blocked = blocked

    def wait(
        self, task: int, held: HoldCounts | None = None, interrupt: Callable[[], bool] | None = None
    ) -> None:
        """Block while ``task`` is congested (its lease not over and not cleared), or until
        ``interrupt`` returns True; counted in ``held`` (`hold_while`)."""

        def congested(now: float) -> bool:
            until = self.blocked.get(task)
            return until is not None and now < until

        hold_while(congested, 0.001, held, interrupt)
