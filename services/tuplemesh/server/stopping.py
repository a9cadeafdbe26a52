"""`MeshDrain`: when a stopping worker has delivered what it holds, alone or with its whole mesh.

A worker that stops while its peers run refuses their new batches (they keep them for its
successor) and waits for its own queues. When its peers stop too (helm uninstall, a node drain,
SIGTERM to every process) that rule would deadlock: each would refuse the others' in-flight
tuples. So a stopping worker asks its peers' Admin for their state, takes batches from peers
that are draining too, and, once every peer drains or is gone, waits until the whole mesh is
idle: every worker idle (nothing queued, every send acknowledged, its spouts out of next_tuple)
with the same counters in two waves in a row, which no tuple in flight can fake (Mattern's
double counting). A checkpointed mesh then takes a final checkpoint (the coordinator's worker
asks for it and waits for its commit; the others wait for that worker to stop), so a restart
resumes with nothing to replay: what the drain waits for there (``finals``) is whatever the
worker's features handed back as it began to drain (`tuplemesh.core.feature.DrainWait`).
A worker a scale-down removes never stops alone (it has no successor to take what its peers
keep for it): it waits for the rest of the mesh, which the scale-down rescales, to drain with it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from tuplemesh.core.feature import DrainWait
from tuplemesh.core.stats import WorkerSnapshot
from tuplemesh.server.status_proto import spouts_quiet
from tuplemesh.v1 import admin_pb2

__all__ = ["DrainOutcome", "MeshDrain", "PeerStatuses"]

log = logging.getLogger(__name__)

#: How long a stopping worker waits for its own queues to make any progress before giving up
#: on them (tuples queued for a running peer that refuses them, because it drains too, with no
#: way to tell it this worker drains as well: e.g. a peer whose Admin cannot be reached).
STALL_SECS = 3.0

#: A worker whose peers all run still waits this long before it concludes it stops alone: the
#: SIGTERMs of a whole-mesh stop reach the processes at slightly different moments, and one that
#: stopped at once would refuse the in-flight tuples of peers about to drain.
SIBLING_GRACE_SECS = 1.0

#: Between two waves of status requests.
POLL_SECS = 0.05

#: What the serving state of a draining worker reads in its status.
DRAINING = "NOT_SERVING"


class PeerStatuses(Protocol):
    """Where the peers' states come from (`tuplemesh.server.peer_admin.PeerAdmins`)."""

    def statuses(self, timeout: float) -> dict[int, admin_pb2.WorkerStatus | None]: ...


#: (worker, consumed, delivered or sent) of every answering worker in one wave of status requests.
Wave = tuple[tuple[int, int, int], ...]


class DrainOutcome:
    """How a drain ended (the values are what the log says)."""

    MESH_IDLE = "the whole mesh is idle"
    QUEUES_EMPTY = "its own queues are empty"
    STALLED = "its queues made no progress"
    DEADLINE = "the shutdown timeout passed"


class MeshDrain:
    """Decides which peers' batches a stopping worker takes, and when it may stop its executors."""

    def __init__(
        self,
        index: int,
        expected: set[int],
        snapshot: Callable[[], WorkerSnapshot],
        peers: PeerStatuses,
        finals: Sequence[DrainWait] = (),
        *,
        removed: Callable[[], bool] | None = None,
        rescaling: str | None = None,
    ) -> None:
        self.index = index
        self.expected = set(expected) - {index}
        self._snapshot = snapshot
        self._peers = peers
        #: what a whole-mesh stop still waits for once the mesh is idle (e.g. a final
        #: checkpoint's commit); each is asked on every idle wave until it settles, then no more
        self._waiting = list(finals)
        #: True while a scale-down removes this worker: it never stops alone, since no successor
        #: takes what its running peers keep for it; it waits for the mesh that goes on to drain.
        self._removed = removed or (lambda: False)
        #: peers seen draining (they may have stopped since), with the epoch they drained in;
        #: only these count towards a whole-mesh drain
        self._draining: dict[int, str] = {}
        #: A rescale (``rescaling``: the epoch it leaves) asked every worker of that epoch to
        #: drain: their batches are taken from the start, none refused. Each still counts as
        #: draining only once its status says so: the rescale reaches the worker that asked for
        #: it last, and until it drains its spouts emit (stopping on the mesh's idle counters
        #: before that would strand what they emit next).
        self._rescaling = rescaling
        #: Batches refused from peers that still run (their senders keep them).
        self.refused_batches = 0

    def admission(self, sender: int) -> str | None:
        """Take batches from draining peers only. Receive threads."""
        if self._rescaling or sender in self._draining:
            return None
        self.refused_batches += 1
        return (
            f"worker {self.index} is draining; a batch from worker {sender}, "
            "not known to drain too, waits for its successor"
        )

    def _settled(self, gone: set[int]) -> bool:
        self._waiting = [final for final in self._waiting if not final.settled(gone)]
        return not self._waiting

    def wait(self, deadline: float) -> str:
        """Poll until this worker may stop its executors; a `DrainOutcome` value."""
        started = time.monotonic()
        last_wave: Wave | None = None
        moved_at = started
        while time.monotonic() < deadline:
            statuses = self._peers.statuses(timeout=min(1.0, max(0.05, deadline - time.monotonic())))
            for worker, status in statuses.items():
                if status is None:
                    continue
                if status.state == DRAINING:
                    self._draining.setdefault(worker, status.epoch)
                elif self._rescaling and status.epoch != self._rescaling:
                    # it answers at another epoch already: it drained and restarted before a
                    # wave saw it draining
                    self._draining.setdefault(worker, self._rescaling)
            own = self._snapshot()
            # a peer seen draining that no longer answers, or answers in another epoch (a
            # rescale restarted it), has stopped: it found the mesh idle
            answering = {
                w: s
                for w, s in statuses.items()
                if s is not None
                and w in self.expected
                and (w not in self._draining or s.epoch == self._draining[w])
            }
            gone = self._draining.keys() - answering.keys()
            whole_mesh = all(w in self._draining for w in self.expected)
            if whole_mesh:
                # a spout still inside next_tuple may emit after two still waves: not idle yet
                idle = (
                    own.idle
                    and own.spouts_quiet
                    and all(s.idle and spouts_quiet(s) for s in answering.values())
                )
                wave: Wave = (
                    (self.index, own.consumed, own.delivered),
                    *((w, s.consumed, s.delivered) for w, s in sorted(answering.items())),
                )
            elif (
                not self._rescaling
                and time.monotonic() - started >= SIBLING_GRACE_SECS
                and not self._removed()
            ):
                idle = own.local_queues_empty
                wave = ((self.index, own.consumed, own.transfer.sent_tuples),)
            else:
                time.sleep(POLL_SECS)
                continue
            if idle and (not whole_mesh or (wave == last_wave and self._settled(gone))):
                return DrainOutcome.MESH_IDLE if whole_mesh else DrainOutcome.QUEUES_EMPTY
            if wave != last_wave:
                last_wave, moved_at = wave, time.monotonic()
            elif not idle and time.monotonic() - moved_at > STALL_SECS:
                log.warning(
                    "worker %d: queues not empty but nothing moved for %.0fs; stopping",
                    self.index,
                    STALL_SECS,
                )
                return DrainOutcome.STALLED
            time.sleep(POLL_SECS)  # deliberate pacing of the status waves
        return DrainOutcome.DEADLINE
