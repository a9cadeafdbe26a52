"""What the page a worker serves shows of the whole mesh: its own reading plus each peer's Admin
status (and the features' panels, where shown), and the epochs the worker has routed by.

The peers are asked through the worker's own clients (``PeerAdmins``), passed in as callables so
this package does not import the server's.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuplemesh.core.panel import MeshPanel
from tuplemesh.ui.view import ViewBuilder
from tuplemesh.v1 import admin_pb2

__all__ = ["EpochHistory", "PanelSource", "WorkerMeshView", "history_rows", "merge_histories"]

#: Epochs kept in the history: a mesh rescaled every few minutes for days stays a short list.
HISTORY_LIMIT = 20
#: Seconds a peer gets to answer a refresh; under the page's refresh interval, so one peer that
#: hangs slows no refresh beyond it.
PEER_TIMEOUT = 0.8


class EpochHistory:
    """The epochs a worker process has routed by, newest first, the last ``limit`` of them.

    A rescale stops the worker and starts the next epoch's in the same OS process, so the history
    belongs to the process (the command serving the worker makes one and hands it to each epoch's
    worker), not to one epoch's worker: that one would only ever know its own. Thread-safe."""

    def __init__(self, limit: int = HISTORY_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"an epoch history keeps at least 1 epoch, not {limit}")
        self._rows: deque[dict[str, Any]] = deque(maxlen=limit)
        self._lock = threading.Lock()

    def record(self, epoch: str, workers: int, since: float | None = None) -> None:
        """This worker routes by ``epoch`` from ``since`` (now when None). The epoch it already
        routes by is not recorded twice."""
        with self._lock:
            if self._rows and self._rows[-1]["epoch"] == epoch:
                return
            self._rows.append(
                {"epoch": epoch, "workers": workers, "since": time.time() if since is None else since}
            )

    def rows(self) -> list[dict[str, Any]]:
        """Newest first (JSON-ready copies)."""
        with self._lock:
            return [dict(row) for row in reversed(self._rows)]


def history_rows(answer: admin_pb2.EpochHistory) -> list[dict[str, Any]]:
    """A worker's Admin.GetEpochHistory answer as the rows its EpochHistory holds, newest first."""
    return [{"epoch": e.epoch, "workers": e.workers, "since": e.since_unix_seconds} for e in answer.epochs]


def merge_histories(
    histories: Iterable[Sequence[Mapping[str, Any]]], limit: int = HISTORY_LIMIT
) -> list[dict[str, Any]]:
    """The epochs of several workers' histories as one, newest first, the last ``limit``.

    Each worker process knows the epochs since it started (a worker added by a rescale, or
    restarted, knows fewer), so the mesh's history is their union; an epoch is listed once, from
    the first worker to route by it."""
    first: dict[str, dict[str, Any]] = {}
    for rows in histories:
        for row in rows:
            known = first.get(row["epoch"])
            if known is None or row["since"] < known["since"]:
                first[row["epoch"]] = dict(row)
    return sorted(first.values(), key=lambda row: row["since"], reverse=True)[:limit]


def _as_stats(
    status: admin_pb2.WorkerStatus, before: tuple[float, dict[str, tuple[int, int]]] | None, now: float
) -> admin_pb2.WorkerStats:
    """A peer's GetStatus answer as the WorkerStats its stats stream would send: per-component
    totals from its executors, rates from the previous answer (none before a second one)."""
    totals: dict[str, tuple[int, int]] = {}
    for e in status.executors:
        executed, emitted = totals.get(e.component, (0, 0))
        totals[e.component] = (executed + e.executed, emitted + e.emitted)
    components = []
    for name, (executed, emitted) in sorted(totals.items()):
        rate_executed = rate_emitted = 0.0
        if before is not None and now > before[0] and name in before[1]:
            was_executed, was_emitted = before[1][name]
            elapsed = now - before[0]
            # a restarted peer counts from 0 again: no negative rate
            rate_executed = max(executed - was_executed, 0) / elapsed
            rate_emitted = max(emitted - was_emitted, 0) / elapsed
        components.append(
            admin_pb2.ComponentStats(
                component=name,
                executed=executed,
                emitted=emitted,
                executed_per_second=rate_executed,
                emitted_per_second=rate_emitted,
            )
        )
    return admin_pb2.WorkerStats(
        worker=status.worker,
        uptime_seconds=status.uptime_seconds,
        components=components,
        queues=status.queues,
        status=status,
    )


