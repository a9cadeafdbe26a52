"""AckerMailbox: one box per acker task, posted on flush or when a kind reaches the limit."""

from __future__ import annotations

from typing import Any

from tests.helpers import local_and_remote_outbox
from tuplemesh.acking.mailbox import AckerMailbox
from tuplemesh.core.outbox import Outbox
from tuplemesh.disruptor import RingBuffer
from tuplemesh.serialization import load_serializer
from tuplemesh.topology import Fields

FIELDS = Fields(["inits", "acks", "fails"])
ACKERS = (1, 2)  # acker 1 runs here, acker 2 on worker 5


def make(limit: int = 256) -> tuple[Outbox, AckerMailbox, RingBuffer[Any], RingBuffer[Any]]:
    outbox, inbox, transfer = local_and_remote_outbox(100, 1000)
    return outbox, AckerMailbox(outbox, 9, "split", 3, FIELDS, limit=limit), inbox, transfer


def published(ring: RingBuffer[Any]) -> list[Any]:
    return [ring.get(seq) for seq in range(ring.cursor + 1)]


def test_an_open_box_counts_as_one_pending_tuple_until_the_flush_posts_it() -> None:
    outbox, mailbox, inbox, transfer = make()
    mailbox.init(1, root=10, value=0xA, spout_task=9)
    mailbox.ack(1, root=10, value=0xB)
    mailbox.fail(1, root=11)
    assert outbox.pending == 1 and published(inbox) == []
    mailbox.ack(2, root=12, value=0xC)
    assert outbox.pending == 2
    outbox.flush()
    assert outbox.pending == 0 and outbox.delivered == 2
    [[(task, tup)]] = published(inbox)
    assert task == 1 and tup.source_stream == "__acking" and tup.source_task == 9
    assert tup.values == ([10, 0xA, 9], [10, 0xB], [11])
    [(worker, [(task, payload)], _)] = published(transfer)
    assert (worker, task) == (5, 2)
    assert load_serializer("msgpack").deserialize(payload) == (9, 3, [[], [12, 0xC], []], None)


def test_a_box_goes_out_on_its_own_when_one_kind_reaches_the_limit() -> None:
    outbox, mailbox, inbox, _ = make(limit=2)
    mailbox.ack(1, root=1, value=1)
    assert published(inbox) == []
    mailbox.ack(1, root=2, value=2)  # second ack: the box is full
    assert outbox.pending == 1  # now a delivered tuple in the Outbox buffer, no longer a box
    mailbox.init(1, root=3, value=3, spout_task=9)
    assert outbox.pending == 2  # a new box opened
    mailbox.init(1, root=4, value=4, spout_task=9)
    assert outbox.pending == 2 and outbox.delivered == 2
    outbox.flush()
    [batch] = published(inbox)
    assert [tup.values for _, tup in batch] == [([], [1, 1, 2, 2], []), ([3, 3, 9, 4, 4, 9], [], [])]


def test_a_flush_with_no_open_box_sends_nothing_to_the_ackers() -> None:
    outbox, _, inbox, transfer = make()
    outbox.flush()
    assert published(inbox) == [] and published(transfer) == [] and outbox.delivered == 0
