"""Outbox: per-destination buffers, batch boundaries, flushes, serialization once per emit."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tuplemesh.core.budget import ByteBudget
from tuplemesh.core.markers import Batch
from tuplemesh.core.outbox import Outbox
from tuplemesh.disruptor import RingBuffer
from tuplemesh.errors import AlertError, MessageTooLargeError
from tuplemesh.serialization import ROWS_HEADER_BYTES, ROWS_MARKER, load_serializer, rows_count
from tuplemesh.topology import AnchoredTuple, Fields, Tuple
from tuplemesh.transport.framing import pack_within

FIELDS = Fields(["word"])


class Fixed:
    """A chooser that always picks the same tasks."""

    def __init__(self, *tasks: int) -> None:
        self.tasks = tasks

    def choose(self, values: Any) -> tuple[int, ...]:
        return self.tasks


def published(ring: RingBuffer[Any]) -> list[Any]:
    return [ring.get(seq) for seq in range(ring.cursor + 1)]


def make(
    batch_size: int = 3,
    send_capacity: int = 100,
    max_payload: int = 1 << 20,
    budget: ByteBudget | None = None,
):
    """Tasks 1, 2 share one local inbox, task 3 has another; tasks 4, 5 run on worker 7."""
    inbox_a: RingBuffer[Any] = RingBuffer.multi_producer(16)
    inbox_b: RingBuffer[Any] = RingBuffer.multi_producer(16)
    transfer: RingBuffer[Any] = RingBuffer.multi_producer(16)
    outbox = Outbox(
        local_inboxes={1: inbox_a, 2: inbox_a, 3: inbox_b},
        remote_workers={4: 7, 5: 7},
        transfer_ring=transfer,
        serializer=load_serializer("msgpack"),
        batch_size=batch_size,
        send_capacity=send_capacity,
        max_payload=max_payload,
        budget=budget,
    )
    return outbox, inbox_a, inbox_b, transfer


def emit(outbox: Outbox, word: str, *tasks: int) -> None:
    outbox.deliver(9, "spout", "default", 0, FIELDS, [word], [Fixed(*tasks)])


def test_a_local_buffer_is_published_exactly_at_the_batch_size() -> None:
    outbox, inbox_a, inbox_b, transfer = make(batch_size=3)
    emit(outbox, "a", 1)
    emit(outbox, "b", 2)
    assert published(inbox_a) == [] and outbox.pending == 2
    emit(outbox, "c", 1)  # third tuple for the same inbox (tasks 1 and 2 share it)
    [batch] = published(inbox_a)
    assert isinstance(batch, Batch) and batch.stamp > 0
    assert [(task, tup.values) for task, tup in batch] == [(1, ["a"]), (2, ["b"]), (1, ["c"])]
    assert isinstance(batch[0][1], Tuple) and batch[0][1].source_task == 9
    assert outbox.pending == 0 and outbox.delivered == 3
    assert published(inbox_b) == [] and published(transfer) == []


def test_flush_publishes_every_partial_buffer_once() -> None:
    outbox, inbox_a, inbox_b, transfer = make(batch_size=10)
    emit(outbox, "x", 1, 3, 4)
    assert outbox.pending == 3
    outbox.flush()
    assert [len(b) for b in published(inbox_a)] == [1]
    assert [len(b) for b in published(inbox_b)] == [1]
    [(worker, batch, no_budget)] = published(transfer)
    assert no_budget == 0  # no ceiling: nothing counted
    assert worker == 7 and [task for task, _ in batch] == [4]
    assert outbox.pending == 0
    outbox.flush()  # nothing held: nothing more published
    assert inbox_a.cursor == 0 and inbox_b.cursor == 0 and transfer.cursor == 0


def test_one_local_tuple_and_one_payload_per_emit_whatever_the_fan_out() -> None:
    outbox, inbox_a, _, transfer = make(batch_size=10)
    emit(outbox, "x", 1, 2, 4, 5)
    outbox.flush()
    [batch] = published(inbox_a)
    assert batch[0][1] is batch[1][1]  # shared, unserialized
    [(_, remote, _)] = published(transfer)
    assert [task for task, _ in remote] == [4, 5]
    assert remote[0][1] is remote[1][1] and isinstance(remote[0][1], bytes)
    assert load_serializer("msgpack").deserialize(remote[0][1]) == (9, 0, ["x"], None)


def test_the_whole_outbox_flushes_at_the_send_capacity() -> None:
    outbox, inbox_a, inbox_b, transfer = make(batch_size=10, send_capacity=4)
    emit(outbox, "a", 1, 3)
    emit(outbox, "b", 4)
    assert outbox.pending == 3 and published(inbox_a) == []
    emit(outbox, "c", 3)  # 4 held: everything goes out
    assert outbox.pending == 0
    assert [len(b) for b in published(inbox_a)] == [1]
    assert [len(b) for b in published(inbox_b)] == [2]
    assert len(published(transfer)) == 1


def test_deliver_one_carries_its_own_anchors() -> None:
    outbox, inbox_a, _, transfer = make(batch_size=10)
    outbox.deliver_one(1, 9, "spout", "default", 0, FIELDS, ["a"], {11: 22})
    outbox.deliver_one(4, 9, "spout", "default", 0, FIELDS, ["a"], {11: 33})
    outbox.flush()
    [[(_, tup)]] = published(inbox_a)
    assert isinstance(tup, AnchoredTuple) and tup.anchors == {11: 22} and tup.ack_val == 0
    [(_, [(_, payload)], _)] = published(transfer)
    assert load_serializer("msgpack").deserialize(payload) == (9, 0, ["a"], {11: 33})


def test_a_remote_tuple_over_the_limit_raises_before_anything_is_buffered() -> None:
    outbox, _, _, _ = make(max_payload=64)
    with pytest.raises(MessageTooLargeError, match="'spout' emitted a"):
        emit(outbox, "x" * 100, 4)
    assert outbox.pending == 0 and outbox.delivered == 0


def test_discard_counts_what_a_halted_destination_refused_and_what_was_still_held() -> None:
    outbox, inbox_a, inbox_b, transfer = make(batch_size=10)
    emit(outbox, "a", 4, 5)  # two for the transfer ring
    emit(outbox, "b", 3)
    transfer.sequencer.alert()  # the transfer path halted
    with pytest.raises(AlertError):
        outbox.flush()
    assert [len(b) for b in published(inbox_b)] == [1]  # local inboxes go first and took theirs
    assert outbox.discard() == 2  # the remote batch the halted ring refused
    assert outbox.pending == 0
    transfer.sequencer.clear_alert()
    outbox.flush()
    assert published(transfer) == [] and published(inbox_a) == []


class ByWord:
    """Routes ["a"] to task 1 (local), ["b"] to 4 and ["c"] to 5 (both on worker 7)."""

    TASKS = {"a": (1,), "b": (4,), "c": (5,)}

    def choose(self, values: Any) -> tuple[int, ...]:
        return self.TASKS[values[0]]


def deliver_many(outbox: Outbox, words: str) -> None:
    outbox.deliver_many(9, "spout", "default", 0, FIELDS, [[w] for w in words], [ByWord()])


def rows_of(payload: bytes) -> list[list[Any]]:
    assert payload[0] == ROWS_MARKER
    source_task, stream_id, rows = load_serializer("msgpack").deserialize_rows(payload[ROWS_HEADER_BYTES:])
    assert (source_task, stream_id) == (9, 0) and rows_count(payload) == len(rows)
    return rows


def test_deliver_many_sends_one_entry_per_local_task_and_one_rows_payload_per_remote_task() -> None:
    outbox, inbox_a, _, transfer = make(batch_size=100)
    deliver_many(outbox, "abcbab")
    assert outbox.pending == 6 and outbox.delivered == 6
    outbox.flush()
    [(worker, remote, _)] = published(transfer)
    assert worker == 7 and [task for task, _ in remote] == [4, 5]
    assert rows_of(remote[0][1]) == [["b"], ["b"], ["b"]]
    assert load_serializer("msgpack").deserialize(remote[1][1]) == (9, 0, ["c"], None)  # one row: a tuple
    [batch] = published(inbox_a)  # one entry holding both tuples for task 1
    [(task, tuples)] = batch
    assert task == 1 and [tup.values for tup in tuples] == [["a"], ["a"]]
    assert outbox.pending == 0


def test_deliver_many_counts_rows_in_the_batch_size_and_the_pending_tuples() -> None:
    outbox, _, _, transfer = make(batch_size=4)
    deliver_many(outbox, "bbb")  # one payload entry holding 3 tuples: under the batch size
    assert published(transfer) == [] and outbox.pending == 3
    deliver_many(outbox, "b")  # 4 tuples for worker 7 now: published
    [(_, remote, _)] = published(transfer)
    assert [len(rows_of(p)) if p[0] == ROWS_MARKER else 1 for _, p in remote] == [3, 1]
    assert outbox.pending == 0 and outbox.delivered == 4


def test_deliver_many_splits_a_rows_payload_over_the_limit() -> None:
    outbox, _, _, transfer = make(batch_size=100, max_payload=60)
    outbox.deliver_many(9, "spout", "default", 0, FIELDS, [["b" * 20]] * 4, [Fixed(4)])
    outbox.flush()
    [(_, remote, _)] = published(transfer)
    assert all(len(p) <= 60 for _, p in remote)
    assert sum(len(rows_of(p)) if p[0] == ROWS_MARKER else 1 for _, p in remote) == 4
    assert outbox.pending == 0 and outbox.delivered == 4


def test_deliver_many_delivers_nothing_when_one_row_cannot_go_out() -> None:
    outbox, inbox_a, _, transfer = make(batch_size=100, max_payload=64)
    rows = [["a"], ["b"], ["b" + "x" * 100]]
    with pytest.raises(MessageTooLargeError):
        outbox.deliver_many(9, "spout", "default", 0, FIELDS, rows, [Fixed(1, 4)])
    assert outbox.pending == 0 and outbox.delivered == 0
    outbox.flush()
    assert published(inbox_a) == [] and published(transfer) == []


def test_a_refused_rows_batch_stays_counted_once_and_later_batches_balance() -> None:
    outbox, _, _, transfer = make(batch_size=100)
    deliver_many(outbox, "bbb")
    transfer.sequencer.alert()
    with pytest.raises(AlertError):
        outbox.flush()
    transfer.sequencer.clear_alert()
    deliver_many(outbox, "bb")
    outbox.flush()  # the two new tuples go out; the three refused ones are still held
    assert outbox.pending == 3
    assert outbox.discard() == 3 and outbox.pending == 0


def test_deliver_many_counts_a_local_list_entry_as_its_tuples() -> None:
    outbox, inbox_a, _, _ = make(batch_size=4)
    deliver_many(outbox, "aaa")
    assert published(inbox_a) == [] and outbox.pending == 3
    deliver_many(outbox, "a")  # a single tuple goes in as itself
    [batch] = published(inbox_a)
    assert [len(item) if isinstance(item, list) else item.values for _, item in batch] == [3, ["a"]]
    assert outbox.pending == 0 and outbox.delivered == 4


def test_batches_for_other_workers_take_their_bytes_from_the_budget_and_wait_past_it() -> None:
    budget = ByteBudget(100)
    outbox, _, _, transfer = make(batch_size=10, budget=budget)
    emit(outbox, "x" * 60, 4)
    outbox.flush()
    [(worker, [(task, payload)], nbytes)] = published(transfer)
    # counted as packed for the wire, framing included at most: a send window holds no more
    assert (worker, task, nbytes, budget.used) == (7, 4, len(payload) + 11, len(payload) + 11)
    [(packed, _)] = pack_within([(task, payload)], 1 << 20)
    assert len(packed) <= nbytes
    emit(outbox, "y" * 60, 5)
    blocked = threading.Thread(target=outbox.flush)
    blocked.start()  # 2 x ~75 bytes > 100: this flush waits for the transfer thread to give back
    blocked.join(0.2)
    assert blocked.is_alive() and transfer.cursor == 0 and budget.waits == 0
    budget.release(nbytes)  # the transfer thread handed the first batch to a connection
    blocked.join(5)
    assert not blocked.is_alive() and transfer.cursor == 1 and budget.waits == 1
    assert budget.used == transfer.get(1)[2]


def test_a_budget_admits_any_batch_when_nothing_is_held_and_stops_waiting_once_closed() -> None:
    budget = ByteBudget(10)
    budget.acquire(1000)  # larger than the ceiling, but nothing else is held
    assert budget.used == 1000
    waiter = threading.Thread(target=budget.acquire, args=(5,))
    waiter.start()
    waiter.join(0.1)
    assert waiter.is_alive()
    budget.close()  # the worker halts: nobody waits any more (their publish is refused next)
    waiter.join(5)
    assert not waiter.is_alive() and budget.used == 1005


def test_direct_emits_on_unheld_streams_never_wait_on_a_congested_task_and_others_do() -> None:
    """A checkpoint barrier to a congested task queues behind that task's data without holding
    up the barriers for the other tasks; a user's emit to it waits until the report clears."""
    from tuplemesh.core.congestion import CongestionMap

    congestion = CongestionMap(lease=60.0)  # only the clearing report below ends a hold
    transfer: RingBuffer[Any] = RingBuffer.multi_producer(16)
    outbox = Outbox(
        local_inboxes={},
        remote_workers={4: 7, 5: 7},
        transfer_ring=transfer,
        serializer=load_serializer("msgpack"),
        batch_size=1,
        send_capacity=100,
        max_payload=1 << 20,
        congestion=congestion,
    )
    outbox.unheld_streams = frozenset({"__barrier"})  # as the checkpoint feature sets it
    congestion.report("peer 7", [4])
    for task in (4, 5):  # as a spout sends its barriers: to each downstream task in turn
        outbox.deliver_direct(task, 9, "spout", "__barrier", 3, FIELDS, ["barrier"])
    assert [(worker, [task for task, _ in buf]) for worker, buf, _ in published(transfer)] == [
        (7, [4]),
        (7, [5]),
    ]
    assert outbox.backpressure_holds == 0

    def clear() -> None:
        while not outbox.backpressure_holds:  # the user's emit below is holding
            time.sleep(0.001)
        congestion.report("peer 7", [])

    clearer = threading.Thread(target=clear, daemon=True)
    clearer.start()
    outbox.deliver_direct(4, 9, "spout", "default", 0, FIELDS, ["data"])
    clearer.join(30)
    assert outbox.backpressure_holds == 1
    assert [task for _, buf, _ in published(transfer)[2:] for task, _ in buf] == [4]