@dataclass(frozen=True)
class PanelSource:
    """A feature's panel on a worker's page: the worker's own answer, and every peer's."""

    panel: MeshPanel
    #: this worker's answer now (None: none)
    own: Callable[[], Any | None]
    #: ask every peer now (given a timeout); the callable returned waits for their answers, by
    #: worker index (None: a peer that refused or did not answer in time)
    peers: Callable[[float], Callable[[], Mapping[int, Any | None]]]


class WorkerMeshView:
    """The view source of a worker's page: this worker's reading and every peer's status, read
    when the page refreshes (the page's server calls ``view`` at most once per refresh interval
    however many browsers watch, and not at all while none does). A peer that does not answer, or
    that discovery gives no address for, shows as down with the reason. Not thread-safe (the
    page's server calls it under its lock)."""

    def __init__(
        self,
        own_index: int,
        own: Callable[[], admin_pb2.WorkerStats],
        peers: Callable[[float], Mapping[int, admin_pb2.WorkerStatus | None]],
        addresses: Callable[[], Mapping[int, tuple[str, int]]],
        graph: Mapping[str, Any] | None,
        history: EpochHistory,
        own_target: str,
        clock: Callable[[], float] = time.monotonic,
        panels: Sequence[PanelSource] = (),
    ) -> None:
        self._own_index = own_index
        self._own, self._peers, self._addresses = own, peers, addresses
        self._graph, self._history, self._own_target = graph, history, own_target
        self._clock = clock
        self._panels = tuple(panels)
        self._builder = ViewBuilder()
        self._before: dict[int, tuple[float, dict[str, tuple[int, int]]]] = {}

    def view(self) -> dict[str, Any]:
        mine = self._own()
        addresses = dict(self._addresses())
        # asked before the statuses, answered while they are: one refresh waits one timeout
        pending = [source.peers(PEER_TIMEOUT) for source in self._panels]
        answers = self._peers(PEER_TIMEOUT)
        peer_panels = [wait() for wait in pending]
        now = self._clock()
        own_target = self._own_target
        if self._own_index in addresses:
            own_target = "{}:{}".format(*addresses[self._own_index])
        stats: dict[str, admin_pb2.WorkerStats | None] = {own_target: mine}
        panel_answers: list[dict[str, Any | None]] = [{own_target: source.own()} for source in self._panels]
        errors: dict[str, str] = {}
        indices = {own_target: self._own_index}
        expected = set(range(mine.status.workers)) | set(answers)
        for worker in sorted(expected - {self._own_index}):
            address = addresses.get(worker)
            target = "{}:{}".format(*address) if address is not None else f"worker {worker}"
            indices[target] = worker
            status = answers.get(worker)
            if address is None:
                stats[target], errors[target] = None, "unreachable: no known address"
            elif status is None:
                stats[target] = None
                errors[target] = f"unreachable: no answer to its status within {PEER_TIMEOUT:g} s"
                self._before.pop(worker, None)
            else:
                peer = stats[target] = _as_stats(status, self._before.get(worker), now)
                self._before[worker] = (now, {c.component: (c.executed, c.emitted) for c in peer.components})
                for answers_of_panel, peer_answers in zip(panel_answers, peer_panels, strict=True):
                    answers_of_panel[target] = peer_answers.get(worker)
        view = self._builder.view(
            stats,
            errors,
            self._graph,
            indices=indices,
            history=self._history.rows(),
            panels=[
                (source.panel, answers) for source, answers in zip(self._panels, panel_answers, strict=True)
            ],
        )
        view["served_by"] = self._own_index
        return view
