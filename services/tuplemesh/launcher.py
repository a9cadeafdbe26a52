"""`ProcessCluster`: ``tuplemesh run`` over a network transport: N worker processes on loopback.

The launcher knows no more than an operator with grpcurl would: it spawns ``tuplemesh worker``
processes with static peers, waits for them through the health service, follows them through
``Admin.GetStatus``, decides the run is finished when every spout is finished and no tuple is in
flight anywhere, collects the task reports, then SIGTERMs the workers and checks their exit codes.

The workers run in a process group of their own: Ctrl-C in a terminal reaches the launcher only,
which then stops every worker with one SIGTERM (their normal drain).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tuplemesh.client import open_channel_from_config
from tuplemesh.config import Config
from tuplemesh.core.run_resources import RunResources
from tuplemesh.core.stats import WorkerSnapshot
from tuplemesh.core.summary import RunSummary, failing_error, mesh_quiescent, summarize
from tuplemesh.cpus import available, format_cpu_list, own_shares, shares
from tuplemesh.netutil import free_ports
from tuplemesh.server.status_proto import snapshot_from_proto
from tuplemesh.topology import Topology
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

__all__ = [
    "Interrupted",
    "ProcessCluster",
    "SignalLatch",
    "ignoring_signals",
    "is_serving",
    "merge_reports",
    "run_processes",
    "stop_processes",
]


#: What a live worker's Admin answers when it is slow to (paused, busy, reconnecting), not gone.
UNANSWERED = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)


class WorkerDied(RuntimeError):
    """A worker process exited while the run was going on."""


class Interrupted(Exception):
    """SIGINT (Ctrl-C) or SIGTERM reached ``tuplemesh run``: the run stops its workers and ends."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class SignalLatch:
    """While entered, SIGINT and SIGTERM are only noted; ``check`` raises Interrupted for one
    that came. The polling loop checks between calls, so no exception ever lands inside a gRPC
    call (one raised there can leave the channel failing). Main thread only."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._handlers: dict[int, Any] = {}

    def _note(self, signum: int, frame: Any) -> None:
        self.received = signum

    def __enter__(self) -> SignalLatch:
        self._handlers = {sig: signal.signal(sig, self._note) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)

    def check(self) -> None:
        """Raise Interrupted once for a signal that came since the last check."""
        signum, self.received = self.received, None
        if signum is not None:
            raise Interrupted(signum)


@contextlib.contextmanager
def ignoring_signals() -> Iterator[None]:
    """SIGINT and SIGTERM ignored while inside: a stop under way (one SIGTERM per worker, their
    drain) is not cut short by a second Ctrl-C. Main thread only."""
    handlers = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


class ProcessCluster:
    """Spawn, follow and stop the worker processes of one run."""

    def __init__(
        self,
        target: str,
        topology: Topology,
        num_workers: int,
        *,
        transport: str,
        config_path: str | None = None,
        env: dict[str, str] | None = None,
        host: str = "127.0.0.1",
        pin_cpus: bool | None = None,
    ) -> None:
        """``pin_cpus``: True, each worker runs on an even share of this process's CPUs
        (`tuplemesh.cpus.shares`), given to it as ``worker.cpus``; None (the default), the same
        when every worker can have a CPU of its own and the configuration names none
        (`tuplemesh.cpus.own_shares`); False, wherever the OS places them."""
        self.target = target
        self.topology = topology
        self.num_workers = num_workers
        self.transport = transport
        self.host = host
        ports = free_ports(2 * num_workers, host)
        self.ports, self.metrics_ports = ports[:num_workers], ports[num_workers:]
        self.config_path = config_path
        self.procs: list[subprocess.Popen[bytes]] = []
        # as the workers see it (the file, then TUPLEMESH_* from the environment they are given):
        # TLS material and the Admin token for the channels below, worker.cpus for the placement
        conf = Config.load(config_path, env={**os.environ, **(env or {})})
        # a run resumes no earlier run: its checkpoints go to a fresh file unless the config names one
        self.run_resources = RunResources(
            conf.with_overrides({"messaging.transport": transport}).with_topology(topology.conf), topology
        )
        self.env = {**os.environ, **self.run_resources.env, **(env or {})}
        self.cpus = self._cpus(num_workers, pin_cpus, conf)
        self.channels = [open_channel_from_config(f"{host}:{p}", conf) for p in self.ports]
        self.admins = [admin_pb2_grpc.AdminStub(c) for c in self.channels]
        self.healths = [health_pb2_grpc.HealthStub(c) for c in self.channels]
        self._stopping = False
        #: what the last poll of ``wait_done`` saw, and (serving) the reports of a finished run
        self.last_snapshots: list[WorkerSnapshot] = []
        self.last_reports: dict[str, list[Any]] | None = None
        #: Checked on every poll: a SIGINT or SIGTERM the launcher received ends the wait
        self.signals: SignalLatch | None = None

    def start(self) -> None:
        peers = ",".join(f"{self.host}:{p}" for p in self.ports)
        for index, port in enumerate(self.ports):
            env = {**self.env, "TUPLEMESH_METRICS_PORT": str(self.metrics_ports[index])}
            cmd = [
                sys.executable, "-m", "tuplemesh.cli", "worker", self.target,
                "--index", str(index), "--workers", str(self.num_workers), "--port", str(port),
                "--peers", peers, "--transport", self.transport,
            ]  # fmt: skip
            if self.config_path:
                cmd += ["--config", self.config_path]
            if self.cpus is not None:  # a flag: over the key's env var and the config file alike
                cmd += ["--cpus", format_cpu_list(self.cpus[index])]
            # a group of its own: a terminal's Ctrl-C goes to the launcher, which SIGTERMs each
            # worker once (a worker takes a second signal as "exit now, skip the drain")
            self.procs.append(subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, process_group=0))

    def _cpus(self, num_workers: int, pin_cpus: bool | None, conf: Config) -> list[frozenset[int]] | None:
        """Each worker's CPUs as ``pin_cpus`` asks (see __init__), None to leave them be."""
        if pin_cpus:
            return shares(num_workers, available())
        if pin_cpus is False or conf["worker.cpus"]:
            return None  # CPUs the user gave every worker are theirs to give, not ours to split
        return own_shares(num_workers)

    def addresses(self) -> list[str]:
        """One line per worker: where Admin (``tuplemesh top``, grpcurl) and /metrics answer,
        and the CPUs it was pinned to, if it was."""
        return [
            f"worker {index}: admin {self.host}:{port} (tuplemesh top --target {self.host}:{port}), "
            f"metrics http://{self.host}:{metrics}/metrics"
            + ("" if self.cpus is None else f", CPUs {format_cpu_list(self.cpus[index])}")
            for index, (port, metrics) in enumerate(zip(self.ports, self.metrics_ports, strict=True))
        ]

    def check_alive(self) -> None:
        """WorkerDied for a worker that exited, Interrupted for a signal (see ``signals``)."""
        if self.signals is not None:
            self.signals.check()
        if self._stopping:
            return
        for index, proc in enumerate(self.procs):
            code = proc.poll()
            if code is not None:
                raise WorkerDied(f"worker {index} (pid {proc.pid}) exited with code {code}")

    def wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for index, stub in enumerate(self.healths):
            while True:
                self.check_alive()
                if is_serving(stub):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"worker {index} not SERVING within {timeout}s")
                time.sleep(0.05)

    def statuses(self, include_reports: bool = False) -> list[admin_pb2.WorkerStatus]:
        self.check_alive()
        request = admin_pb2.GetStatusRequest(include_reports=include_reports)
        return [stub.GetStatus(request, timeout=10.0) for stub in self.admins]

    def snapshots(self) -> list[WorkerSnapshot]:
        """Every worker's snapshot, as its Admin reports it."""
        return [snapshot_from_proto(s) for s in self.statuses()]

    def quiescent(self, first: list[WorkerSnapshot] | None = None) -> bool:
        """Every spout finished and nothing in flight (`mesh_quiescent`; ``first``: every worker's
        snapshot, just read; read here when not given)."""
        return mesh_quiescent(self.snapshots() if first is None else first, self.snapshots)

    def outcome(
        self, finished: bool, within: float
    ) -> tuple[list[WorkerSnapshot], bool, dict[str, list[Any]]]:
        """(snapshots, completed, reports) after a signal ended the wait; ``finished``: whether a
        finished run counts as completed (serving). Read again for up to ``within`` seconds: a
        mesh whose spouts just finished may have a tuple between two hops at the moment one read
        looks, and a channel may be between reconnects. If no read succeeds, what the last poll
        of ``wait_done`` saw."""
        deadline = time.monotonic() + within
        while True:
            try:
                snapshots = self.snapshots()
                completed = finished and self.quiescent(snapshots)
                if completed or not finished or time.monotonic() >= deadline:
                    return snapshots, completed, self.reports() if completed else {}
            except (WorkerDied, grpc.RpcError, Interrupted):
                if time.monotonic() >= deadline:
                    done = finished and self.last_reports is not None
                    return self.last_snapshots, done, self.last_reports or {}
            time.sleep(0.05)

    def wait_done(
        self,
        timeout: float | None,
        on_poll: Callable[[list[WorkerSnapshot], list[str]], None] | None = None,
        tolerated: int | None = None,
    ) -> bool:
        """Wait until quiescent (``timeout`` None: until a signal, as ``run --serve``); ``on_poll``
        sees the snapshots and serving states on each poll. With ``tolerated``, user code raising
        more exceptions than that (or in prepare/open) ends the wait at once, with False."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            try:
                statuses = self.statuses()
            except grpc.RpcError as exc:
                if exc.code() not in UNANSWERED:
                    raise
                # a live worker that does not answer in time (paused, swapping, between
                # reconnects) is waited for: the run's own timeout bounds the wait, and giving
                # up here would stop a mesh that is only slow
                time.sleep(0.05)
                continue
            snapshots = [snapshot_from_proto(s) for s in statuses]
            if on_poll is not None:
                on_poll(snapshots, [s.state for s in statuses])
            if tolerated is not None and failing_error(snapshots, tolerated) is not None:
                return False
            self.last_snapshots = snapshots
            if deadline is None and self.last_reports is None and self.quiescent(snapshots):
                # serving: keep the finished run's result, in case the workers are gone by the
                # time the signal that ends the run is handled
                self.last_reports = self.reports()
            if deadline is not None and self.quiescent(snapshots):
                time.sleep(0.02)
                try:
                    if self.quiescent():
                        return True
                except grpc.RpcError as exc:
                    if exc.code() not in UNANSWERED:
                        raise  # unanswered: as above, the next poll reads again
            time.sleep(0.05)
        return False

    def reports(self) -> dict[str, list[Any]]:
        return merge_reports(self.statuses(include_reports=True))

    def stop(self, timeout: float = 60.0) -> list[int]:
        """SIGTERM every worker (they drain) and return their exit codes."""
        self._stopping = True
        codes = stop_processes(self.procs, timeout)
        for channel in self.channels:
            channel.close()
        self.run_resources.close()
        return codes


def merge_reports(statuses: list[admin_pb2.WorkerStatus]) -> dict[str, list[Any]]:
    """Every task's report by component, in task order, from GetStatus(include_reports) answers."""
    merged: dict[str, dict[int, Any]] = {}
    for status in statuses:
        for component, by_task in json.loads(status.reports_json or "{}").items():
            merged.setdefault(component, {}).update({int(t): r for t, r in by_task.items()})
    return {c: [r for _, r in sorted(by_task.items())] for c, by_task in merged.items()}


