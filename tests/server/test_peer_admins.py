"""`PeerAdmins.rebalance`: who a rescale waits for."""

from __future__ import annotations

import time

import pytest

from tuplemesh.config import Config
from tuplemesh.errors import TransportError
from tuplemesh.netutil import free_ports
from tuplemesh.server.peer_admin import PeerAdmins
from tuplemesh.topology.assignment import Epoch


def test_a_worker_the_new_epoch_leaves_out_that_cannot_be_reached_is_not_waited_for():
    """A scale-down removed its pod: nothing listens at its address any more."""
    [closed] = free_ports(1)
    admins = PeerAdmins(Config({}), 0, lambda: {1: ("127.0.0.1", closed)})
    try:
        started = time.monotonic()
        admins.rebalance(range(2), Epoch(1, "c0de", 1), timeout=0.5)  # 2 -> 1: worker 1 is left out
        assert time.monotonic() - started < 5
    finally:
        admins.close()


def test_a_worker_the_new_epoch_keeps_must_accept():
    [closed] = free_ports(1)
    admins = PeerAdmins(Config({}), 0, lambda: {1: ("127.0.0.1", closed)})
    try:
        with pytest.raises(TransportError, match="worker 1 did not accept the rescale to 1/2/c0de"):
            admins.rebalance(range(2), Epoch(2, "c0de", 1), timeout=0.5)
        with pytest.raises(TransportError, match="worker 2 has no known address"):
            admins.rebalance(range(3), Epoch(3, "c0de", 1), timeout=0.5)
    finally:
        admins.close()


class _Answer:
    def __init__(self, epoch: str) -> None:
        self.epoch = epoch

    def result(self) -> _Answer:
        return self


def test_epochs_asks_the_next_few_peers_in_turn_and_every_peer_without_a_limit() -> None:
    """Asking every peer on every poll grows as N (N - 1) over the mesh; a few in turn go round it."""
    asked: list[int] = []

    class Stub:
        def __init__(self, worker: int) -> None:
            self.worker = worker

        @property
        def GetAssignment(self) -> Stub:
            return self

        def future(self, request: object, timeout: float) -> _Answer:
            asked.append(self.worker)
            return _Answer(str(Epoch(8, "c0de", self.worker)))

    admins = PeerAdmins(Config({}), 0, lambda: {w: ("127.0.0.1", 7000 + w) for w in range(8)})
    admins._stub = lambda worker, address: Stub(worker)  # type: ignore[method-assign,assignment,return-value]
    rounds = [[e.counter for e in admins.epochs(1.0, most=3)] for _ in range(4)]
    assert rounds == [[1, 2, 3], [4, 5, 6], [7, 1, 2], [3, 4, 5]]
    asked.clear()
    assert [e.counter for e in admins.epochs(1.0)] == [1, 2, 3, 4, 5, 6, 7]
    assert [e.counter for e in admins.epochs(1.0, most=10)] == [1, 2, 3, 4, 5, 6, 7]
    assert asked == [1, 2, 3, 4, 5, 6, 7] * 2


def test_a_peer_whose_call_cannot_start_gives_no_answer_and_the_others_do():
    admins = PeerAdmins(
        Config({}), 0, lambda: {0: ("127.0.0.1", 1), 1: ("127.0.0.1", 2), 2: ("127.0.0.1", 3)}
    )
    started: list[int] = []

    class Answered:
        def result(self) -> str:
            return "answer"

    def start(channel: object, timeout: float) -> Answered:
        started.append(len(started))
        if len(started) == 1:  # the first peer's: as when its channel was closed meanwhile
            raise ValueError("Cannot invoke RPC on closed channel!")
        return Answered()

    try:
        assert admins.ask_every_peer(start, 0.5)() == {1: None, 2: "answer"}  # not itself (0)
        assert len(started) == 2
    finally:
        admins.close()
