"""The local transport tells its senders the receiver's congested tasks, as a network
acknowledgement does: on every send, and whenever the set changes with nothing sent."""

from __future__ import annotations

import threading
from typing import Any

from tests.helpers import eventually
from tests.transport.conftest import Receiver
from tuplemesh.transport.local import LocalContext

TOPO = "topo-local"


class Ears:
    """Records what each connection hears: (connection, congested tasks)."""

    def __init__(self) -> None:
        self.heard: list[tuple[Any, list[int]]] = []
        self._lock = threading.Lock()

    def __call__(self, connection: Any, tasks: list[int]) -> None:
        with self._lock:
            self.heard.append((connection, list(tasks)))

    def of(self, connection: Any) -> list[list[int]]:
        with self._lock:
            return [tasks for c, tasks in self.heard if c is connection]


def test_a_sender_hears_congestion_on_send_and_its_clearing_without_sending() -> None:
    context = LocalContext()
    context.prepare({})
    congested = [5]
    rx = Receiver()
    binding = context.bind(TOPO, 1, rx, congestion=lambda: list(congested))
    ears = Ears()
    conn = context.connect(TOPO, "local", 1, on_congestion=ears)
    try:
        conn.send([(5, b"a")])
        assert ears.of(conn) == [[5]]  # told as the send returns, like an acknowledgement
        rx.wait_for(1, 10)
        congested.clear()  # the inbox drained; nothing more is sent
        eventually(
            lambda: ears.of(conn)[-1] == [],
            timeout=10,
            message=lambda: f"the clearing was not told: {ears.of(conn)}",
        )
        assert rx.messages == [(5, b"a")]
    finally:
        binding.close()
        context.term()


def test_a_retargeted_sender_no_longer_hears_its_old_receiver() -> None:
    context = LocalContext()
    context.prepare({})
    congested: list[int] = []
    rx_old, rx_new = Receiver(), Receiver()
    old = context.bind(TOPO, 1, rx_old, congestion=lambda: list(congested))
    new = context.bind(TOPO, 2, rx_new, congestion=list)
    ears = Ears()
    moved = context.connect(TOPO, "local", 1, on_congestion=ears)
    stays = context.connect(TOPO, "local", 1, on_congestion=ears)
    try:
        moved.send([(1, b"before")])
        rx_old.wait_for(1, 10)
        moved.retarget("local", 2)
        moved.send([(1, b"after")])
        rx_new.wait_for(1, 10)
        congested.append(7)
        stays.send([(7, b"x")])
        assert ears.of(stays)[-1] == [7]  # told as it sent
        rx_old.wait_for(2, 10)
        congested.clear()  # told by the receive thread to every sender it still tells
        eventually(
            lambda: ears.of(stays)[-1] == [],
            timeout=10,
            message=lambda: f"the clearing was not told to the sender: {ears.heard}",
        )
        assert ears.of(moved) == [[], []], "told by its old receiver after it moved"
        assert rx_old.messages == [(1, b"before"), (7, b"x")] and rx_new.messages == [(1, b"after")]
    finally:
        old.close()
        new.close()
        context.term()


def test_a_congestion_that_clears_while_its_batch_is_delivered_is_told_clear() -> None:
    """The sender heard [5] as it sent; the inbox drained while the batch went in. The receive
    thread compares with what that sender last heard, not with what it last told anyone."""
    context = LocalContext()
    context.prepare({})
    congested = [5]

    def drains_as_it_delivers(batch: list[Any]) -> list[int]:
        congested.clear()
        return []

    binding = context.bind(TOPO, 1, drains_as_it_delivers, congestion=lambda: list(congested))
    ears = Ears()
    conn = context.connect(TOPO, "local", 1, on_congestion=ears)
    try:
        conn.send([(5, b"a")])
        assert ears.of(conn)[0] == [5]
        eventually(
            lambda: ears.of(conn)[-1] == [],
            timeout=10,
            message=lambda: f"the sender still holds on a clear task: {ears.of(conn)}",
        )
    finally:
        binding.close()
        context.term()
