"""Ring buffer benchmark: tuplemesh's disruptor ring vs the standard library's queues.

Every consumer does the same per-item work inline (adds the item to a total), so the figures
compare the queues, not the handlers. Baselines: ``queue.Queue(maxsize=capacity)``,
``queue.SimpleQueue`` (unbounded C code) and a ``deque`` guarded by a ``Condition``.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from bench.records import Record, best_rate
from tuplemesh.disruptor import BatchEventProcessor, RingBuffer

CAPACITY = 1024
END = -1


# -- consumers --------------------------------------------------------------------------------
class _Sum:
    """Ring consumer: the same inline work as the baselines' loops."""

    def __init__(self, expect_ends: int, batches: bool = False) -> None:
        self.total = 0
        self.ends = expect_ends
        self.done = threading.Event()
        self.batches = batches

    def on_event(self, event: Any, sequence: int, end_of_batch: bool) -> None:
        if self.batches:
            for x in event:
                if x == END:
                    self.ends -= 1
                    if not self.ends:
                        self.done.set()
                else:
                    self.total += x
        elif event == END:
            self.ends -= 1
            if not self.ends:
                self.done.set()
        else:
            self.total += event


def _queue_consumer(get: Callable[[], Any], ends: int, batches: bool) -> Callable[[], None]:
    def consume() -> None:
        total = 0
        remaining = ends
        while remaining:
            item = get()
            if batches:
                for x in item:
                    if x == END:
                        remaining -= 1
                    else:
                        total += x
            elif item == END:
                remaining -= 1
            else:
                total += item

    return consume


class _DequeQueue:
    """A bounded deque with one Condition: the textbook hand-written queue."""

    def __init__(self, capacity: int) -> None:
        self.items: deque[Any] = deque()
        self.capacity = capacity
        self.cond = threading.Condition()

    def put(self, item: Any) -> None:
        with self.cond:
            while len(self.items) >= self.capacity:
                self.cond.wait()
            self.items.append(item)
            self.cond.notify()

    def get(self) -> Any:
        with self.cond:
            while not self.items:
                self.cond.wait()
            item = self.items.popleft()
            self.cond.notify()
            return item


def _make_baselines() -> dict[str, Callable[[], Any]]:
    return {
        f"queue.Queue(maxsize={CAPACITY})": lambda: queue.Queue(maxsize=CAPACITY),
        "queue.SimpleQueue": queue.SimpleQueue,
        f"deque+Condition({CAPACITY})": lambda: _DequeQueue(CAPACITY),
    }


