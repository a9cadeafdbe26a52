"""Which epoch a starting worker takes (`tuplemesh.server.joining.choose_epoch`)."""

from __future__ import annotations

import threading

from tuplemesh.server.joining import AskedEpochs, choose_epoch
from tuplemesh.topology.assignment import Epoch

CODE = "0123456789abcdef"


def answers(*rounds: list[Epoch]):
    """peer_epochs answering each round in turn, then the last one forever; counts its calls."""
    calls = []

    def peer_epochs() -> list[Epoch]:
        calls.append(1)
        return rounds[min(len(calls), len(rounds)) - 1]

    peer_epochs.calls = calls  # type: ignore[attr-defined]
    return peer_epochs


def test_a_worker_of_a_fresh_mesh_starts_at_its_own_epoch():
    own = Epoch(3, CODE, 0)
    assert choose_epoch(1, own, answers([]), threading.Event()) == own


def test_a_worker_with_an_old_worker_count_takes_the_epoch_its_peers_run():
    mesh = Epoch(3, CODE, 0)
    assert choose_epoch(1, Epoch(2, CODE, 0), answers([mesh, mesh]), threading.Event()) == mesh
    rescaled = Epoch(4, CODE, 2)
    assert choose_epoch(1, Epoch(2, CODE, 0), answers([rescaled, mesh]), threading.Event()) == rescaled


def test_a_restarted_worker_keeps_its_newer_epoch_over_peers_still_at_the_old_one():
    own = Epoch(4, CODE, 1)
    assert choose_epoch(0, own, answers([Epoch(2, CODE, 0)]), threading.Event()) == own


def test_peers_of_another_topology_code_are_not_followed():
    own = Epoch(3, CODE, 0)
    assert choose_epoch(1, own, answers([Epoch(2, "fedcba9876543210", 5)]), threading.Event()) == own


def test_a_worker_beyond_the_mesh_waits_until_it_grows_even_while_the_mesh_restarts():
    old, grown = Epoch(2, CODE, 0), Epoch(4, CODE, 1)
    peer_epochs = answers([old, old], [old], [], [], [grown])
    assert choose_epoch(3, Epoch(4, CODE, 0), peer_epochs, threading.Event()) == grown
    assert len(peer_epochs.calls) == 5  # type: ignore[attr-defined]


def test_a_worker_stopped_while_it_waits_starts_nothing():
    stop = threading.Event()
    stop.set()
    assert choose_epoch(2, Epoch(4, CODE, 0), answers([Epoch(2, CODE, 0)]), stop) is None


def test_a_pod_of_a_followed_statefulset_waits_for_an_answer_instead_of_starting_alone():
    # a scale-up pod starting while the mesh restarts at the rescale: nobody answers for a while
    grown = Epoch(5, CODE, 1)
    peer_epochs = answers([], [], [grown])
    assert choose_epoch(3, Epoch(5, CODE, 0), peer_epochs, threading.Event(), start_alone=False) == grown
    assert len(peer_epochs.calls) == 3  # type: ignore[attr-defined]
    # peers of another topology code answer (a rolling update): it starts at its own epoch
    own = Epoch(3, CODE, 0)
    other = answers([Epoch(3, "fedcba9876543210", 4)])
    assert choose_epoch(1, own, other, threading.Event(), start_alone=False) == own


def test_each_wait_is_announced_with_the_epoch_the_mesh_runs_so_the_worker_can_serve_meanwhile():
    old, grown = Epoch(2, CODE, 0), Epoch(4, CODE, 1)
    waits: list[Epoch | None] = []
    peer_epochs = answers([old], [], [grown])
    assert choose_epoch(3, Epoch(4, CODE, 0), peer_epochs, threading.Event(), on_wait=waits.append) == grown
    assert waits == [old, None]  # the mesh restarting at its next epoch: no peer answers
    assert choose_epoch(1, old, answers([old]), threading.Event(), on_wait=waits.append) == old
    assert waits == [old, None]  # included at once: no wait, nothing served ahead of the worker


class _Peers:
    """PeerAdmins' ``epochs`` over `answers`: each round in turn; records the timeouts asked."""

    def __init__(self, *rounds: list[Epoch]) -> None:
        self.ask = answers(*rounds)
        self.timeouts: list[float] = []

    def epochs(self, timeout: float, most: int | None = None) -> list[Epoch]:
        self.timeouts.append(timeout)
        return self.ask()


def test_a_worker_that_chose_its_own_epoch_because_no_peer_answered_is_not_agreed_on():
    own = Epoch(3, CODE, 0)
    asked = AskedEpochs(_Peers([]))
    assert choose_epoch(2, own, asked, threading.Event()) == own
    assert not asked.agreed_on(own)


def test_an_epoch_a_peer_answered_with_is_agreed_on_and_another_topologys_answer_is_not():
    own = Epoch(3, CODE, 0)
    peers = _Peers([Epoch(3, "fedcba9876543210", 5)], [own])
    asked = AskedEpochs(peers)
    assert asked() == [Epoch(3, "fedcba9876543210", 5)]
    assert not asked.agreed_on(own)  # a worker of another topology says nothing of this mesh
    assert choose_epoch(2, own, asked, threading.Event()) == own
    assert asked.agreed_on(own) and peers.timeouts == [1.0, 1.0]