def is_serving(stub: health_pb2_grpc.HealthStub) -> bool:
    """True when the worker's health says SERVING (False while unreachable or not ready)."""
    try:
        reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1.0)
    except grpc.RpcError:
        return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def stop_processes(procs: list[subprocess.Popen[bytes]], timeout: float) -> list[int]:
    """SIGTERM every live process (workers drain), wait, kill what outlives ``timeout``; exit codes.

    Each also gets SIGCONT (as systemd does): a worker paused by SIGSTOP would hold its SIGTERM
    until resumed, and the whole-mesh drain its peers run needs it to take part."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(proc.wait())
    return codes


def run_processes(
    target: str,
    topology: Topology,
    num_workers: int,
    transport: str,
    timeout: float,
    config_path: str | None,
    live: bool,
    *,
    tolerated: int | None = None,
    serve: bool = False,
    pin_cpus: bool | None = None,
    announce: Callable[[str], None] | None = None,
) -> RunSummary:
    """The whole ``tuplemesh run`` over worker processes; never leaves a process behind.

    ``tolerated``: the user-code exceptions the run survives (None: only counted). ``serve``:
    keep the mesh up after its spouts finish, until SIGINT or SIGTERM. ``pin_cpus``: each
    worker on CPUs of its own: always, never, or (None) when there are enough
    (`ProcessCluster`). ``announce`` is handed one line per worker with its addresses once they
    are started. SIGINT and SIGTERM stop the
    workers (one SIGTERM each) and end the run: ``interrupted`` in the summary, unless serving.
    """
    cluster = ProcessCluster(
        target, topology, num_workers, transport=transport, config_path=config_path, pin_cpus=pin_cpus
    )
    started = time.monotonic()
    completed = False
    message = ""
    snapshots: list[WorkerSnapshot] = []
    reports: dict[str, list[Any]] = {}
    finished_at = None
    codes: list[int] = []
    interrupted: Interrupted | None = None
    cluster.signals = latch = SignalLatch().__enter__()
    try:
        cluster.start()
        if announce is not None:
            for line in cluster.addresses():
                announce(line)
        cluster.wait_serving(min(timeout, 60.0))
        if live:
            from tuplemesh.progress import LiveProgress

            with LiveProgress(topology.name, num_workers, transport) as progress:
                completed = cluster.wait_done(None if serve else timeout, progress.update, tolerated)
        else:
            completed = cluster.wait_done(None if serve else timeout, None, tolerated)
        finished_at = time.monotonic()
        snapshots = cluster.snapshots()
        reports = cluster.reports() if completed else {}
    except Interrupted as exc:
        interrupted = exc
        # what the mesh had done when the signal came (and its result, when it finished)
        finished_at = time.monotonic()
        snapshots, completed, reports = cluster.outcome(serve, within=5.0)
    except (WorkerDied, TimeoutError, grpc.RpcError) as exc:
        message = str(exc) if not isinstance(exc, grpc.RpcError) else f"worker unreachable: {exc.details()}"
    finally:
        latch.__exit__()
        with ignoring_signals():  # one SIGTERM per worker, their drain uninterrupted
            codes = cluster.stop()
    seconds = (finished_at or time.monotonic()) - started
    matched: bool | None = None
    if message:
        matched = False
    elif interrupted is not None and not serve:
        message = f"interrupted by {interrupted.args[0]}; workers stopped"
        if any(codes):
            message += f" (exit codes {codes}: a worker did not stop cleanly)"
    elif interrupted is not None and not completed:
        message = f"served until {interrupted.args[0]}; the spouts had not finished: result not checked"
    elif not completed:
        matched, message = False, f"did not complete within {timeout}s"
    elif any(codes):
        matched, message = False, f"worker exit codes {codes} (a worker did not stop cleanly)"
    elif topology.check is not None:
        matched, message = topology.check(reports)
    else:
        message = "no result check defined"
    summary = summarize(
        snapshots,
        topology=topology.name,
        workers=num_workers,
        transport=transport,
        seconds=seconds,
        completed=completed,
        matched=matched,
        message=message,
        tolerated=tolerated,
    )
    summary.interrupted = interrupted is not None and not serve
    return summary
