"""IngestQueue on its own: rows kept as their requests' chunks of columns, taken in order within
a limit."""

from __future__ import annotations

import threading

from tests.helpers import eventually
from tuplemesh.gateway.ingest import IngestQueue, columns_of
from tuplemesh.gateway.ticket import PublishTicket


def test_take_hands_over_rows_in_order_splitting_a_chunk_at_the_limit():
    queue = IngestQueue(100, ["n", "s"])
    first, second = PublishTicket(3), PublishTicket(2)
    assert queue.put(first, [[0, 1, 2], ["a", "b", "c"]], timeout=1.0)
    assert queue.put(second, [[10, 11], ["x", "y"]], timeout=1.0)
    assert len(queue) == 5 and queue.accepted == 5
    taken = queue.take(2)
    assert [(c.ticket, list(c.indices), c.columns) for c in taken] == [(first, [0, 1], [[0, 1], ["a", "b"]])]
    assert len(queue) == 3
    taken = queue.take(10)
    assert [(c.ticket, list(c.indices), c.columns) for c in taken] == [
        (first, [2], [[2], ["c"]]),
        (second, [0, 1], [[10, 11], ["x", "y"]]),
    ]
    assert len(queue) == 0 and queue.take(10) == []


def test_a_retry_queues_only_the_rows_its_ticket_still_publishes():
    ticket = PublishTicket(4)
    ticket.ack_many([0, 2])
    ticket.fail_many([1, 3])
    retry = ticket.retry()
    queue = IngestQueue(10, ["n"])
    columns = [["a", "b", "c", "d"]]
    assert queue.put(retry, columns, timeout=1.0)
    [chunk] = queue.take(10)
    assert chunk.columns == [["b", "d"]]
    assert chunk.entries() == [(retry, 1, ["b"]), (retry, 3, ["d"])]
    assert columns == [["a", "b", "c", "d"]]  # the request's columns are not touched


def test_splitting_a_chunk_leaves_the_requests_own_columns_alone():
    queue = IngestQueue(10, ["n"])
    columns = [[0, 1, 2]]
    assert queue.put(PublishTicket(3), columns, timeout=1.0)
    assert [c.columns for c in queue.take(1)] == [[[0]]]
    assert [c.columns for c in queue.take(5)] == [[[1, 2]]]
    assert columns == [[0, 1, 2]]


def test_a_full_queue_holds_the_publisher_until_rows_are_taken():
    queue = IngestQueue(3, ["n"])
    assert queue.put(PublishTicket(3), [[0, 1, 2]], timeout=1.0)
    assert not queue.put(PublishTicket(1), [[3]], timeout=0.05)  # no room came in time
    put: list[bool] = []
    thread = threading.Thread(target=lambda: put.append(queue.put(PublishTicket(2), [[4, 5]], 30)))
    thread.start()
    thread.join(0.1)
    assert thread.is_alive()
    queue.take(2)
    eventually(lambda: not thread.is_alive())
    assert put == [True] and len(queue) == 3


def test_an_empty_queue_takes_a_request_larger_than_its_capacity():
    queue = IngestQueue(2, ["n"])
    assert queue.put(PublishTicket(5), [list(range(5))], timeout=1.0)
    assert sum(len(c) for c in queue.take(100)) == 5


def test_columns_of_rows():
    assert columns_of([[1, "a"], [2, "b"]], 2) == [[1, 2], ["a", "b"]]
    assert columns_of([], 2) == [[], []]
