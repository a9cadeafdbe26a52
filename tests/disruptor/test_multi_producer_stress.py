"""Multi-producer invariants: nothing lost, duplicated or reordered per producer."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tuplemesh.disruptor import BatchEventProcessor, RingBuffer, make_wait_strategy


def run_producers(
    producers: int, per_producer: int, batch: int, capacity: int, strategy: str
) -> list[tuple[int, int]]:
    ring: RingBuffer[tuple[int, int]] = RingBuffer.multi_producer(
        capacity, wait_strategy=make_wait_strategy(strategy, 0.01)
    )
    received: list[tuple[int, int]] = []
    total = producers * per_producer
    done = threading.Event()

    class Collect:
        def on_event(self, event, sequence, end_of_batch):
            received.append(event)
            if len(received) == total:
                done.set()

    processor = BatchEventProcessor(ring, ring.new_barrier(), Collect())
    ring.add_gating_sequences(processor.sequence)
    processor.start()

    def produce(pid: int) -> None:
        i = 0
        while i < per_producer:
            n = min(batch, per_producer - i)
            if n == 1:
                ring.put((pid, i))
            else:
                ring.put_many([(pid, i + k) for k in range(n)])
            i += n

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert done.wait(60), f"received {len(received)} of {total}"
    processor.halt()
    assert processor.join(5)
    return received


def check_per_producer_order(received, producers, per_producer):
    assert len(received) == producers * per_producer
    assert len(set(received)) == len(received), "duplicates"
    for pid in range(producers):
        mine = [i for p, i in received if p == pid]
        assert mine == list(range(per_producer)), f"producer {pid} lost or reordered"


@given(
    producers=st.integers(min_value=2, max_value=4),
    per_producer=st.integers(min_value=1, max_value=400),
    batch=st.integers(min_value=1, max_value=16),
    capacity=st.sampled_from([4, 16, 64]),
    strategy=st.sampled_from(["blocking", "sleeping", "yielding", "timeout-blocking"]),
)
def test_multi_producer_invariants(producers, per_producer, batch, capacity, strategy):
    batch = min(batch, capacity)
    received = run_producers(producers, per_producer, batch, capacity, strategy)
    check_per_producer_order(received, producers, per_producer)


@pytest.mark.stress
def test_multi_producer_stress_large():
    received = run_producers(3, 50_000, 50, 256, "blocking")
    check_per_producer_order(received, 3, 50_000)
