"""``tuplemesh run`` and ``tuplemesh worker`` when something fails: user code that raises, bad
targets, Ctrl-C, a worker that cannot start. Real processes, exit codes and the exact lines."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2_grpc

from tests.helpers import child_pythonpath, eventually, freeze, run_cli
from tuplemesh.cpus import format_cpu_list, own_shares
from tuplemesh.launcher import is_serving
from tuplemesh.server.status_proto import snapshot_from_proto
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGIES = "tests.failing_topologies"


def env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": child_pythonpath(), **extra}


def tuplemesh(
    *args: str, cwd: Path = ROOT, timeout: float = 90, **extra: str
) -> subprocess.CompletedProcess[str]:
    """Run the command to its end (``timeout`` only guards the test: none of these runs waits)."""
    return run_cli(*args, cwd=cwd, env=extra, timeout=timeout)


def error_lines(stderr: str) -> list[str]:
    """The command's own lines (workers log too, with a timestamp)."""
    return [line for line in stderr.splitlines() if line.startswith("tuplemesh: ")]


# -- user code that raises ----------------------------------------------------------------------


@pytest.mark.parametrize("transport", ["local", "grpc"])
def test_a_bolt_raising_on_every_tuple_fails_the_run_naming_the_first(transport):
    out = tuplemesh("run", f"{TOPOLOGIES}:bolt_raises", "--transport", transport, "--workers", "2", "--json")
    assert out.returncode == 1, out.stderr
    summary = json.loads(out.stdout)
    first = summary["first_error"]
    assert (first["component"], first["method"], first["type"]) == ("sink", "execute", "ValueError")
    assert first["task"] in (3, 4) and first["worker"] in (0, 1)
    assert re.fullmatch(r"cannot handle \d+", first["message"])
    assert summary["failed_by_errors"] is True and summary["matched"] is False
    errors = summary["components"]["sink"]["errors"]
    assert errors == summary["errors"] >= 1
    line = (
        f"tuplemesh: error: user code raised {errors} exception(s), the first: component 'sink' "
        f"task {first['task']} (worker {first['worker']}) raised in execute: ValueError: {first['message']}"
    )
    assert error_lines(out.stderr) == [line]
    assert summary["message"] == line.removeprefix("tuplemesh: error: ")
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("transport", ["local", "grpc"])
def test_a_raising_prepare_fails_the_run_at_start(transport):
    # a run that waited out --timeout would outlive the subprocess's 90 s
    out = tuplemesh("run", f"{TOPOLOGIES}:prepare_raises", "--transport", transport, "--timeout", "600")
    assert out.returncode == 1, out.stderr
    assert error_lines(out.stderr) == [
        "tuplemesh: error: user code raised 1 exception(s), the first: component 'sink' task 2 "
        "(worker 0) raised in prepare: RuntimeError: no database at db.invalid"
    ]
    assert "RESULT WRONG: user code raised 1 exception(s)" in out.stdout


@pytest.mark.parametrize("transport", ["local", "zmq"])
def test_a_spout_whose_next_tuple_raises_ends_the_run_naming_it(transport):
    out = tuplemesh(
        "run", f"{TOPOLOGIES}:spout_raises", "--transport", transport, "--timeout", "600", "--json"
    )
    assert out.returncode == 1, out.stderr
    summary = json.loads(out.stdout)
    spout_errors = summary["components"]["source"]["spout_errors"]
    assert spout_errors == summary["errors"] >= 1  # counted, as a bolt's are
    assert summary["first_error"] == {
        "component": "source",
        "task": 2,
        "method": "next_tuple",
        "type": "ConnectionError",
        "message": "source unreachable",
        "worker": 0,
    }
    assert error_lines(out.stderr) == [
        f"tuplemesh: error: user code raised {spout_errors} exception(s), the first: component "
        "'source' task 2 (worker 0) raised in next_tuple: ConnectionError: source unreachable"
    ]


def test_the_table_counts_spout_errors_in_the_errors_column():
    out = tuplemesh("run", f"{TOPOLOGIES}:spout_raises", "--transport", "local")
    assert out.returncode == 1
    [row] = [line.split() for line in out.stdout.splitlines() if line.startswith("source ")]
    summary_count = int(re.search(r"raised (\d+) exception", out.stderr).group(1))
    assert int(row[3]) == summary_count >= 1


@pytest.mark.parametrize(
    ("target", "tolerated", "code"),
    [
        ("some_raise", "3", 0),  # three exceptions, three tolerated
        ("some_raise", "2", 1),
        ("some_raise_tolerated", None, 0),  # the topology's conf sets it
    ],
)
def test_topology_errors_tolerated(target, tolerated, code):
    extra = {} if tolerated is None else {"TUPLEMESH_TOPOLOGY_ERRORS_TOLERATED": tolerated}
    out = tuplemesh("run", f"{TOPOLOGIES}:{target}", "--transport", "local", "--json", **extra)
    assert out.returncode == code, out.stderr
    summary = json.loads(out.stdout)
    assert summary["first_error"]["type"] == "KeyError"
    if code == 0:
        assert summary["errors"] == 3 and summary["matched"] is True
        assert summary["message"] == "57 ok" and error_lines(out.stderr) == []
    else:
        assert summary["failed_by_errors"] is True
        assert error_lines(out.stderr)[0].startswith("tuplemesh: error: user code raised 3 exception(s)")


