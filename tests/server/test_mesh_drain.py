"""When a stopping worker may stop its executors (`tuplemesh.server.stopping.MeshDrain`): a worker
a scale-down removes never stops alone."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from tuplemesh.server.stopping import SIBLING_GRACE_SECS, DrainOutcome, MeshDrain
from tuplemesh.v1 import admin_pb2


class Peers:
    """Peer 1's status as the test sets it."""

    def __init__(self) -> None:
        self.state = "SERVING"
        self.asked = 0
        #: None: the peer's release does not report it
        self.spouts_quiet: bool | None = None

    def statuses(self, timeout: float) -> dict[int, admin_pb2.WorkerStatus | None]:
        self.asked += 1
        status = admin_pb2.WorkerStatus(state=self.state, idle=True, epoch="1/2/c", consumed=5, delivered=5)
        if self.spouts_quiet is not None:
            status.spouts_quiet = self.spouts_quiet
        return {1: status}


def own_snapshot() -> Any:
    # an idle worker: nothing queued, every send acknowledged
    return SimpleNamespace(idle=True, local_queues_empty=True, spouts_quiet=True, consumed=3,
                           delivered=3, transfer=SimpleNamespace(sent_tuples=3))  # fmt: skip


def test_a_worker_whose_peers_run_stops_alone_after_the_sibling_grace():
    drain = MeshDrain(0, {0, 1}, own_snapshot, Peers())
    started = time.monotonic()
    assert drain.wait(time.monotonic() + 10) == DrainOutcome.QUEUES_EMPTY
    assert time.monotonic() - started >= SIBLING_GRACE_SECS  # QUEUES_EMPTY: not the deadline


def test_a_removed_worker_waits_for_the_mesh_to_drain_with_it():
    peers = Peers()
    drain = MeshDrain(2, {0, 1, 2}, own_snapshot, peers, removed=lambda: True)
    drain.expected = {1}  # one peer keeps the test short
    assert drain.wait(time.monotonic() + SIBLING_GRACE_SECS + 1.0) == DrainOutcome.DEADLINE
    assert drain.admission(1) is not None  # a running peer's batches wait: it keeps them meanwhile
    peers.state = "NOT_SERVING"  # the rescale reached the rest of the mesh: it drains too
    assert drain.wait(time.monotonic() + 10) == DrainOutcome.MESH_IDLE
    assert drain.admission(1) is None


def test_in_a_rescale_peers_batches_are_taken_at_once_but_the_mesh_is_idle_only_once_each_drains():
    """Every worker of the epoch a rescale leaves was asked to drain: a worker takes its peers'
    batches at once. It stops on the mesh's idle waves only once each peer's status says it
    drains: the worker that asked for the rescale drains last, and until then its spouts emit,
    however still its counters happened to be."""
    peers = Peers()  # still SERVING as far as its status says: the request reached it a moment ago
    drain = MeshDrain(0, {0, 1}, own_snapshot, peers, rescaling="1/2/c")
    assert drain.admission(1) is None and drain.refused_batches == 0
    # idle, equal counters wave after wave, past the sibling grace: still not a drained mesh
    assert drain.wait(time.monotonic() + SIBLING_GRACE_SECS + 0.5) == DrainOutcome.DEADLINE
    assert peers.asked >= 3
    peers.state = "NOT_SERVING"
    asked = peers.asked
    assert drain.wait(time.monotonic() + 10) == DrainOutcome.MESH_IDLE
    assert peers.asked - asked >= 2  # two equal waves once it drains


def test_a_peer_answering_at_another_epoch_has_left_the_rescale():
    """A peer that already restarted at the new epoch answers with it: it found the mesh idle."""
    peers = Peers()
    drain = MeshDrain(0, {0, 1}, own_snapshot, peers, rescaling="0/2/c")  # peer 1 answers 1/2/c
    assert drain.wait(time.monotonic() + 10) == DrainOutcome.MESH_IDLE


def test_a_draining_peer_whose_spout_is_still_inside_next_tuple_keeps_the_mesh_from_idle():
    """NOT_SERVING comes before the spouts' deactivation is confirmed (peers must take the
    draining worker's batches for a spout blocked on a full send window to return): until its
    status says its spouts are quiet, still counters prove nothing."""
    peers = Peers()
    peers.state, peers.spouts_quiet = "NOT_SERVING", False
    drain = MeshDrain(0, {0, 1}, own_snapshot, peers)
    assert drain.wait(time.monotonic() + SIBLING_GRACE_SECS + 0.5) == DrainOutcome.DEADLINE
    assert drain.admission(1) is None  # its batches are taken meanwhile: that is what frees its spout
    peers.spouts_quiet = True
    assert drain.wait(time.monotonic() + 10) == DrainOutcome.MESH_IDLE


def test_a_worker_whose_own_spout_is_still_inside_next_tuple_does_not_stop_on_the_mesh_idle():
    peers = Peers()
    peers.state = "NOT_SERVING"

    def blocked_spout() -> Any:
        own = own_snapshot()
        own.spouts_quiet = False
        return own

    drain = MeshDrain(0, {0, 1}, blocked_spout, peers)
    assert drain.wait(time.monotonic() + 1.0) == DrainOutcome.DEADLINE


class Wait:
    """A drain wait that settles on its ``settles_at``-th asking; counts the askings."""

    def __init__(self, settles_at: int) -> None:
        self.settles_at = settles_at
        self.asked: list[set[int]] = []

    def settled(self, gone: set[int]) -> bool:
        self.asked.append(gone)
        return len(self.asked) >= self.settles_at


def test_a_whole_mesh_stop_waits_for_every_final_wait_asking_each_until_it_settles():
    peers = Peers()
    peers.state, peers.spouts_quiet = "NOT_SERVING", True
    first, third = Wait(1), Wait(3)
    drain = MeshDrain(0, {0, 1}, own_snapshot, peers, [first, third])
    assert drain.wait(time.monotonic() + 10) == DrainOutcome.MESH_IDLE
    # asked from the second still wave on: the first settles at once and is asked no more
    assert first.asked == [set()] and third.asked == [set(), set(), set()]
    assert peers.asked == 4
