"""The ``tuplemesh`` command: ``run`` a topology, serve one ``worker``, watch them with ``top``
or in a browser with ``ui``, ``rebalance`` a running mesh to another worker count, print the
``config`` keys.

Every flag can also be given as an environment variable ``TUPLEMESH_<FLAG>`` (``--workers`` ->
``TUPLEMESH_WORKERS``, ``--quiet`` -> ``TUPLEMESH_QUIET=true``). A flag that sets a config key
(``--workers`` is ``topology.workers``) has that key's precedence: defaults < config file <
environment < the flag given on the command line.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tuplemesh import build_info
from tuplemesh.client import TlsSettings
from tuplemesh.config import KEYS, Config, describe_keys, env_name
from tuplemesh.cpus import available, parse_cpu_list, pin_process
from tuplemesh.errors import PluginError, TuplemeshError
from tuplemesh.plugins import import_from_string
from tuplemesh.topology import Topology
from tuplemesh.transport import TRANSPORTS, make_context

if TYPE_CHECKING:  # imported where used: a worker's start-up pays only for what it runs
    from tuplemesh.discovery import PeerDirectory
    from tuplemesh.discovery.base import ReplicaSource
    from tuplemesh.server.signals import TerminationSignals

__all__ = ["main"]

log = logging.getLogger(__name__)


class CliError(Exception):
    """A usage problem: printed as ``tuplemesh: error: ...`` with exit code 2."""


def _env(flag: str, default: Any = None) -> Any:
    return os.environ.get(env_name(flag), default)


def _env_bool(flag: str) -> bool:
    """The default of a boolean flag from its env var (true/false, 1/0, yes/no, on/off)."""
    text = _env(flag)
    if text is None:
        return False
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise CliError(f"{env_name(flag)} must be true or false, got {text!r}")


_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def _log_level(text: str) -> str:
    if text.upper() not in _LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"--log-level must be one of {', '.join(_LOG_LEVELS)} (any case), got {text!r}"
        )
    return text.upper()


def _non_negative_int(flag: str) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{flag} must be an integer, got {text!r}") from None
        if value < 0:
            raise argparse.ArgumentTypeError(f"--{flag} must be >= 0, got {value}")
        return value

    return parse


def _port(flag: str) -> Any:
    def parse(text: str) -> int:
        value = _non_negative_int(flag)(text)
        if not 1 <= value <= 65535:
            raise argparse.ArgumentTypeError(f"--{flag} must be a port in 1..65535, got {value}")
        return value

    return parse


def parse_peers(text: str, workers: int) -> dict[int, tuple[str, int]]:
    """``host:port,host:port,...`` in worker-index order; CliError naming the entry at fault.
    Addresses beyond ``workers`` are those of workers a rescale may add."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    if len(entries) < workers:
        raise CliError(
            f"--peers lists {len(entries)} address(es) but --workers is {workers}: give one per worker"
        )
    peers = {}
    for index, entry in enumerate(entries):
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise CliError(f"--peers entry {index} {entry!r} is not HOST:PORT")
        peers[index] = (host, int(port))
    return peers


def _positive_float(flag: str) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{flag} must be a number, got {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"--{flag} must be > 0, got {value}")
        return value

    return parse