# -- bad targets --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "line"),
    [
        (
            "broken_import:topology",
            "cannot import module 'broken_import' (from 'broken_import:topology'): "
            "ModuleNotFoundError: No module named 'no_such_dependency'",
        ),
        (
            "name_error:topology",
            "cannot import module 'name_error' (from 'name_error:topology'): NameError: name "
            "'undefined_name' is not defined",
        ),
        (
            f"{TOPOLOGIES}:needs_arguments",
            f"'{TOPOLOGIES}:needs_arguments' needs argument(s) size: name a Topology, or a function "
            "that builds one without arguments",
        ),
        (
            f"{TOPOLOGIES}:not_a_topology",
            f"'{TOPOLOGIES}:not_a_topology' is a dict, not a Topology "
            "(build it with TopologyBuilder.build())",
        ),
        (
            f"{TOPOLOGIES}:missing",
            f"module '{TOPOLOGIES}' has no attribute 'missing' (from '{TOPOLOGIES}:missing')",
        ),
        (
            "raising_builder:build",
            "'raising_builder:build' raised while building the topology: ValueError: no config",
        ),
    ],
)
def test_a_bad_target_is_one_line_and_exit_2(tmp_path, target, line):
    (tmp_path / "broken_import.py").write_text("import no_such_dependency\n")
    (tmp_path / "name_error.py").write_text("topology = undefined_name\n")
    (tmp_path / "raising_builder.py").write_text("def build():\n    raise ValueError('no config')\n")
    out = tuplemesh("run", target, "--transport", "local", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.splitlines() == [f"tuplemesh: error: {line}"]


# -- signals --------------------------------------------------------------------------------------


def start_run(*args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """Start ``tuplemesh run`` over 2 grpc workers; returns it and its workers' Admin addresses,
    read from the lines it prints, once every worker serves."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuplemesh.cli", "run", *args, "--workers", "2", "--quiet"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
    )
    assert proc.stderr is not None
    lines = [proc.stderr.readline() for _ in range(2)]
    # pinned by default where each worker can have CPUs of its own
    cpus = own_shares(2)
    addresses = []
    for index, line in enumerate(lines):
        pinned = "" if cpus is None else f", CPUs {format_cpu_list(cpus[index])}"
        match = re.fullmatch(
            rf"worker {index}: admin (127\.0\.0\.1:\d+) \(tuplemesh top --target \1\), "
            rf"metrics http://127\.0\.0\.1:\d+/metrics{re.escape(pinned)}\n",
            line,
        )
        assert match, line
        addresses.append(match.group(1))
    for address in addresses:
        with grpc.insecure_channel(address) as channel:
            eventually(lambda: is_serving(health_pb2_grpc.HealthStub(channel)), 60.0)
    return proc, addresses


def refused(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) != 0


def test_ctrl_c_stops_every_worker_once_and_exits_130():
    proc, addresses = start_run(f"{TOPOLOGIES}:endless")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 130, stderr
    assert error_lines(stderr) == ["tuplemesh: interrupted by SIGINT; workers stopped"]
    assert "RESULT UNCHECKED: interrupted by SIGINT; workers stopped" in stdout
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert "second SIG" not in stderr  # each worker drained on its one SIGTERM
    assert all(refused(a) for a in addresses)


def test_ctrl_c_stops_a_local_run_and_exits_130(tmp_path):
    marker = tmp_path / "opened"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuplemesh.cli", "run", f"{TOPOLOGIES}:endless", "--transport", "local"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(OPENED_MARKER=str(marker)),
    )
    eventually(marker.exists, 60.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.splitlines() == ["tuplemesh: interrupted by SIGINT; workers stopped"]
    # the run's summary, as over worker processes: what was done before the signal
    assert "RESULT UNCHECKED: interrupted by SIGINT; workers stopped" in stdout
    sink = re.search(r"^sink +(\d+) +(\d+) ", stdout, re.MULTILINE)
    numbers = re.search(r"^numbers +(\d+) +(\d+) ", stdout, re.MULTILINE)
    assert sink and numbers, stdout
    assert int(sink.group(2)) == int(numbers.group(1)), stdout  # every number emitted was counted


def test_serve_keeps_the_mesh_up_after_the_spouts_finish_until_sigterm():
    proc, addresses = start_run(f"{TOPOLOGIES}:counted", "--serve", "--json")

    def all_counted() -> bool:
        statuses = []
        for address in addresses:
            with grpc.insecure_channel(address) as channel:
                admin = admin_pb2_grpc.AdminStub(channel)
                statuses.append(admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=10))
        executed = sum(e.executed for s in statuses for e in s.executors if e.component == "sink")
        return all(s.spouts_finished for s in statuses) and executed == 60

    eventually(all_counted, 60.0)
    assert proc.poll() is None  # finished, and still serving
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout)
    assert summary["completed"] is True and summary["matched"] is True
    assert summary["message"] == "60 of 60 tuples counted"
    assert all(refused(a) for a in addresses)


def test_serve_ends_an_unbounded_run_on_sigterm_unchecked():
    proc, addresses = start_run(f"{TOPOLOGIES}:endless", "--serve")
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=90)
    assert proc.returncode == 0, stderr
    assert "RESULT UNCHECKED: served until SIGTERM; the spouts had not finished: result not checked" in stdout
    assert error_lines(stderr) == []
    assert all(refused(a) for a in addresses)


# -- workers that cannot start --------------------------------------------------------------------


def free_block() -> int:
    """A port P with P, P+1, P+2 and P+2400, P+2401, P+2402 free a moment ago."""
    for _ in range(200):
        base = random.randrange(20000, 30000)
        sockets = []
        try:
            for port in (base, base + 1, base + 2, base + 2400, base + 2401, base + 2402):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise AssertionError("no free block of ports")


def worker(port: int, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tuplemesh.cli", "worker", f"{TOPOLOGIES}:counted", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(**extra),
    )


def test_workers_on_one_host_get_their_own_metrics_port_and_a_taken_port_fails_at_once():
    base = free_block()
    first, second = worker(base), worker(base + 1)  # as the docs start them by hand
    try:
        for port in (base, base + 1):
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                eventually(lambda: is_serving(health_pb2_grpc.HealthStub(channel)), 60.0)
            with urllib.request.urlopen(f"http://127.0.0.1:{port + 2400}/metrics", timeout=10) as reply:
                assert b"tuplemesh_build_info" in reply.read()
        # the same --port: exits at once (a worker that hung would outlive the 60 s)
        taken = worker(base)
        _, stderr = taken.communicate(timeout=60)
        assert taken.returncode == 2
        assert stderr.splitlines() == [  # this one line, nothing else
            f"tuplemesh: error: --port {base}: cannot listen on 127.0.0.1:{base} (in use, or not an "
            "address of this host: worker.bind.host); give each worker of a host its own --port"
        ]
        # its own --port, but the metrics port of the first
        clash = worker(base + 2, TUPLEMESH_METRICS_PORT=str(base + 2400))
        _, stderr = clash.communicate(timeout=60)
        assert clash.returncode == 2
        assert stderr.splitlines() == [
            f"tuplemesh: error: metrics.port {base + 2400}: cannot serve /metrics on "
            f"127.0.0.1:{base + 2400}: Address already in use; set metrics.port "
            "(TUPLEMESH_METRICS_PORT) to a free port, or 0"
        ]
        assert refused(f"127.0.0.1:{base + 2}")  # it let go of its own port too
    finally:
        for proc in (first, second):
            proc.send_signal(signal.SIGTERM)
        assert [proc.wait(60) for proc in (first, second)] == [0, 0]
        for proc in (first, second):
            proc.communicate()


def worker_pids(launcher: int) -> list[int]:
    """The worker processes ``tuplemesh run`` started (its children), in start order."""
    children = Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()
    return sorted(int(pid) for pid in children)


def test_a_worker_paused_longer_than_the_status_deadline_is_waited_for_and_nothing_is_lost(tmp_path):
    # the paced stateful word count: 12 x 1000 sentences from 2 spout tasks at 400/s each, about
    # 15 s of input; worker 1 is paused for 20 s in the middle, twice Admin's 10 s call deadline
    config = tmp_path / "tuplemesh.yaml"
    config.write_text(
        f"wordcount.rate: 400\ntopology.state.backend: sqlite\n"
        f"topology.state.sqlite.path: {tmp_path / 'state.sqlite'}\n"
    )
    os.environ["WORDCOUNT_REPEAT"] = "1000"  # the launcher, its workers and the check agree
    try:
        proc, addresses = start_run(
            "examples.stateful_wordcount:topology", "--config", str(config), "--json", "--timeout", "300"
        )
    finally:
        del os.environ["WORDCOUNT_REPEAT"]
    workers = worker_pids(proc.pid)
    assert len(workers) == 2
    with grpc.insecure_channel(addresses[1]) as channel:
        admin = admin_pb2_grpc.AdminStub(channel)
        eventually(
            lambda: snapshot_from_proto(admin.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)).delivered,
            timeout=30,
            message="worker 1 executing",
        )
    freeze(workers[1])
    try:
        time.sleep(20)  # the pause itself is the input: longer than any Admin call's deadline
        assert proc.poll() is None, proc.communicate()[1]  # the launcher waits for the worker
    finally:
        os.kill(workers[1], signal.SIGCONT)
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 0, stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert (summary["completed"], summary["matched"]) == (True, True), summary["message"]
    transfer = summary["transfer"]
    assert (transfer["lost"], transfer["stranded"], transfer["lost_on_close"]) == (0, 0, 0)
    assert "not sent (lost)" not in stderr and "unacknowledged tuple" not in stderr