# -- cases --------------------------------------------------------------------------------------
def _produce(put: Callable[[Any], Any], n: int, batch: int, as_lists: bool, put_many: Any = None) -> None:
    if batch == 1:
        for i in range(n):
            put(i)
        put(END)
        return
    chunk = list(range(batch))
    for _ in range(n // batch):
        if as_lists:
            put(chunk)
        else:
            put_many(chunk)
    if as_lists:
        put([END])
    else:
        put(END)


def _ring_run(n: int, producers: int, batch: int, as_lists: bool) -> Callable[[], int]:
    def run() -> int:
        if producers == 1:
            ring: RingBuffer[Any] = RingBuffer.single_producer(CAPACITY)
        else:
            ring = RingBuffer.multi_producer(CAPACITY)
        handler = _Sum(producers, batches=as_lists)
        processor = BatchEventProcessor(ring, ring.new_barrier(), handler)
        ring.add_gating_sequences(processor.sequence)
        processor.start()
        per = n // producers
        threads = [
            threading.Thread(target=_produce, args=(ring.put, per, batch, as_lists, ring.put_many))
            for _ in range(producers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        handler.done.wait()
        processor.halt()
        processor.join()
        return per * producers

    return run


def _queue_run(
    make: Callable[[], Any], n: int, producers: int, batch: int, as_lists: bool
) -> Callable[[], int]:
    def run() -> int:
        q = make()
        consumer = threading.Thread(target=_queue_consumer(q.get, producers, as_lists))
        consumer.start()
        per = n // producers
        if batch > 1 and not as_lists:
            raise ValueError("queues have no batch put")
        threads = [
            threading.Thread(target=_produce, args=(q.put, per, batch, as_lists)) for _ in range(producers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        consumer.join()
        return per * producers

    return run


def _pipeline_ring(n: int) -> Callable[[], int]:
    """Producer -> stage 1 -> stage 2 -> consumer, one ring between each pair, one item per put."""

    class Stage:
        def __init__(self, out: RingBuffer[Any]) -> None:
            self.put = out.put

        def on_event(self, event: Any, sequence: int, end_of_batch: bool) -> None:
            self.put(event)

    def run() -> int:
        rings: list[RingBuffer[Any]] = [RingBuffer.single_producer(CAPACITY) for _ in range(3)]
        sink = _Sum(1)
        processors = [
            BatchEventProcessor(rings[0], rings[0].new_barrier(), Stage(rings[1])),
            BatchEventProcessor(rings[1], rings[1].new_barrier(), Stage(rings[2])),
            BatchEventProcessor(rings[2], rings[2].new_barrier(), sink),
        ]
        for ring, p in zip(rings, processors, strict=True):
            ring.add_gating_sequences(p.sequence)
            p.start()
        _produce(rings[0].put, n, 1, False)
        sink.done.wait()
        for p in processors:
            p.halt()
        return n

    return run


def _pipeline_queue(make: Callable[[], Any], n: int) -> Callable[[], int]:
    def run() -> int:
        qs = [make() for _ in range(3)]

        def stage(src: Any, dst: Any) -> None:
            get, put = src.get, dst.put
            while True:
                item = get()
                put(item)
                if item == END:
                    return

        threads = [
            threading.Thread(target=stage, args=(qs[0], qs[1])),
            threading.Thread(target=stage, args=(qs[1], qs[2])),
            threading.Thread(target=_queue_consumer(qs[2].get, 1, False)),
        ]
        for t in threads:
            t.start()
        _produce(qs[0].put, n, 1, False)
        for t in threads:
            t.join()
        return n

    return run


def run(quick: bool = False) -> list[Record]:
    n = 200_000 if quick else 1_000_000
    repeats = 1 if quick else 3
    baselines = _make_baselines()
    records = []

    def case(
        name: str,
        ring_run: Callable[[], int],
        base_runs: dict[str, Callable[[], int]],
        target: str,
        measured: dict[str, float] | None = None,
    ) -> None:
        """Measure the ring and its baselines; ``measured`` adds baselines already run this run."""
        rate = best_rate(ring_run, repeats)
        rates = {label: best_rate(fn, repeats) for label, fn in base_runs.items()}
        rates.update(measured or {})
        records.append(Record("ring", name, "items", rate, rates, target))

    case(
        "1P-1C one item per publish",
        _ring_run(n, 1, 1, False),
        {label: _queue_run(make, n, 1, 1, False) for label, make in baselines.items()},
        ">= 10x queue.Queue(1024), >= 1.0x SimpleQueue",
    )
    simple_one = {"queue.SimpleQueue (one item per put)": records[-1].baselines["queue.SimpleQueue"]}
    case("1P-1C put_many(100 slots)", _ring_run(n, 1, 100, False), {}, ">= 2x SimpleQueue", simple_one)
    case(
        "1P-1C one slot = list of 100 (ring of batches)",
        _ring_run(n, 1, 100, True),
        {f"{label} (lists of 100)": _queue_run(make, n, 1, 100, True) for label, make in baselines.items()},
        "",
        simple_one,
    )
    case(
        "3P-1C put_many(100 slots)",
        _ring_run(n, 3, 100, False),
        {"queue.SimpleQueue 3P (one item per put)": _queue_run(queue.SimpleQueue, n, 3, 1, False)},
        ">= 1.0x SimpleQueue with 3 producers",
    )
    case(
        "3P-1C one slot = list of 100",
        _ring_run(n, 3, 100, True),
        {"queue.SimpleQueue 3P (lists of 100)": _queue_run(queue.SimpleQueue, n, 3, 100, True)},
        "",
    )
    case(
        "3-stage pipeline one item per publish",
        _pipeline_ring(n // 2),
        {label: _pipeline_queue(make, n // 2) for label, make in baselines.items()},
        "",
    )
    return records
