"""PublishTicket on its own: rows settle once, a failed request's retry covers only what failed."""

from __future__ import annotations

import threading

from tuplemesh.gateway.ticket import PublishTicket


def test_held_once_every_row_is_acked():
    ticket = PublishTicket(3)
    assert list(ticket.indices) == [0, 1, 2] and not ticket.settled and not ticket.wait(0)
    ticket.ack(0)
    ticket.ack(2)
    assert not ticket.settled
    ticket.ack(1)
    assert ticket.settled and ticket.held and ticket.failures == 0 and ticket.wait(0)


def test_one_failed_row_fails_the_request_and_late_verdicts_change_nothing():
    ticket = PublishTicket(3)
    ticket.ack(0)
    ticket.fail(1)
    ticket.fail(1)  # a second verdict for the same row (an ack after a timeout, say) is ignored
    ticket.ack(1)
    ticket.ack(2)
    assert ticket.settled and not ticket.held and ticket.failures == 1


def test_a_retry_publishes_only_the_rows_that_did_not_complete():
    first = PublishTicket(5)
    first.ack(0)
    first.fail(1)
    first.ack(2)
    first.fail(3)
    first.ack(4)
    retry = first.retry()
    assert retry.size == 5 and retry.indices == [1, 3] and not retry.settled
    retry.ack(1)
    retry.fail(3)
    third = retry.retry()
    assert third.indices == [3]
    third.ack(3)
    assert third.held


def test_fail_open_settles_what_was_never_queued():
    ticket = PublishTicket(3)
    ticket.ack(0)
    ticket.fail_open()
    assert ticket.settled and ticket.failures == 2 and ticket.retry().indices == [1, 2]


def test_wait_returns_when_another_thread_settles_the_last_row():
    ticket = PublishTicket(1)
    threading.Timer(0.05, ticket.ack, args=(0,)).start()
    assert ticket.wait(10.0) and ticket.held


def test_rows_settle_many_at_once_and_late_verdicts_in_a_group_change_nothing():
    ticket = PublishTicket(5)
    ticket.ack_many([0, 1])
    ticket.fail_many([1, 2])  # row 1 is held already: only row 2 fails
    assert not ticket.settled and ticket.failures == 1
    ticket.ack_many([])
    ticket.ack_many([3, 4, 2])
    assert ticket.settled and not ticket.held and ticket.failures == 1
    assert ticket.retry().indices == [2]


def test_acking_the_last_rows_at_once_wakes_a_waiter():
    ticket = PublishTicket(3)
    waited: list[bool] = []
    waiter = threading.Thread(target=lambda: waited.append(ticket.wait(30)))
    waiter.start()
    ticket.ack_many([0, 1, 2])
    waiter.join(30)
    assert waited == [True] and ticket.held


def test_ranges_of_rows_settle_at_once_and_a_range_with_settled_rows_settles_only_the_open_ones():
    ticket = PublishTicket(6)
    ticket.ack_many(range(0, 2))  # every row open: settled in one step
    ticket.fail(3)
    ticket.ack_many(range(2, 6))  # row 3 failed already: the rest of the range is held
    assert ticket.settled and not ticket.held and ticket.failures == 1
    assert ticket.retry().indices == [3]
    ticket = PublishTicket(4)
    ticket.fail_many(range(1, 3))
    assert (ticket.failures, ticket.settled) == (2, False)
    ticket.ack_many(range(0, 4))  # 1 and 2 failed: only 0 and 3 are held
    assert ticket.settled and ticket.failures == 2 and ticket.retry().indices == [1, 2]
