"""Metrics as Prometheus sees them: promtool lint on a live exposition, and a real Prometheus
server scraping a 2-worker mesh on loopback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh._compiled import COMPILED_MODULES, PURE_PYTHON_ENV
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import admin_pb2

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


@pytest.fixture(scope="module")
def ticker_mesh() -> Iterator[Mesh]:
    mesh = start_mesh("tests.worker.topologies:ticker", 2)
    yield mesh
    assert mesh.stop() == [0, 0]


def test_tools_are_installed():
    assert PROMETHEUS and PROMTOOL, "the Debian prometheus package (installed by .ci/run) provides both"


def test_promtool_finds_nothing_to_complain_about(ticker_mesh: Mesh):
    exposition = scrape(ticker_mesh.metrics_url(0))
    out = subprocess.run([PROMTOOL, "check", "metrics"], input=exposition, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "" and out.stderr.strip() == "", (
        out.stdout + out.stderr
    )
    for name in (
        "tuplemesh_tuples_executed_total",
        "tuplemesh_queue_depth_slots",
        "tuplemesh_queue_capacity_slots",
        "tuplemesh_queue_limit_slots",
        "tuplemesh_transfer_batch_size_tuples_bucket",
        "tuplemesh_peer_connected",
        "tuplemesh_execute_seconds_bucket",
        "tuplemesh_inbox_wait_seconds_count",
    ):
        assert name in exposition
    # what every Prometheus client exports, and which build runs
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds",
                 "python_info", "python_gc_collections_total"):  # fmt: skip
        assert f"\n{name}" in exposition, name
    [info] = [line for line in exposition.splitlines() if line.startswith("tuplemesh_build_info{")]
    assert info.endswith(" 1.0") and 'version="' in info
    build = "pure Python" if os.environ.get(PURE_PYTHON_ENV) else f"compiled: {len(COMPILED_MODULES)} modules"
    assert f'build="{build}"' in info, info
    # per-peer traffic in both directions (the ticker's spout runs on worker 0)
    assert 'tuplemesh_transfer_tuples_sent_total{peer="1",worker="0"}' in exposition
    # what is in flight to the peer, and the waits for room in its send window
    in_flight = ("tuplemesh_peer_unacked_tuples", "tuplemesh_peer_unacked_bytes")
    for name in (*in_flight, "tuplemesh_peer_window_waits_total", "tuplemesh_peer_window_wait_seconds_total"):
        assert f'\n{name}{{peer="1",worker="0"}} ' in exposition, name

    # worker 0 has sent; what it sent may still be on its way to worker 1's receive path
    def received_from_0() -> str | None:
        text = scrape(ticker_mesh.metrics_url(1))
        return text if 'tuplemesh_transfer_tuples_received_total{peer="0",worker="1"}' in text else None

    received = eventually(
        received_from_0, timeout=30, interval=0.1, message="worker 1 exports no tuples received from worker 0"
    )
    assert 'tuplemesh_transfer_bytes_received_total{peer="0",worker="1"}' in received


def test_labels_are_bounded(ticker_mesh: Mesh):
    """No per-tuple or per-message labels: only worker, component, queue, peer, class (the three
    admission classes) and le; the one build-info series carries what the process runs."""
    allowed = {"worker", "component", "queue", "peer", "class", "le"}
    exposition = scrape(ticker_mesh.metrics_url(1))
    assert exposition.count("\ntuplemesh_build_info{") == 1
    for line in exposition.splitlines():
        if line.startswith("tuplemesh_") and "{" in line and not line.startswith("tuplemesh_build_info{"):
            labels = {pair.split("=")[0] for pair in line[line.index("{") + 1 : line.index("}")].split(",")}
            assert labels <= allowed, line


def query(base: str, promql: str) -> list[dict[str, object]]:
    params = {"query": promql}
    with urllib.request.urlopen(f"{base}/api/v1/query?{urllib.parse.urlencode(params)}", timeout=5) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def test_real_prometheus_scrapes_the_mesh_and_agrees_with_it(ticker_mesh: Mesh, tmp_path: Path):
    (port,) = free_ports(1)
    config = tmp_path / "prometheus.yml"
    targets = ", ".join(f'"127.0.0.1:{p}"' for p in ticker_mesh.metrics_ports)
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: tuplemesh\n    static_configs:\n      - targets: [{targets}]\n"
    )
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"

    def both_workers_up() -> bool:
        try:
            up = query(base, "up")
        except OSError:  # Prometheus not listening yet
            return False
        return len(up) == 2 and all(r["value"][1] == "1" for r in up)  # type: ignore[index]

    def prometheus_sink_total() -> float | None:
        result = query(base, 'sum(tuplemesh_tuples_executed_total{component="sink"})')
        return float(result[0]["value"][1]) if result else None  # type: ignore[index]

    def mesh_sink_total() -> int:
        return sum(
            e.executed
            for i in (0, 1)
            for e in ticker_mesh.admin(i).GetStatus(admin_pb2.GetStatusRequest()).executors
            if e.component == "sink"
        )

    def sink_rate() -> float:
        rate = query(base, 'sum(rate(tuplemesh_tuples_executed_total{component="sink"}[3s]))')
        return float(rate[0]["value"][1]) if rate else 0.0  # type: ignore[index]

    try:
        eventually(both_workers_up, timeout=60, interval=0.5, message="Prometheus sees both workers up")
        eventually(sink_rate, timeout=20, interval=0.5, message="a rate from scrapes while tuples flow")
        # stop the flow; Prometheus must end up with exactly the mesh's own final counters
        for i in (0, 1):
            ticker_mesh.admin(i).Drain(admin_pb2.DrainRequest())
        eventually(
            lambda: prometheus_sink_total() == mesh_sink_total() > 0,
            timeout=15,
            interval=0.5,
            message=lambda: f"Prometheus has {prometheus_sink_total()}, the mesh {mesh_sink_total()}",
        )
    finally:
        prom.terminate()
        prom.wait(10)