def aligning_outbox(held_back: Any) -> tuple[Outbox, RingBuffer[Any], RingBuffer[Any]]:
    """An outbox of an executor running task 9, in a worker whose task 3 may align barriers."""
    outbox, inbox_a, inbox_b, _ = make(batch_size=3)
    outbox.unheld_streams = frozenset({"__barrier"})  # as the checkpoint feature sets them
    outbox.held_back = held_back
    outbox.source_tasks = frozenset({9})
    return outbox, inbox_a, inbox_b


def test_an_emit_to_a_local_task_that_sets_this_executors_input_aside_waits_until_it_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Task 3 has the barrier of task 9 (this executor) and waits for task 8's: what 9 sends it
    now would only be set aside. The emit publishes what is buffered, then waits until 3
    completes; a barrier is never held and goes out at once."""
    from tuplemesh.core import held_back as held_back_module

    monkeypatch.setattr(held_back_module, "LEAVE_OUT_SECONDS", 3600.0)  # only the release ends it
    held_back = held_back_module.HeldBack()
    outbox, inbox_a, inbox_b = aligning_outbox(held_back)
    outbox.deliver_direct(3, 9, "spout", "__barrier", 3, FIELDS, ["barrier"])
    assert [[t.values for _, t in batch] for batch in published(inbox_b)] == [[["barrier"]]]
    held_back.hold(3, frozenset({9}), frozenset({8, 9}))
    emit(outbox, "to task 1", 1)  # buffered (batch size 3): published before the wait
    done = threading.Event()
    waiter = threading.Thread(target=lambda: (emit(outbox, "after the barrier", 3), done.set()), daemon=True)
    waiter.start()
    deadline = time.monotonic() + 30
    while not outbox.backpressure_holds and time.monotonic() < deadline:
        time.sleep(0.001)
    assert outbox.backpressure_holds == 1 and not done.is_set()
    assert [[t.values for _, t in batch] for batch in published(inbox_a)] == [[["to task 1"]]]
    assert len(published(inbox_b)) == 1  # nothing more for task 3 while it aligns
    held_back.release(3)  # its alignment completed
    waiter.join(30)
    assert done.is_set() and outbox.backpressure_hold_seconds > 0
    outbox.flush()
    assert [[t.values for _, t in batch] for batch in published(inbox_b)] == [
        [["barrier"]],
        [["after the barrier"]],
    ]


def test_an_executor_one_of_whose_tasks_still_owes_the_barrier_never_waits() -> None:
    """Executor tasks 8 and 9 both feed task 3, which has 9's barrier only: 8's may be behind
    in this executor's own inbox, so waiting could keep the alignment from ever completing."""
    from tuplemesh.core.held_back import HeldBack

    held_back = HeldBack()
    outbox, _, inbox_b = aligning_outbox(held_back)
    outbox.source_tasks = frozenset({8, 9})
    held_back.hold(3, frozenset({9}), frozenset({7, 8, 9}))
    emit(outbox, "runs on", 3)
    outbox.flush()
    assert outbox.backpressure_holds == 0
    assert [[t.values for _, t in batch] for batch in published(inbox_b)] == [[["runs on"]]]
    held_back.barriered(3, frozenset({8, 9}), frozenset({7, 8, 9}))  # 8's barrier came too
    assert held_back.closed_to(3, frozenset({8, 9}), time.monotonic())
    assert not held_back.closed_to(3, frozenset({7}), time.monotonic())  # 7's has not
    assert not held_back.closed_to(3, frozenset({3, 8, 9}), time.monotonic())  # its own executor
    assert not held_back.closed_to(3, frozenset({5}), time.monotonic())  # 5 does not feed it


def test_an_emitter_waits_on_an_aligning_task_no_longer_than_it_counts_as_holding_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An alignment that never completes (an input whose barrier never comes) holds its
    emitters up to `LEAVE_OUT_SECONDS`, then they send to it as to any other task."""
    from tuplemesh.core import held_back as held_back_module

    monkeypatch.setattr(held_back_module, "LEAVE_OUT_SECONDS", 0.5)
    held_back = held_back_module.HeldBack()
    outbox, _, inbox_b = aligning_outbox(held_back)
    held_back.hold(3, frozenset({9}), frozenset({8, 9}))
    done = threading.Event()
    threading.Thread(target=lambda: (emit(outbox, "late", 3), done.set()), daemon=True).start()
    assert done.wait(30)  # it returned, nothing released: the task no longer counts as holding
    outbox.flush()
    assert 3 in held_back.since and outbox.backpressure_holds <= 1  # 0: a late look, past the cap
    assert [[t.values for _, t in batch] for batch in published(inbox_b)] == [[["late"]]]