def load_topology(target: str) -> Topology:
    """Resolve ``module:attr`` to a Topology (or a zero-argument callable returning one).

    The working directory is importable, as with ``python -m`` (uvicorn's ``--app-dir .``).
    Whatever goes wrong in the user's module is a one-line CliError naming the target.
    """
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name = target.partition(":")[0]
    try:
        obj = import_from_string(target)
    except PluginError as exc:
        raise CliError(str(exc)) from None
    except Exception as exc:  # the module raised while imported: an ImportError, a SyntaxError ...
        raise CliError(f"cannot import module {module_name!r} (from {target!r}): {_one_line(exc)}") from None
    if callable(obj) and not isinstance(obj, Topology):
        required = _required_parameters(obj)
        if required:
            raise CliError(
                f"{target!r} needs argument(s) {', '.join(required)}: name a Topology, or a function "
                "that builds one without arguments"
            )
        try:
            obj = obj()
        except Exception as exc:
            raise CliError(f"{target!r} raised while building the topology: {_one_line(exc)}") from None
    if not isinstance(obj, Topology):
        raise CliError(
            f"{target!r} is a {type(obj).__name__}, not a Topology (build it with TopologyBuilder.build())"
        )
    return obj


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (a SyntaxError also names its file and line)."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _required_parameters(fn: Any) -> list[str]:
    """The parameters ``fn`` cannot be called without (none when it has no signature to read)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        p.name for p in parameters if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


_KEY_HELP = "sets {key} (default: the config file, its env var, then the key's default)"

DESCRIPTION = (
    "Run Storm-style topologies (spouts and bolts) on a mesh of Python worker processes. "
    "Every flag is also an environment variable TUPLEMESH_<FLAG> (--workers is TUPLEMESH_WORKERS, "
    "--quiet is TUPLEMESH_QUIET=true). A flag that sets a config key has that key's precedence: "
    "defaults < config file < environment < the flag on the command line."
)


class _Parser(argparse.ArgumentParser):
    """Every parser of the command refuses abbreviated flags (``--worker 3`` is not ``--workers``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def _key_flags(args: argparse.Namespace, flags: Sequence[str]) -> dict[str, str]:
    """The text of the key-setting ``flags`` given on the command line. Config parses and checks
    it like the key's env var (their env vars are read by Config too), so a bad value is refused
    with the key's own rule and message."""
    return {flag: getattr(args, flag) for flag in flags if getattr(args, flag) is not None}


_WORKERS_HELP = (
    f"number of workers (default {KEYS['topology.workers'].default}, or topology.workers from "
    "--config or TUPLEMESH_WORKERS)"
)
_TRANSPORT_HELP = (
    f"{', '.join(TRANSPORTS)} or a MODULE:ATTR plugin (default {KEYS['messaging.transport'].default}, "
    "or messaging.transport from --config or TUPLEMESH_TRANSPORT)"
)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tuplemesh", description=DESCRIPTION)
    parser.add_argument(
        "--version", action="version", version=f"tuplemesh {build_info.version()} ({build_info.build()})"
    )
    parser.add_argument(
        "--log-level",
        type=_log_level,
        default=_env("log-level", "WARNING"),
        help=f"logging level: {', '.join(_LOG_LEVELS)} (default WARNING)",
    )
    sub = parser.add_subparsers(dest="command", required=True, title="commands", parser_class=_Parser)

    run = sub.add_parser("run", help="run a topology to completion on N workers and check its result")
    run.add_argument("target", metavar="MODULE:ATTR", help="the topology, e.g. examples.wordcount:topology")
    run.add_argument("--workers", help=_WORKERS_HELP)
    run.add_argument(
        "--quiet", action="store_true", default=_env_bool("quiet"), help="no live progress table"
    )
    run.add_argument("--transport", help=_TRANSPORT_HELP)
    run.add_argument("--config", default=_env("config"), help="YAML config file")
    run.add_argument(
        "--timeout",
        type=_positive_float("timeout"),
        default=_env("timeout", "300"),
        help="seconds before an unfinished run counts as failed (default 300)",
    )
    run.add_argument(
        "--json", action="store_true", default=_env_bool("json"), help="print the summary as one JSON object"
    )
    run.add_argument(
        "--pin-cpus",
        action=argparse.BooleanOptionalAction,
        default=_env_bool("pin-cpus") if _env("pin-cpus") is not None else None,
        help="run each worker process on CPUs of its own (an even share of this one's; "
        "worker.cpus), as pods with whole CPUs get on Kubernetes: workers sharing cores run "
        "slower and hand batches on late. Default: pinned when there are at least as many "
        "CPUs as workers and worker.cpus is not set; --no-pin-cpus leaves them to the OS",
    )
    run.add_argument(
        "--serve",
        action="store_true",
        default=_env_bool("serve"),
        help="keep the workers up after the spouts finish (or for unbounded spouts) until Ctrl-C "
        "or SIGTERM; --timeout does not apply",
    )

    worker = sub.add_parser("worker", help="run one worker process (what run and the Helm chart start)")
    worker.add_argument("target", metavar="MODULE:ATTR", help="the topology")
    worker.add_argument(
        "--index",
        help="this worker's index, the StatefulSet ordinal; " + _KEY_HELP.format(key="worker.index"),
    )
    worker.add_argument("--workers", help=_WORKERS_HELP)
    worker.add_argument("--epoch", help=_KEY_HELP.format(key="topology.epoch"))
    worker.add_argument("--cpus", help="CPUs to run on, e.g. 0-1; " + _KEY_HELP.format(key="worker.cpus"))
    worker.add_argument(
        "--port",
        type=_port("port"),
        default=_env("port", "6700"),
        help="port for Transfer, Admin, health and reflection (default 6700); /metrics is on this "
        "port + 2400 unless metrics.port is set",
    )
    worker.add_argument(
        "--peers",
        default=_env("peers", ""),
        help="HOST:PORT of every worker in index order, comma-separated (static discovery)",
    )
    worker.add_argument("--transport", help=_TRANSPORT_HELP)
    worker.add_argument("--config", default=_env("config"), help="YAML config file")
    worker.add_argument(
        "--discovery", choices=["static", "kubernetes"], default=_env("discovery", "static"),
        help="static: --peers; kubernetes: the EndpointSlices of --discovery-service",
    )  # fmt: skip
    worker.add_argument(
        "--discovery-service",
        default=_env("discovery-service"),
        help="headless Service whose EndpointSlices list the workers (kubernetes discovery)",
    )
    worker.add_argument(
        "--discovery-namespace",
        default=_env("discovery-namespace"),
        help="its namespace (default: the pod's own)",
    )
    worker.add_argument(
        "--statefulset",
        default=_env("statefulset"),
        help="the workers' StatefulSet, whose replicas the mesh follows (kubernetes discovery; "
        "default without --workers: this pod's name without its ordinal)",
    )

    top = sub.add_parser("top", help="live view of running workers (Admin.WatchStats)")
    top.add_argument(
        "--target",
        default=_env("target", "127.0.0.1:6700"),
        help="HOST:PORT of one or more workers, comma-separated",
    )
    top.add_argument(
        "--interval",
        type=_positive_float("interval"),
        default=_env("interval", "1"),
        help="seconds between two updates from each worker (default 1)",
    )
    top.add_argument("--once", action="store_true", default=_env_bool("once"), help="print one view and exit")
    top.add_argument(
        "--config",
        default=_env("config"),
        help="YAML config file (tls.* and admin.token to reach the workers)",
    )

    ui = sub.add_parser("ui", help="web UI of running workers: graph, rates, backpressure (Admin.WatchStats)")
    ui.add_argument(
        "--target",
        default=_env("target", "127.0.0.1:6700"),
        help="HOST:PORT of every worker, comma-separated",
    )
    ui.add_argument(
        "--port",
        type=_non_negative_int("port"),
        default=_env("port", "8080"),
        help="HTTP port (default 8080)",
    )
    ui.add_argument(
        "--bind", default=_env("bind", "127.0.0.1"), help="address to serve on (default 127.0.0.1)"
    )
    ui.add_argument(
        "--config",
        default=_env("config"),
        help="YAML config file (tls.* and admin.token to reach the workers; the page asks for the token)",
    )

    rebalance = sub.add_parser(
        "rebalance",
        help="rescale a running mesh to --workers workers, live (Admin.Rebalance: the workers run "
        "with admin.rebalance.enabled: true)",
    )
    rebalance.add_argument(
        "--workers", type=_non_negative_int("workers"), required=True, help="the new worker count"
    )
    rebalance.add_argument(
        "--target", default=_env("target", "127.0.0.1:6700"), help="HOST:PORT of any worker of the mesh"
    )
    rebalance.add_argument(
        "--config",
        default=_env("config"),
        help="YAML config file (tls.* and admin.token to reach the worker)",
    )

    sub.add_parser("config", help="print every configuration key, its env var and default")

    new = sub.add_parser("new", help="write a new topology project (the tutorial's) into ./NAME")
    new.add_argument("name", metavar="NAME", help="the project's Python package name, e.g. trending")
    return parser


def _print_summary(summary: dict[str, Any]) -> None:
    print(
        f"topology {summary['topology']} on {summary['workers']} worker(s) over {summary['transport']}: "
        f"{summary['seconds']:.3f} s"
    )
    print(f"{'component':<16}{'emitted':>12}{'executed':>12}{'errors':>8}{'tuples/s':>14}")
    for name, c in summary["components"].items():
        errors = c["errors"] + c["spout_errors"]  # bolt and spout code alike
        print(f"{name:<16}{c['emitted']:>12}{c['executed']:>12}{errors:>8}{c['per_second']:>14,.0f}")
    t = summary["transfer"]
    losses = ", ".join(f"{k.replace('_', '-')} {v}" for k, v in t.items() if k not in ("messages", "batches"))
    print(f"transfer: {t['messages']} tuples in {t['batches']} batches, {losses}")
    verdict = {True: "RESULT OK", False: "RESULT WRONG", None: "RESULT UNCHECKED"}[summary["matched"]]
    print(f"{verdict}: {summary['message']}")


#: ``tuplemesh run``'s exit code when SIGINT (Ctrl-C) or SIGTERM stopped it: 128 + SIGINT, as a shell's.
EXIT_INTERRUPTED = 130


def _run(args: argparse.Namespace) -> int:
    from tuplemesh.worker.local_cluster import LocalCluster

    conf = Config.load(args.config, flags=_key_flags(args, ("workers", "transport")))
    topology = load_topology(args.target)
    run_conf = conf.with_topology(topology.conf)  # what the workers will run with
    workers = run_conf["topology.workers"]
    tolerated = run_conf["topology.errors.tolerated"]
    transport = run_conf["messaging.transport"]
    if make_context(transport).capabilities.in_process:
        from tuplemesh.worker.interpreter import freeze_startup_objects, tune_interpreter

        if args.serve or args.pin_cpus:
            flag = "--serve" if args.serve else "--pin-cpus"
            raise CliError(f"{flag} needs worker processes: use --transport grpc or zmq, not local")
        tune_interpreter(run_conf)
        cluster = LocalCluster(topology, workers, conf)
        freeze_startup_objects(run_conf)
        from tuplemesh.launcher import Interrupted, SignalLatch, ignoring_signals

        try:
            with SignalLatch() as latch:  # a signal ends the run at its next poll, once started
                run = cluster.run(args.timeout, tolerated=tolerated, check=latch.check)
        except Interrupted as exc:
            with ignoring_signals():
                run = cluster.interrupt(exc.args[0], tolerated)
        summary = run.as_dict()
    else:
        from tuplemesh.launcher import run_processes

        if args.pin_cpus:
            try:
                available()
            except ValueError as exc:
                raise CliError(f"--pin-cpus: {exc}") from None

        live = not args.json and not args.quiet and sys.stderr.isatty()
        summary = run_processes(
            args.target,
            topology,
            workers,
            transport,
            args.timeout,
            args.config,
            live,
            tolerated=tolerated,
            serve=args.serve,
            pin_cpus=args.pin_cpus,
            announce=lambda line: print(line, file=sys.stderr, flush=True),
        ).as_dict()
    if args.json:
        print(json.dumps(summary, sort_keys=True), flush=True)
    else:
        _print_summary(summary)
        sys.stdout.flush()
    if summary["interrupted"]:
        print(f"tuplemesh: {summary['message']}", file=sys.stderr)
        return EXIT_INTERRUPTED
    if summary["failed_by_errors"]:
        print(f"tuplemesh: error: {summary['message']}", file=sys.stderr)
        return 1
    if args.serve and summary["matched"] is None:
        return 0  # served until a signal, as asked: an unbounded topology has no result to check
    return 0 if summary["completed"] and summary["matched"] is not False else 1


def _worker(args: argparse.Namespace) -> int:
    from tuplemesh.server.signals import TerminationSignals

    conf = Config.load(
        args.config, flags=_key_flags(args, ("index", "workers", "transport", "epoch", "cpus"))
    )
    if conf["worker.cpus"]:  # before the topology's code or any thread of ours starts
        try:
            pin_process(parse_cpu_list(conf["worker.cpus"]))
        except ValueError as exc:
            raise CliError(str(exc)) from None
    topology = load_topology(args.target)
    # the flags' values as the config resolved them (flag, env var, file or default)
    args.index, args.workers = conf["worker.index"], conf["topology.workers"]
    replicas = _replicas(args, conf.given("topology.workers"))
    if replicas is not None and not conf.given("topology.workers"):
        args.workers = _current_replicas(replicas)
    elif args.index >= args.workers:
        raise CliError(f"--index {args.index} is out of range for --workers {args.workers}")
    directory = _directory(args)
    signals = TerminationSignals()
    signals.install()
    try:
        return _serve_epochs(args, conf, topology, directory, signals, replicas)
    finally:
        if replicas is not None:
            replicas.stop()


def _serve_epochs(
    args: argparse.Namespace,
    conf: Config,
    topology: Topology,
    directory: PeerDirectory,
    signals: TerminationSignals,
    replicas: ReplicaSource | None,
) -> int:
    """Serve the worker at its epoch, and at every next one a rescale moves it to; the exit code."""
    from tuplemesh.server import WorkerProcess
    from tuplemesh.server.joining import AskedEpochs, JoiningServer, choose_epoch
    from tuplemesh.server.peer_admin import PeerAdmins
    from tuplemesh.topology.assignment import Epoch
    from tuplemesh.ui.mesh import EpochHistory

    # the epochs this process routes by, kept across rescales (each epoch has its own WorkerProcess)
    history = EpochHistory()
    rescaled = False  # a rescale's successor starts at the epoch the rescale agreed on
    while True:
        # the mesh may have been rescaled since this worker's flags were written: join its epoch
        peers = PeerAdmins(conf, args.index, directory.snapshot)
        own = Epoch.configured(topology, args.workers, conf)
        waiting = JoiningServer(conf, topology, args.index, own, args.port)  # serves while it waits
        asked = AskedEpochs(peers)
        epoch = choose_epoch(
            args.index,
            own,
            asked,
            signals.requested,
            start_alone=replicas is None or args.index == 0,
            on_wait=waiting.wait,
        )
        waiting.stop()
        peers.close()
        if epoch is None:
            directory.stop()
            return 0  # stopped while waiting to be included
        process = WorkerProcess(
            topology,
            conf,
            index=args.index,
            num_workers=epoch.workers,
            port=args.port,
            directory=directory,
            signals=signals,
            replicas=replicas,
            epoch_history=history,
            # no peer answered: maybe they are between two epochs (their ports change hands)
            epoch_confirmed=rescaled or asked.agreed_on(epoch),
            epoch=epoch,
        )
        code = process.serve()
        successor = process.next_epoch
        if successor is not None and code != 0:
            log.error(
                "worker %d: the stop before epoch %s was not clean (a thread did not end in time); "
                "exiting with code %d instead of starting at it",
                args.index,
                successor,
                code,
            )
        if successor is None or code != 0 or signals.requested.is_set():
            return code  # stopped (a signal during a rescale's drain stops the worker too)
        if args.index >= successor.workers:
            log.warning("worker %d: not in a mesh of %d worker(s); exiting", args.index, successor.workers)
            return 0
        # A rescale: the next epoch's worker starts in this process, with fresh executors (moved
        # state comes from the store). Only a clean stop gets here: every thread of the old one
        # ended. Not re-executing the interpreter keeps imports out of the pause.
        args.workers = successor.workers
        rescaled = True
        conf = conf.with_overrides(
            {"topology.workers": successor.workers, "topology.epoch": successor.counter}
        )
        directory = _directory(args)


def _rebalance(args: argparse.Namespace) -> int:
    import grpc

    from tuplemesh.client.channel import open_channel_from_config
    from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

    conf = Config.load(args.config)
    channel = open_channel_from_config(args.target, conf)
    try:
        reply = admin_pb2_grpc.AdminStub(channel).Rebalance(
            admin_pb2.RebalanceRequest(workers=args.workers), timeout=30.0
        )
    except grpc.RpcError as exc:
        raise CliError(f"rebalance via {args.target}: {exc.code().name}: {exc.details()}") from None
    finally:
        channel.close()
    print(f"rescaling to {args.workers} worker(s): epoch {reply.epoch}")
    return 0


def _directory(args: argparse.Namespace) -> Any:
    """The PeerDirectory the worker flags ask for (errors name the flag at fault)."""
    from tuplemesh.discovery import StaticDirectory

    if args.discovery == "static":
        peers = (
            parse_peers(args.peers, args.workers) if args.peers else {args.index: ("127.0.0.1", args.port)}
        )
        if len(peers) < args.workers:
            raise CliError(f"--peers is required with --workers {args.workers}")
        return StaticDirectory(peers)
    from tuplemesh.discovery.kubernetes import KubernetesDirectory

    if not args.discovery_service:
        raise CliError("--discovery kubernetes needs --discovery-service (the workers' headless Service)")
    directory = KubernetesDirectory(
        _kubernetes_api(), args.discovery_namespace or _pod_namespace(), args.discovery_service,
        default_port=args.port,
    )  # fmt: skip
    directory.start()
    directory.listed.wait(30)  # start with what is known; peers found later are connected then
    return directory


def _replicas(args: argparse.Namespace, workers_given: bool) -> Any:
    """The StatefulSetReplicas the mesh follows, started; None for a fixed worker count
    (static peers, or --workers without --statefulset)."""
    if args.discovery != "kubernetes":
        if args.statefulset:
            raise CliError("--statefulset needs --discovery kubernetes (static peers cannot follow replicas)")
        return None
    if workers_given and not args.statefulset:
        return None
    from tuplemesh.discovery.statefulset import StatefulSetReplicas, statefulset_of_pod

    name = args.statefulset or statefulset_of_pod()
    replicas = StatefulSetReplicas(_kubernetes_api(), args.discovery_namespace or _pod_namespace(), name)
    replicas.start()
    return replicas


def _current_replicas(replicas: Any) -> int:
    """The StatefulSet's replicas now: the worker count this worker starts with."""
    where = f"StatefulSet {replicas.name!r} in namespace {replicas.namespace!r}"
    if not replicas.watch.listed.wait(30):
        replicas.stop()
        raise CliError(f"cannot read {where}: {replicas.watch.last_error} (the worker's Role needs "
                       "get/list/watch on statefulsets)")  # fmt: skip
    count = replicas.replicas()
    if not count:
        replicas.stop()
        what = "has 0 replicas" if count == 0 else "does not exist"
        raise CliError(f"{where} {what}: name the workers' StatefulSet with --statefulset, or give --workers")
    return int(count)


def _kubernetes_api() -> Any:
    from tuplemesh.discovery.kubernetes import api_client_from_environment

    try:
        return api_client_from_environment()
    except Exception as exc:  # no service account and no kubeconfig
        raise CliError(
            f"--discovery kubernetes: no in-cluster config and no usable kubeconfig ({exc})"
        ) from exc


def _pod_namespace() -> str:
    try:
        with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
            return f.read().strip()
    except OSError:
        return "default"


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = _parser()
    except CliError as exc:  # a flag's env var holds a bad value
        print(f"tuplemesh: error: {exc}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=str(args.log_level).upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "worker":
            return _worker(args)
        if args.command in ("top", "ui"):
            targets = [t.strip() for t in args.target.split(",") if t.strip()]
            for target in targets:
                host, sep, port = target.rpartition(":")
                if not sep or not host or not port.isdigit():
                    raise CliError(f"--target {target!r} is not HOST:PORT")
            conf = Config.load(args.config)
            if args.command == "ui":
                from tuplemesh.core.feature_spec import registered_features
                from tuplemesh.ui.remote import serve

                try:
                    return serve(
                        targets,
                        args.port,
                        args.bind,
                        tls=TlsSettings.from_config(conf),
                        token=conf["admin.token"],
                        # every registered feature's panel: a worker that does not answer for one
                        # (the call or the feature off there) shows none of it
                        panels=[panel for _, panel in registered_features().panels()],
                    )
                except OSError as exc:
                    raise CliError(
                        f"--port {args.port}: cannot serve on {args.bind}:{args.port}: {exc.strerror or exc}"
                    ) from exc
            from tuplemesh.top import top

            return top(
                targets,
                args.interval,
                args.once,
                tls=TlsSettings.from_config(conf),
                token=conf["admin.token"],
            )
        if args.command == "rebalance":
            return _rebalance(args)
        if args.command == "config":
            sys.stdout.write(describe_keys())
            return 0
        if args.command == "new":
            from tuplemesh.scaffold import new

            return new(args.name)
    except (CliError, TuplemeshError) as exc:
        print(f"tuplemesh: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C before or after a run's workers ran (they stop themselves)
        print("tuplemesh: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
