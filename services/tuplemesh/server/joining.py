"""Which assignment epoch a starting worker takes: its own, or the one its running peers agree on.

A worker's command line (or pod template) says how many workers the mesh has, but the mesh may
have been rescaled since: a pod restarted from an old template, or started for a scale-up before
the mesh grew. So before its executors start, a worker asks its peers' Admin for their epoch.
The newest epoch among the answering peers (same topology code; the highest counter) wins over
its own when it is newer (a higher counter, or the same counter with another worker count);
when the epoch it takes has no place for its index it waits until the mesh grows to include it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn, Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tuplemesh.admission import service_of
from tuplemesh.config import as_config
from tuplemesh.core.admin_calls import ADMIN_SERVICE
from tuplemesh.grpcutil import reject
from tuplemesh.topology import Topology
from tuplemesh.topology.assignment import Epoch
from tuplemesh.transport.grpc_impl import bind_port, new_server
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

__all__ = ["WAITING_TO_JOIN", "AskedEpochs", "JoiningServer", "choose_epoch"]

#: The serving state (Admin ``GetStatus``) of a worker waiting to be included in the mesh.
WAITING_TO_JOIN = "WAITING_TO_JOIN"

log = logging.getLogger(__name__)

#: Between two asks while a worker waits for the mesh to grow to include it.
WAIT_SECS = 0.25


class PeerEpochs(Protocol):
    def epochs(self, timeout: float, most: int | None = None) -> list[Epoch]: ...


class AskedEpochs:
    """`choose_epoch`'s ``peer_epochs``: asks every peer for its epoch (1 s each) and keeps the
    last answers, so the caller knows whether a peer took part in the choice."""

    def __init__(self, peers: PeerEpochs) -> None:
        self._peers = peers
        self.last: list[Epoch] = []

    def __call__(self) -> list[Epoch]:
        self.last = self._peers.epochs(timeout=1.0)
        return self.last

    def agreed_on(self, epoch: Epoch) -> bool:
        """A peer of ``epoch``'s topology answered the last ask. False when the worker chose its
        own epoch because no peer answered: nothing says the mesh routes by it (its peers may be
        between two epochs of a rescale, their ports changing hands)."""
        return any(e.code == epoch.code for e in self.last)


def choose_epoch(
    index: int,
    own: Epoch,
    peer_epochs: Callable[[], list[Epoch]],
    stop: threading.Event,
    *,
    start_alone: bool = True,
    on_wait: Callable[[Epoch | None], None] | None = None,
) -> Epoch | None:
    """The epoch worker ``index`` starts at; None when ``stop`` was set while it waited.

    ``start_alone=False``: while no peer answers at all, wait (a pod of a StatefulSet the mesh
    follows, other than ordinal 0: its peers may be restarting at a rescale, and ordinal 0
    starts a new mesh). ``on_wait`` is called before each wait with the epoch the mesh runs
    (None while no peer answers): a `JoiningServer` serves while the worker waits."""
    waited = False
    while True:
        answers = peer_epochs()
        epochs = [e for e in answers if e.code == own.code]
        if not epochs and (waited or (not answers and not start_alone)):
            # the mesh it waits for is restarting at its next epoch: wait for it, not for no one
            if on_wait is not None:
                on_wait(None)
            if stop.wait(WAIT_SECS):
                return None
            continue
        newest = max(epochs, key=lambda e: e.counter, default=own)
        chosen = newest if newest.counter >= own.counter else own
        if index < chosen.workers:
            if chosen != own:
                log.warning(
                    "worker %d: started for epoch %s, its peers route by %s: taking theirs",
                    index,
                    own,
                    chosen,
                )
            return chosen
        log.log(
            logging.DEBUG if waited else logging.INFO,
            "worker %d: the mesh runs %d worker(s) (epoch %s); waiting to be included",
            index,
            chosen.workers,
            chosen,
        )
        waited = True
        if on_wait is not None:
            on_wait(chosen)
        if stop.wait(WAIT_SECS):
            return None


class _WaitingAdmin(admin_pb2_grpc.AdminServicer):
    """Admin of a worker waiting to join: its status; every other call is refused, naming why."""

    def __init__(self, server: JoiningServer) -> None:
        self._server = server

    def GetStatus(
        self, request: admin_pb2.GetStatusRequest, context: grpc.ServicerContext
    ) -> admin_pb2.WorkerStatus:
        s = self._server
        return admin_pb2.WorkerStatus(
            topology=s.topology,
            worker=s.index,
            workers=s.own.workers,
            epoch=str(s.own),
            uptime_seconds=time.monotonic() - s.started,
            state=WAITING_TO_JOIN,
            idle=True,
            local_queues_empty=True,
        )

    def _refuse(self, context: grpc.ServicerContext) -> NoReturn:
        context.abort(grpc.StatusCode.UNAVAILABLE, self._server.why())
        raise AssertionError("unreachable")  # abort raises

    # GetAssignment too: the epoch of a worker that waits is no epoch the mesh routes by, and
    # the workers that ask their peers for epochs (joining, following a rescale) must skip it
    def GetAssignment(self, request: Any, context: grpc.ServicerContext) -> NoReturn:
        self._refuse(context)

    def ListQueues(self, request: Any, context: grpc.ServicerContext) -> NoReturn:
        self._refuse(context)

    def WatchStats(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self._refuse(context)

    def Emit(self, request: Any, context: grpc.ServicerContext) -> NoReturn:
        self._refuse(context)

    def Drain(self, request: Any, context: grpc.ServicerContext) -> NoReturn:
        self._refuse(context)

    def WatchTuples(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        self._refuse(context)

    def Rebalance(self, request: Any, context: grpc.ServicerContext) -> NoReturn:
        self._refuse(context)

    def GetEpochHistory(self, request: Any, context: grpc.ServicerContext) -> NoReturn:
        self._refuse(context)


class _WaitingFeatureCalls(grpc.GenericRpcHandler):
    """The calls features add to Admin, whatever their names (no feature runs yet): answered as
    Admin's own are while the worker waits, UNAVAILABLE saying why, not UNIMPLEMENTED."""

    def __init__(self, server: JoiningServer) -> None:
        self._server = server

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        if service_of(handler_call_details.method) != ADMIN_SERVICE.full_name:
            return None

        def refuse(request: bytes, context: grpc.ServicerContext) -> NoReturn:
            reject(context, grpc.StatusCode.UNAVAILABLE, self._server.why())

        return grpc.unary_unary_rpc_method_handler(refuse)


