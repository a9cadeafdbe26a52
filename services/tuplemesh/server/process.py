"""`WorkerProcess`: the composition root of one worker process: the Worker and what serves it.

One gRPC server on one port carries Transfer (through the transport), Admin, Gateway, health and
reflection; ``/metrics`` is served on its own HTTP port.

Start-up: the Worker is built and its executors start; the gRPC server (one port, Storm's 6700 by
default) starts serving; health turns SERVING once every peer connection is up. SIGTERM drains:
health NOT_SERVING, spouts stop, emit buffers flush, in-flight batches are delivered and
acknowledged (across the whole mesh when every worker stops: `tuplemesh.server.stopping`), then
the server stops with a grace period. A second SIGTERM exits at once.
"""

from __future__ import annotations

import errno
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, cast

from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from tuplemesh.admission import AdmissionLimits, CallAdmission
from tuplemesh.config import Config
from tuplemesh.core.panel import MeshPanel
from tuplemesh.discovery import PeerDirectory, ReplicaSource
from tuplemesh.errors import RescaleRefusedError, TransportError
from tuplemesh.grpcutil import wake_blocked_grpc_threads_less
from tuplemesh.logutil import RateLimitFilter
from tuplemesh.rpcerrors import RpcErrors
from tuplemesh.security import REBALANCE, TlsConnections, mesh_proof, mesh_secret
from tuplemesh.server.admin import AdminServicer, StatsStream
from tuplemesh.server.metrics_http import MetricsEndpoint
from tuplemesh.server.peer_admin import PeerAdmins
from tuplemesh.server.reflection import enable_reflection, tuplemesh_services
from tuplemesh.server.settings import ServerSettings
from tuplemesh.server.signals import TerminationSignals
from tuplemesh.server.stopping import MeshDrain
from tuplemesh.topology import Topology
from tuplemesh.topology.assignment import Epoch
from tuplemesh.transport import SharedServerContext
from tuplemesh.transport.grpc_impl import bind_port, new_server
from tuplemesh.ui.graph import topology_graph
from tuplemesh.ui.mesh import EpochHistory, PanelSource, WorkerMeshView
from tuplemesh.ui.server import UiApp
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc
from tuplemesh.worker.assembly import assemble_worker, prepared_context, worker_conf
from tuplemesh.worker.interpreter import freeze_startup_objects, tune_interpreter
from tuplemesh.worker.memtune import return_large_buffers_to_system

__all__ = ["WorkerProcess"]

log = logging.getLogger(__name__)

#: Health entries that mean "ready for traffic": NOT_SERVING until every peer is connected and
#: again while draining. "tuplemesh.v1.Admin" means "alive" (liveness) and is SERVING as long as
#: the server runs, so a drained or slow-starting worker is never restarted by its probe.
READINESS = ("", "tuplemesh.v1.Transfer")

#: Unless metrics.port is set, /metrics listens on the worker's port plus this: 6700 -> 9100,
#: the port Prometheus exporters conventionally start at, and one more for each next worker port.
METRICS_PORT_OFFSET = 2400

#: How often a worker asks its peers for their assignment epoch (to follow a rescale it missed)
#: when nothing says it should sooner: a peer at a newer epoch that sends to it is refused, and
#: that refusal (counted by the binding, looked at every `EPOCH_LOOK_SECS`) makes it ask at once.
#: The asking is the costly part on a host of many workers (three unary calls each way per
#: worker per poll), so it is rare; the look is a counter read.
EPOCH_POLL_SECS = 5.0
EPOCH_LOOK_SECS = 0.25
#: Peers asked for their epoch on each poll, in turn. A worker that missed a rescale finds almost
#: every peer at the new epoch, so a few suffice; asking all of them made the mesh's polls grow as
#: N (N - 1): 8,000 calls a second for 64 workers, more than 2 cores could answer.
EPOCH_POLL_PEERS = 3

