"""Worker processes finding each other through the test API server, and a pod that restarts
with a new IP while tuples flow to it: nothing is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.discovery.apiserver import FakeApiServer, endpoint_slice
from tests.discovery.topologies import TOTAL
from tests.helpers import child_pythonpath, eventually
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
SERVICE = "moving-headless"


def start_worker(index: int, host: str, port: int, kubeconfig: Path, sink: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "PYTHONPATH": child_pythonpath(),
        "KUBECONFIG": str(kubeconfig),
        "SINK_FILE": str(sink),
        "TUPLEMESH_WORKER_BIND_HOST": host,
        "TUPLEMESH_METRICS_PORT": "0",
        "TUPLEMESH_TASK_REFRESH_POLL_SECS": "0.5",
        "TUPLEMESH_STORM_MESSAGING_NETTY_MAX_WAIT_MS": "300",
    }
    cmd = [sys.executable, "-m", "tuplemesh.cli", "worker", "tests.discovery.topologies:moving",
           "--index", str(index), "--workers", "2", "--port", str(port), "--discovery", "kubernetes",
           "--discovery-service", SERVICE, "--discovery-namespace", "streams"]  # fmt: skip
    return subprocess.Popen(cmd, cwd=ROOT, env=env)


def serving(address: str) -> bool:
    try:
        stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(address))
        return (
            stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status
            == health_pb2.HealthCheckResponse.SERVING
        )
    except grpc.RpcError:
        return False


def numbers(sink: Path) -> list[int]:
    return [int(line) for line in sink.read_text().split()] if sink.exists() else []


def test_pod_restarting_with_a_new_ip_while_tuples_flow(tmp_path: Path):
    api_port, p0, p1 = free_ports(3)
    apiserver = FakeApiServer(api_port)
    apiserver.up()
    kubeconfig = apiserver.kubeconfig(tmp_path / "kubeconfig")
    sink = tmp_path / "sink.txt"

    def publish(worker1_ip: str, ready: bool) -> None:
        apiserver.put(endpoint_slice("moving-a", SERVICE, [("moving-0", "127.0.0.1", True)], port=p0))
        apiserver.put(endpoint_slice("moving-b", SERVICE, [("moving-1", worker1_ip, ready)], port=p1))

    publish("127.0.0.1", True)
    w0 = start_worker(0, "127.0.0.1", p0, kubeconfig, sink)
    w1 = start_worker(1, "127.0.0.1", p1, kubeconfig, sink)
    w1b = None
    try:
        eventually(
            lambda: serving(f"127.0.0.1:{p0}") and serving(f"127.0.0.1:{p1}"),
            timeout=30,
            interval=0.05,
            message="both workers serving",
        )
        eventually(
            lambda: len(numbers(sink)) >= TOTAL // 4,
            timeout=30,
            interval=0.05,
            message="a quarter of the tuples",
        )
        # the pod restarts: terminating (not ready), then back on a new IP
        apiserver.put(endpoint_slice("moving-b", SERVICE, [("moving-1", "127.0.0.1", False)], port=p1))
        w1.send_signal(signal.SIGTERM)
        assert w1.wait(30) == 0
        before_restart = len(numbers(sink))
        assert before_restart < TOTAL, "the flow ended before the restart: nothing tested"
        w1b = start_worker(1, "127.0.0.2", p1, kubeconfig, sink)
        publish("127.0.0.2", True)
        eventually(
            lambda: len(set(numbers(sink))) >= TOTAL,
            timeout=60,
            interval=0.05,
            message="every tuple at the sink",
        )
        got = numbers(sink)
        assert set(got) == set(range(TOTAL)), f"lost: {sorted(set(range(TOTAL)) - set(got))[:10]}"
        status = admin_pb2_grpc.AdminStub(grpc.insecure_channel(f"127.0.0.1:{p0}")).GetStatus(
            admin_pb2.GetStatusRequest(), timeout=5
        )
        [peer] = status.peers
        assert peer.address == f"127.0.0.2:{p1}" and peer.reconnects >= 1
    finally:
        for proc in (w0, w1, w1b):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (w0, w1, w1b):
            if proc is not None:
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
        apiserver.down()


def run_worker(*args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": child_pythonpath()}
    env.pop("TUPLEMESH_WORKERS", None)
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run(
        [sys.executable, "-m", "tuplemesh.cli", "worker", "tests.discovery.topologies:moving", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_without_a_worker_count_the_statefulset_must_exist(tmp_path: Path):
    [api_port, port] = free_ports(2)
    apiserver = FakeApiServer(api_port)
    apiserver.up()
    try:
        kubeconfig = apiserver.kubeconfig(tmp_path / "kubeconfig")
        out = run_worker("--index", "0", "--port", str(port), "--discovery", "kubernetes",
                         "--discovery-service", SERVICE, "--discovery-namespace", "streams",
                         "--statefulset", "moving", kubeconfig=kubeconfig)  # fmt: skip
        assert out.returncode == 2, out.stderr
        assert out.stderr.strip().splitlines()[-1] == (
            "tuplemesh: error: StatefulSet 'moving' in namespace 'streams' does not exist: "
            "name the workers' StatefulSet with --statefulset, or give --workers"
        )
        assert any("fieldSelector=metadata.name%3Dmoving" in r for r in apiserver.requests)
    finally:
        apiserver.down()


def test_static_peers_cannot_follow_a_statefulset():
    out = run_worker("--index", "0", "--workers", "1", "--statefulset", "moving")
    assert out.returncode == 2
    assert "--statefulset needs --discovery kubernetes" in out.stderr and "Traceback" not in out.stderr
