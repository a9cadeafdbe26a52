"""`PeerAdmins`: this worker's Admin clients to its peers, for what the mesh decides together
without a coordinator (a whole-mesh stop, a rescale), and what its page asks them (their status,
the features' panels through the features' own services on the same channels)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from tuplemesh.client.channel import open_channel_from_config
from tuplemesh.errors import TransportError
from tuplemesh.topology.assignment import Epoch
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

__all__ = ["PeerAdmins"]

log = logging.getLogger(__name__)

#: A peer restarts within seconds (a rescale restarts every worker's server): reconnect soon after
#: it is back, not after gRPC's default backoff of up to two minutes, during which every call
#: to it fails at once and a draining peer would look gone.
_RECONNECT_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)


class PeerAdmins:
    """One Admin stub per peer worker, opened on first use at the address discovery gives.
    Thread-safe."""

    def __init__(
        self,
        conf: Mapping[str, Any],
        own_index: int,
        addresses: Callable[[], Mapping[int, tuple[str, int]]],
        proof: Callable[[int], tuple[tuple[str, str], ...]] = lambda worker: (),
    ) -> None:
        self._conf = conf
        self._own = own_index
        self._addresses = addresses
        #: This worker's name and a fresh proof of the mesh secret for the worker called
        #: (`mesh_proof`): a peer takes a Rebalance naming an epoch only from a member.
        self._proof = proof
        self._stubs: dict[int, tuple[str, grpc.Channel, admin_pb2_grpc.AdminStub]] = {}
        self._lock = threading.Lock()
        self._epoch_turn = 0  # where the next `epochs` call with ``most`` starts

    def _stub(self, worker: int, address: tuple[str, int]) -> admin_pb2_grpc.AdminStub:
        with self._lock:
            return self._stub_locked(worker, address)

    def _channel(self, worker: int, address: tuple[str, int]) -> grpc.Channel:
        """The channel to ``worker`` at ``address`` (the one its Admin stub uses)."""
        with self._lock:
            self._stub_locked(worker, address)
            return self._stubs[worker][1]

    def _stub_locked(self, worker: int, address: tuple[str, int]) -> admin_pb2_grpc.AdminStub:
        target = f"{address[0]}:{address[1]}"
        known = self._stubs.get(worker)
        if known is not None and known[0] == target:
            return known[2]
        if known is not None:
            known[1].close()  # the peer moved (a restarted pod)
        channel = open_channel_from_config(target, self._conf, _RECONNECT_OPTIONS)
        stub = admin_pb2_grpc.AdminStub(channel)
        self._stubs[worker] = (target, channel, stub)
        return stub

    def statuses(self, timeout: float) -> dict[int, admin_pb2.WorkerStatus | None]:
        """Every peer's status, asked in parallel; None for a peer that did not answer in ``timeout``."""
        calls = self._ask_every_peer("GetStatus", admin_pb2.GetStatusRequest(), timeout)
        return self._answers(calls, "status")

    def ask_every_peer(
        self, start: Callable[[grpc.Channel, float], grpc.Future], timeout: float
    ) -> Callable[[], dict[int, Any]]:
        """Start a call on every peer now, in parallel (while the caller asks something else):
        ``start(channel, timeout)`` starts it on one peer's channel (a feature's own service, as
        a feature panel asks it). The callable returned waits for the answers: None for a peer
        that gave none (refused, or no answer in ``timeout``)."""
        calls: dict[int, Any] = {}
        for worker, address in sorted(self._addresses().items()):
            if worker == self._own:
                continue
            try:
                calls[worker] = start(self._channel(worker, address), timeout)
            except (grpc.RpcError, ValueError, TransportError) as exc:  # a closed channel, a bad address
                log.debug("worker %d: cannot ask peer %d: %r", self._own, worker, exc)
                calls[worker] = None
        return lambda: self._answers(calls, "answer")

    def _ask_every_peer(self, method: str, request: Any, timeout: float) -> dict[int, Any]:
        """The future of Admin ``method`` called on every peer at once."""
        return {
            worker: getattr(self._stub(worker, address), method).future(request, timeout=timeout)
            for worker, address in sorted(self._addresses().items())
            if worker != self._own
        }

    def _answers(self, calls: Mapping[int, Any], what: str) -> dict[int, Any]:
        """Each call's answer, None for a peer that refused or did not answer in time."""
        out: dict[int, Any] = {}
        for worker, call in calls.items():
            if call is None:  # never started
                out[worker] = None
                continue
            try:
                out[worker] = call.result()
            except grpc.RpcError as exc:
                log.debug("worker %d: no %s from peer %d: %s", self._own, what, worker, exc.code())
                out[worker] = None
        return out

    def epochs(self, timeout: float, most: int | None = None) -> list[Epoch]:
        """The assignment epoch of the peers that answer within ``timeout``: every peer, or
        ``most`` of them, the next ``most`` in turn on each call (so repeated calls go round
        the whole mesh at a cost that does not grow with it)."""
        request = admin_pb2.GetAssignmentRequest()
        peers = [(w, a) for w, a in sorted(self._addresses().items()) if w != self._own]
        if most is not None and len(peers) > most:
            start = self._epoch_turn % len(peers)
            self._epoch_turn = start + most
            peers = (peers + peers)[start : start + most]
        calls = [
            self._stub(worker, address).GetAssignment.future(request, timeout=timeout)
            for worker, address in peers
        ]
        found = []
        for call in calls:
            try:
                found.append(Epoch.parse(call.result().epoch))
            except (grpc.RpcError, ValueError):
                continue  # not up yet, or a worker that names no epoch
        return found

    def rebalance(self, workers: range, epoch: Epoch, timeout: float) -> None:
        """Ask each of ``workers`` (not this one) to switch to ``epoch``; TransportError naming
        the first that did not accept. A worker the new epoch leaves out that is gone (no
        address, or unreachable: a scale-down removed its pod) is not waited for."""
        request = admin_pb2.RebalanceRequest(workers=epoch.workers, epoch=str(epoch))
        addresses = self._addresses()
        calls = {}
        for worker in workers:
            if worker == self._own:
                continue
            if worker not in addresses:
                if worker >= epoch.workers:
                    log.info("worker %d: worker %d, left out of %s, is gone", self._own, worker, epoch)
                    continue
                raise TransportError(f"worker {worker} has no known address; the mesh cannot rescale")
            # wait_for_ready: a peer between two connection attempts is reached, not skipped
            calls[worker] = self._stub(worker, addresses[worker]).Rebalance.future(
                request, timeout=timeout, wait_for_ready=True, metadata=self._proof(worker) or None
            )
        for worker, call in calls.items():
            try:
                call.result()
            except grpc.RpcError as exc:
                # unreachable until the deadline (wait_for_ready) or refused at once: gone
                gone = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                if worker >= epoch.workers and exc.code() in gone:
                    log.info("worker %d: worker %d, left out of %s, is gone", self._own, worker, epoch)
                    continue
                why = f"{exc.code().name} {exc.details()}"
                raise TransportError(f"worker {worker} did not accept the rescale to {epoch}: {why}") from exc

    def close(self) -> None:
        with self._lock:
            for _, channel, _ in self._stubs.values():
                channel.close()
            self._stubs.clear()