#: Worker 0 starts a rescale to the StatefulSet's replicas once its mesh serves (every peer of
#: the current epoch connected, so none is still restarting from the previous rescale), or
#: after this long without (a pod of a scale-up that never started must not pin the mesh).
FOLLOW_UNREADY_SECS = 30.0

#: How often worker 0 looks again at the replicas it was told about while it waits to be ready
#: (a change wakes it at once).
REPLICAS_LOOK_SECS = 0.5

#: Backoff between refused attempts to rescale to the replicas (a peer stopping or unreachable).
FOLLOW_MIN_BACKOFF_SECS = 0.5
FOLLOW_MAX_BACKOFF_SECS = 5.0


def _in_use(host: str, port: int) -> bool:
    """True when another socket listens on ``host:port`` (binding as gRPC does, SO_REUSEADDR)."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError:
        return False  # an unknown host: gRPC's bind says so
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


class WorkerProcess:
    """Owns the gRPC server and the Worker of this process."""

    @property
    def epoch(self) -> Epoch:
        """The assignment epoch this worker routes by (its plan's): every Transfer stream names
        it, and a receiver refuses another one."""
        return self.worker.plan.epoch

    def __init__(
        self,
        topology: Topology,
        conf: Config,
        *,
        index: int,
        num_workers: int,
        port: int,
        directory: PeerDirectory,
        signals: TerminationSignals | None = None,
        replicas: ReplicaSource | None = None,
        epoch_history: EpochHistory | None = None,
        epoch_confirmed: bool = True,
        epoch: Epoch | None = None,
    ) -> None:
        """``epoch_confirmed=False``: no peer has said which epoch the mesh routes by (none
        answered when this worker chose it: a new mesh starting, or peers between two epochs of
        a rescale, their ports changing hands). The spouts are held until one answers, and a
        newer epoch is followed before anything is sent: what this worker sent by an epoch its
        peers then refuse would be lost. At most ``worker.epoch.confirm.secs``. ``epoch``: the
        one the process chose to route by (None: the configured one, ``topology.epoch``)."""
        self.conf = worker_conf(conf, topology, index, num_workers, epoch)
        #: Set by a rescale: the epoch this worker's successor starts at.
        self.next_epoch: Epoch | None = None
        #: The epochs this process routed by (shown by the UI); the process's, passed from one
        #: epoch's worker to the next, as a rescale replaces this object within the process.
        self.epoch_history = epoch_history if epoch_history is not None else EpochHistory()
        self._rescale_lock = threading.Lock()
        #: Set by a rescale every worker of this epoch takes part in (they all drain together).
        self._with_mesh = False
        self._epoch_confirmed = epoch_confirmed or num_workers == 1  # alone: it sends to no one
        settings = self.settings = ServerSettings.from_config(self.conf)
        tune_interpreter(self.conf)
        return_large_buffers_to_system()
        self.transport = settings.transport
        self.context = prepared_context(self.conf)
        #: warned about once the worker serves (a worker that cannot start says only why)
        self._transfer_open = (
            self.transport != "local" and not settings.tls_enabled and not mesh_secret(self.conf)
        )
        self.tls_connections = TlsConnections() if settings.tls_enabled else None
        self.rpc_errors = RpcErrors(self.tls_connections.on_call if self.tls_connections else None)
        # gRPC logs a traceback per undecodable request (_common) and per handler that raised
        # (_server): keep a sample, lines cut short (they are all counted)
        for name in ("grpc._common", "grpc._server"):
            grpc_log = logging.getLogger(name)
            if not any(isinstance(f, RateLimitFilter) for f in grpc_log.filters):  # once per process
                grpc_log.addFilter(RateLimitFilter(settings.log_interval_seconds))
        self.admission = CallAdmission(
            AdmissionLimits.from_config(self.conf), settings.stream_idle_timeout_seconds
        )
        self.server = new_server(self.conf, self.rpc_errors, self.admission)
        if self.context.capabilities.shares_server:
            cast(SharedServerContext, self.context).use_server(self.server)
        self.directory = directory
        #: The worker count the mesh follows (a StatefulSet's replicas); None: fixed.
        self.replicas = replicas
        self.worker = assemble_worker(
            topology,
            index,
            num_workers,
            self.conf,
            self.context,
            port=port,
            peers=directory.snapshot(),
            epoch=epoch,
            directory=directory,  # its counts go into the worker's snapshot
        )
        directory.subscribe(self.worker.transfer.update_peers)
        # a forwarded rescale proves this worker a member, as its Transfer streams do: a fresh
        # proof per call, for the worker called
        secret, topology_id = mesh_secret(self.conf), self.worker.topology_id

        def proof(receiver: int) -> tuple[tuple[str, str], ...]:
            return mesh_proof(secret, topology_id, index, receiver, REBALANCE)

        self.peer_admins = PeerAdmins(self.conf, index, directory.snapshot, proof)
        self._peers_closed = False  # set by shutdown: the UI asks the peers no more
        self.health = health.HealthServicer()
        self._state = "STARTING"
        self._health_lock = threading.Lock()  # _state and the readiness entries change together
        self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
        self.health.set("tuplemesh.v1.Admin", health_pb2.HealthCheckResponse.SERVING)
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        admin_pb2_grpc.add_AdminServicer_to_server(
            AdminServicer(
                self.worker,
                self.transport,
                self.drain,
                lambda: self._state,
                self.rebalance,
                self.epoch_history.rows,
            ),
            self.server,
        )
        # the features' services (the Gateway's): a draining worker takes no new work through them
        try:
            served = self.worker.serve_features(self.server, accepting=lambda: self._state != "NOT_SERVING")
            added_to_admin = served.admin_calls.generic_handler()
            if added_to_admin is not None:  # after Admin's own: those names are refused to features
                self.server.add_generic_rpc_handlers((added_to_admin,))
            enable_reflection(
                [*tuplemesh_services(), *served.services, health.SERVICE_NAME],
                self.server,
                admin_calls=served.admin_calls.methods(),
            )
        except BaseException:  # a feature's call refused: nothing runs yet but the transport's sockets
            self.context.term()
            raise
        try:
            if port and _in_use(settings.bind_host, port):  # before gRPC logs its own lines about it
                raise TransportError(f"{settings.bind_host}:{port} is in use")
            self.port = bind_port(self.server, settings.bind_host, port, self.conf, self.tls_connections)
        except TransportError as exc:
            self.context.term()  # nothing else runs yet; a transport's sockets must not outlive this
            if self.conf.get("tls.enabled"):  # grpc says no more than "cannot bind" for bad PEMs too
                raise TransportError(
                    f"--port {port}: cannot listen on {settings.bind_host}:{port} with TLS: the port is "
                    f"in use, or tls.cert.file {self.conf['tls.cert.file']!r} / tls.key.file "
                    f"{self.conf['tls.key.file']!r} is not a PEM certificate and its key"
                ) from exc
            raise TransportError(
                f"--port {port}: cannot listen on {settings.bind_host}:{port} (in use, or not an "
                "address of this host: worker.bind.host); give each worker of a host its own --port"
            ) from exc
        except BaseException:
            self.context.term()
            raise
        self.metrics: MetricsEndpoint | None = None
        self.signals = signals or TerminationSignals()
        # set by a signal or by a rescale; only a signal sets ``signals.requested``, so after a
        # rescale the process knows whether it was asked to stop or to go on at the next epoch
        self._stop = threading.Event()
        self.signals.also_set(self._stop)

    def _set_health(self, status: Any) -> None:
        for service in READINESS:
            self.health.set(service, status)

    @property
    def state(self) -> str:
        return self._state

    def start(self) -> None:
        # /metrics binds first: a port in use (another worker's) must fail the start before any
        # thread of this one runs, so the process exits at once instead of serving half-started
        settings = self.settings
        try:
            port = self.metrics_port()
        except TransportError:
            self.abort()
            raise
        if settings.metrics_enabled and port:
            try:
                self.metrics = MetricsEndpoint(
                    self.worker,
                    settings.metrics_bind_host,
                    port,
                    self.rpc_errors,
                    self.tls_connections,
                    self.admission,
                    self._ui(settings.metrics_bind_host, port),
                )
            except OSError as exc:
                self.abort()
                how = (
                    "metrics.port"
                    if self.conf.given("metrics.port")
                    else f"metrics.port (--port + {METRICS_PORT_OFFSET})"
                )
                raise TransportError(
                    f"{how} {port}: cannot serve /metrics on {settings.metrics_bind_host}:{port}: "
                    f"{exc.strerror or exc}; set metrics.port (TUPLEMESH_METRICS_PORT) to a free port, or 0"
                ) from exc
        try:
            # registers Transfer on the shared server before it starts
            self.worker.start(hold_spouts=not self._epoch_confirmed)
            self.server.start()
        except BaseException:
            self.abort()
            raise
        self.epoch_history.record(str(self.epoch), self.epoch.workers)  # it routes by it from now
        freeze_startup_objects(self.conf)
        threading.Thread(target=self._watch_readiness, name="readiness", daemon=True).start()
        threading.Thread(target=self._refresh_peers, name="refresh-peers", daemon=True).start()
        threading.Thread(target=self._follow_epoch, name="follow-epoch", daemon=True).start()
        if self.replicas is not None and self.worker.index == 0:
            threading.Thread(target=self._follow_replicas, name="follow-replicas", daemon=True).start()

    def _ui(self, host: str, port: int) -> UiApp | None:
        """The web UI of the whole mesh, served by this worker (which asks its peers' Admin for
        theirs, through the clients it rescales with), unless off."""
        if not self.conf["ui.enabled"]:
            return None
        stream = StatsStream(self.worker, self.transport, lambda: self._state)

        def peer_statuses(timeout: float) -> dict[int, admin_pb2.WorkerStatus | None]:
            # once shutdown closed the peer clients, asking would open them again (and leave them
            # open): the last second of a stopping worker's page shows its peers unanswered
            return {} if self._peers_closed else self.peer_admins.statuses(timeout)

        def peer_answers(panel: MeshPanel) -> Callable[[float], Callable[[], Mapping[int, Any | None]]]:
            def ask(timeout: float) -> Callable[[], Mapping[int, Any | None]]:
                if self._peers_closed:
                    return lambda: {}
                return self.peer_admins.ask_every_peer(panel.ask, timeout)

            return ask

        def own_answer(name: str, panel: MeshPanel) -> Callable[[], Any | None]:
            # the worker's running parts are keyed by their spec's name (FeatureSet.build checks)
            return lambda: panel.local(self.worker.index, self.worker.features.get(name))

        # a mesh shares its configuration: a panel not shown here (what it shows is off, or not
        # allowed out) is not asked of any peer either; the page has every panel's script, which
        # shows nothing without entries
        every = self.worker.feature_set.panels()
        panels = [(name, panel) for name, panel in every if panel.shown(self.conf)]
        mesh = WorkerMeshView(
            self.worker.index,
            stream.next,
            peer_statuses,
            self.directory.snapshot,
            topology_graph(self.worker.topology),
            self.epoch_history,
            f"{host}:{port}",
            panels=[
                PanelSource(panel, own_answer(name, panel), peer_answers(panel)) for name, panel in panels
            ],
        )
        return UiApp(
            mesh.view,
            token=self.conf["admin.token"],
            max_clients=self.conf["ui.events.clients"],
            stream_seconds=self.settings.ui_stream_seconds,
            panels=[panel for _, panel in every],
        )

    def metrics_port(self) -> int:
        """The /metrics port: ``metrics.port`` when set, else this worker's port plus
        METRICS_PORT_OFFSET (workers on one host, on ports 6700, 6701, ..., never collide)."""
        if self.conf.given("metrics.port"):
            return int(self.settings.metrics_port)
        port = self.port + METRICS_PORT_OFFSET
        if port > 65535:
            raise TransportError(
                f"metrics.port: --port {self.port} + {METRICS_PORT_OFFSET} is beyond 65535; set metrics.port"
            )
        return port

    def abort(self) -> None:
        """Undo a start that failed: nothing of this worker may keep the process alive."""
        if self.metrics is not None:
            self.metrics.stop()
            self.metrics = None
        self.server.stop(None)
        self.worker.stop(1.0)
        self.directory.stop()
        self.context.term()

    def _refresh_peers(self) -> None:
        """Re-apply discovery's view every task.refresh.poll.secs (changes also apply at once)."""
        interval = self.settings.refresh_poll_seconds
        while not self._stop.wait(interval):
            self.worker.transfer.update_peers(self.directory.snapshot())

    def _follow_epoch(self) -> None:
        """A worker that missed a rescale (it started just before one, or was down during it)
        sees its peers at a newer epoch and rescales itself to it: at once when a peer's batches
        are refused for naming another epoch, every `EPOCH_POLL_SECS` otherwise."""
        if not self._epoch_confirmed and not self._confirm_epoch():
            return
        refused = self.worker.epoch_refused_batches()
        next_poll = time.monotonic() + EPOCH_POLL_SECS
        while not self._stop.wait(EPOCH_LOOK_SECS):
            seen = self.worker.epoch_refused_batches()
            if seen == refused and time.monotonic() < next_poll:
                continue
            refused, next_poll = seen, time.monotonic() + EPOCH_POLL_SECS
            if self._follow_newer(self._peer_epochs()):
                return

    def _confirm_epoch(self) -> bool:
        """Ask peers for their epoch until one answers, with the spouts held: at a newer
        epoch, follow it (nothing was sent by this one); otherwise release the spouts. After
        ``worker.epoch.confirm.secs`` without an answer they are released anyway (a mesh whose
        other workers are not up yet). False when this worker follows a newer epoch or stops."""
        deadline = time.monotonic() + self.settings.epoch_confirm_seconds
        while not self._stop.wait(EPOCH_LOOK_SECS):
            epochs = self._peer_epochs()
            if self._follow_newer(epochs):
                return False
            if epochs:
                log.info("worker %d: a peer answers at %s: spouts released", self.worker.index, epochs[0])
            elif time.monotonic() >= deadline:
                log.warning(
                    "worker %d: no peer answered within %.0fs; its spouts start at epoch %s unconfirmed",
                    self.worker.index,
                    self.settings.epoch_confirm_seconds,
                    self.epoch,
                )
            else:
                continue
            self.worker.release_spouts()
            return True
        return False

    def _peer_epochs(self) -> list[Epoch]:
        """The epochs of this worker's topology the next `EPOCH_POLL_PEERS` peers answer with (a
        few in turn: a worker that missed a rescale finds almost every peer at the new epoch, and
        a mesh of N must not ask N (N - 1) times a look)."""
        asked = self.peer_admins.epochs(timeout=1.0, most=EPOCH_POLL_PEERS)
        return [e for e in asked if e.code == self.epoch.code]

    def _follow_newer(self, epochs: list[Epoch]) -> bool:
        """Rescale this worker alone to the newest of ``epochs`` when it is newer than its own
        (its peers route by it); True when it tried."""
        newest = max(epochs, key=lambda e: e.counter, default=self.epoch)
        if newest.counter <= self.epoch.counter:
            return False
        try:
            self.rebalance(newest.workers, str(newest), catching_up=True)
        except RescaleRefusedError as exc:
            log.warning("worker %d: cannot follow the mesh to epoch %s: %s", self.worker.index, newest, exc)
        return True

    def _follow_replicas(self) -> None:
        """Worker 0 rescales the mesh to the replicas its StatefulSet asks for (``kubectl scale``,
        an autoscaler). Ordinal 0 survives every scale, so one worker starts each rescale; the
        pods a scale-down removes drain with the mesh (see `removed`)."""
        assert self.replicas is not None
        changed = threading.Event()
        self.replicas.subscribe(lambda _: changed.set())
        started = time.monotonic()
        backoff = FOLLOW_MIN_BACKOFF_SECS
        while not self._stop.is_set():
            wanted = self.replicas.replicas()
            ready = self._state == "SERVING" or time.monotonic() - started >= FOLLOW_UNREADY_SECS
            # 0 replicas: every pod is being removed, ordinal 0 too; their SIGTERMs stop the mesh
            if not wanted or wanted == self.epoch.workers or not ready:
                changed.wait(REPLICAS_LOOK_SECS)
                changed.clear()
                backoff = FOLLOW_MIN_BACKOFF_SECS
                continue
            try:
                self.rebalance(wanted, "")
                return
            except RescaleRefusedError as exc:
                log.warning(
                    "worker 0: the StatefulSet asks for %d worker(s); rescale refused, retry in %.1fs: %s",
                    wanted,
                    backoff,
                    exc,
                )
            self._stop.wait(backoff)
            backoff = min(backoff * 2, FOLLOW_MAX_BACKOFF_SECS)

    def removed(self) -> bool:
        """True when the StatefulSet's replicas no longer include this worker: a scale-down
        removes it, and its tuples must reach the final checkpoint of the mesh it leaves."""
        wanted = None if self.replicas is None else self.replicas.replicas()
        return wanted is not None and self.worker.index >= wanted

    def _watch_readiness(self) -> None:
        """SERVING once executors run and every peer connection is up; afterwards NOT_SERVING
        while a peer this worker sends to has been unreachable for ``worker.peer.grace.secs``
        (its tuples wait for it, so traffic sent here would stall), SERVING again once it is
        back. Draining is NOT_SERVING for good; `state` stays SERVING while peers are away
        (Admin callers read NOT_SERVING as "drained"). A peer's shutdown notice, which stops this
        worker receiving for good, drains it: NOT_SERVING, and Gateway Publish refused."""
        while not self._stop.is_set() and self._state == "STARTING":
            if self._drained_by_notice():
                return
            if self.worker.peers_connected():
                with self._health_lock:
                    if self._state != "STARTING":
                        return
                    self._state = "SERVING"
                    self._set_health(health_pb2.HealthCheckResponse.SERVING)
                log.info("worker %d serving on port %d", self.worker.index, self.port)
                if self._transfer_open:
                    log.warning(
                        "worker %d: Transfer is open to anyone who reaches port %d: with neither "
                        "tls.enabled nor a mesh secret, any client can inject tuples, forge senders "
                        "and send shutdown notices; set mesh.secret.file (the same secret on every "
                        "worker) or tls.enabled outside local development",
                        self.worker.index,
                        self.port,
                    )
                break
            time.sleep(0.02)
        grace = self.settings.peer_grace_seconds
        down_since: dict[int, float] = {}
        ready = True
        # a look reads every peer link's stats: at most once a second (a mesh of 64 workers
        # looked at 63 links four times a second, idle)
        while not self._stop.wait(min(1.0, grace / 4)) and self._state == "SERVING":
            if self._drained_by_notice():
                return
            now = time.monotonic()
            down = self.unreachable_peers()
            down_since = {peer: down_since.get(peer, now) for peer in down}
            gone = sorted(peer for peer, since in down_since.items() if now - since >= grace)
            with self._health_lock:  # a drain's NOT_SERVING must never be overwritten
                if self._state != "SERVING":
                    return
                if gone and ready:
                    ready = False
                    self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
                    log.warning(
                        "worker %d: peer(s) %s unreachable for %.1fs or more: NOT_SERVING until back",
                        self.worker.index,
                        ", ".join(map(str, gone)),
                        grace,
                    )
                elif not down and not ready:
                    ready = True
                    self._set_health(health_pb2.HealthCheckResponse.SERVING)
                    log.info("worker %d: every peer is reachable again: SERVING", self.worker.index)

    def _drained_by_notice(self) -> bool:
        """Drain once a peer's shutdown notice stopped this worker receiving; True when it did.
        Nothing reaches its tasks from its peers any more: it must not look ready, nor take rows
        whose tuples may need a peer to send them back here."""
        if not self.worker.stopped_by_notice():
            return False
        log.warning(
            "worker %d: a peer's shutdown notice stopped it receiving for good: draining "
            "(NOT_SERVING; Gateway Publish answers UNAVAILABLE)",
            self.worker.index,
        )
        self.drain()
        return True

    def unreachable_peers(self) -> list[int]:
        """The peers this worker sends to whose link is not up now."""
        connections = self.worker.transfer.connections
        down = []
        for peer in sorted(self.worker.transfer.expected):
            connection = connections.get(peer)
            if connection is None or connection.stats().channel_state != "READY":
                down.append(peer)
        return down

    def _abandon_sends_to_newer_epoch(self) -> None:
        """A worker catching up with a rescale its peers made: they route by the newer epoch and
        refuse every batch this life sends them (kept by the sender, never acknowledged). Once
        such batches fill the send windows and the transfer queue, executors wait in ``emit``
        forever, the spouts never return from ``next_tuple`` and the stop is not clean, so the
        successor never starts. Nothing this life queued for a peer can be delivered, so the
        transfer path halts first: what it held counts as lost (``tuplemesh_transfer_tuples_*``,
        ``tuplemesh_peer_tuples_lost_on_close_total``; with acking on, the spouts replay it), and
        executors blocked on it stop emitting remotely."""
        log.warning(
            "worker %d: catching up with epoch %s; its peers refuse what this epoch sends them, "
            "so what is queued for them is abandoned",
            self.worker.index,
            self.next_epoch,
        )
        self.worker.transfer.halt()

    def drain(self) -> str:
        """Stop the spouts; health NOT_SERVING. Idempotent; returns the new state."""
        if self._state != "NOT_SERVING":
            # NOT_SERVING first: draining peers take this worker's batches only once they read
            # it, and a spout blocked on a full send window returns from next_tuple only when
            # they do. Peers stop on the mesh's still counters only once this worker's status
            # also says its spouts are quiet (a spout inside next_tuple would fool them).
            with self._health_lock:
                self._state = "NOT_SERVING"
                self._set_health(health_pb2.HealthCheckResponse.NOT_SERVING)
            log.info("worker %d draining", self.worker.index)
            self.worker.deactivate_spouts()
        return self._state

    def rebalance(self, workers: int, epoch: str, *, catching_up: bool = False) -> str:
        """Rescale the mesh to ``workers`` (Admin.Rebalance); returns the new epoch's text.

        Without ``epoch`` this worker starts the rescale: the next epoch is one counter up, and
        every other worker of the current assignment is asked first. Then this worker drains
        with the mesh (spouts pause, in-flight tuples drain, the final checkpoint is taken) and
        ends, so its successor starts at the new epoch (see ``next_epoch``): a new WorkerProcess
        in the same process (``tuplemesh worker``). ``catching_up``: this worker missed a rescale
        its peers made; it drains alone (they run at the new epoch already). Any thread.
        """
        with self._rescale_lock:
            stopping = self._state == "NOT_SERVING" or self._stop.is_set()
            if not epoch:
                if stopping:
                    raise RescaleRefusedError(
                        f"worker {self.worker.index} is stopping; rescale it afterwards"
                    )
                target = Epoch(workers, self.epoch.code, self.epoch.counter + 1)
            else:
                try:
                    target = Epoch.parse(epoch)
                except ValueError as exc:
                    raise RescaleRefusedError(str(exc)) from None
                if target.code != self.epoch.code:
                    raise RescaleRefusedError(
                        f"epoch {target} is of another topology code than this worker's {self.epoch}"
                    )
            if target == self.next_epoch:
                return str(target)  # asked again (the initiator retries): already on its way
            self._check_reachable(target)
            if stopping:
                if epoch and self.next_epoch is None and self.worker.index >= target.workers:
                    # a scale-down's SIGTERM came first: this worker leaves either way, and
                    # drains with the mesh that goes on without it
                    log.warning("worker %d: stopping, and not part of epoch %s", self.worker.index, target)
                    self.next_epoch = target
                    return str(target)
                raise RescaleRefusedError(f"worker {self.worker.index} is stopping; rescale it afterwards")
            if not epoch:
                try:
                    self.peer_admins.rebalance(range(self.epoch.workers), target, timeout=10.0)
                except TransportError as exc:
                    raise RescaleRefusedError(str(exc)) from None
            log.warning("worker %d: rescale from %s to %s", self.worker.index, self.epoch, target)
            self.next_epoch = target
            self._with_mesh = not catching_up
            self._stop.set()  # serve() drains with the mesh, and the process hands over
            return str(target)

    def _check_reachable(self, target: Epoch) -> None:
        """RescaleRefusedError unless the mesh can run at ``target``: at least one worker, an
        epoch after this worker's, and an address for each of its workers. Checked before any
        worker is asked, so a refused rescale leaves every worker running at its epoch."""
        if target.workers < 1:
            raise RescaleRefusedError(f"epoch {target} has {target.workers} workers; a mesh needs >= 1")
        if target.counter <= self.epoch.counter:
            raise RescaleRefusedError(
                f"epoch {target} is not after this worker's {self.epoch} (its counter must be higher)"
            )
        addresses = self.directory.snapshot()
        missing = [i for i in range(target.workers) if i != self.worker.index and i not in addresses]
        if missing:
            raise RescaleRefusedError(
                f"cannot rescale to {target.workers} worker(s): no address known for worker(s) "
                f"{', '.join(map(str, missing))} (discovery knows {len(addresses)} address(es))"
            )

    def serve(self) -> int:
        """Run until SIGTERM/SIGINT; drain and stop. Returns the process exit code."""
        self.signals.install()
        wake_blocked_grpc_threads_less()
        self.start()
        while not self._stop.wait(0.5):
            pass
        return 0 if self.shutdown() else 1

    def shutdown(self, grace: float = 2.0) -> bool:
        """Drain, deliver what is in flight, stop the server. True when everything ended cleanly."""
        deadline = time.monotonic() + self.settings.shutdown_timeout_seconds
        self._stop.set()  # the background threads end (shutdown may be called without serve)
        if self.next_epoch is not None and not self._with_mesh:
            self._abandon_sends_to_newer_epoch()
        self.drain()
        # Batches from peers that still run are refused (never acknowledged): their senders keep
        # them for our successor. Peers that drain too are served until the mesh is idle.
        drain = MeshDrain(
            self.worker.index,
            self.worker.transfer.expected,
            lambda: self.worker.snapshot(feature_sections=False),
            self.peer_admins,
            self.worker.drain_waits(),
            removed=self.removed,
            rescaling=str(self.epoch) if self._with_mesh else None,
        )
        self.worker.admit(drain.admission)
        outcome = drain.wait(deadline)
        log.info(
            "worker %d stops: %s (%.1fs left; %d batch(es) refused from running peers)",
            self.worker.index,
            outcome,
            max(0.0, deadline - time.monotonic()),
            drain.refused_batches,
        )
        self._peers_closed = True
        self.peer_admins.close()
        clean = self.worker.stop(max(1.0, deadline - time.monotonic()))
        # Bounded: grpcio's shutdown event can stay unset after a client sent an undecodable
        # message on a stream (seen with random bytes on Transfer and Publish), and a worker
        # must exit anyway; the RPCs are cancelled after ``grace`` regardless.
        if not self.server.stop(grace).wait(grace + 3.0):
            log.warning("gRPC server did not report its shutdown within %.0fs; exiting", grace + 3.0)
        self.directory.stop()  # the replicas source outlives this worker: ``tuplemesh worker`` stops it
        if self.metrics is not None:
            self.metrics.stop()
        self.context.term()
        return clean