class JoiningServer:
    """What a worker serves on its port while it waits to be included in the mesh: health
    NOT_SERVING ("tuplemesh.v1.Admin" SERVING: it is alive, a liveness probe must not restart
    it) and Admin ``GetStatus`` with state `WAITING_TO_JOIN`, its index and the epoch it was
    started for. It starts at the first wait (`wait`, choose_epoch's ``on_wait``) and must be
    stopped before the worker itself binds the port."""

    def __init__(
        self, conf: Mapping[str, Any], topology: Topology, index: int, own: Epoch, port: int
    ) -> None:
        self.conf = as_config(conf).with_topology(topology.conf)
        self.topology = topology.name
        self.index = index
        self.own = own
        self.port = port
        self.started = time.monotonic()
        self.mesh: Epoch | None = None
        self._server: grpc.Server | None = None

    def why(self) -> str:
        mesh = (
            "no peer answers yet"
            if self.mesh is None
            else f"the mesh runs {self.mesh.workers} worker(s), epoch {self.mesh}"
        )
        return (
            f"worker {self.index} is waiting to be included in the mesh ({mesh}); "
            "ask a worker of the mesh, or rescale it to include this one"
        )

    def wait(self, mesh: Epoch | None) -> None:
        """The worker waits (again): serve, from the first wait on."""
        self.mesh = mesh
        if self._server is not None:
            return
        server = new_server(self.conf)
        checks = health.HealthServicer()
        for service in ("", "tuplemesh.v1.Transfer"):
            checks.set(service, health_pb2.HealthCheckResponse.NOT_SERVING)
        checks.set("tuplemesh.v1.Admin", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(checks, server)
        admin_pb2_grpc.add_AdminServicer_to_server(_WaitingAdmin(self), server)
        server.add_generic_rpc_handlers((_WaitingFeatureCalls(self),))  # after Admin's own
        bind_port(server, self.conf["worker.bind.host"], self.port, self.conf)
        server.start()
        self._server = server
        log.info(
            "worker %d: serving health (NOT_SERVING) and Admin.GetStatus (%s) on port %d while it waits",
            self.index,
            WAITING_TO_JOIN,
            self.port,
        )

    def stop(self) -> None:
        """Release the port (the worker binds it next). Idempotent."""
        if self._server is not None:
            self._server.stop(0).wait(5.0)
            self._server = None
