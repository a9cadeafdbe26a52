"""A network partition between two workers in different network namespaces, cut for 5 s and healed.

Worker 0 (the sink) runs in the root namespace, worker 1 (the spout) in a namespace of its own,
joined by a veth pair. While the link is cut the spout keeps offering tuples: the sender's window
and rings fill and block it, so its memory stays bounded; after the heal the held tuples flow
again within 2 s and every id arrives exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2_grpc

from tests.fault.harness import write_config
from tests.fault.netns import VethLink
from tuplemesh.launcher import is_serving, stop_processes
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
IDS = 24_000
RATE = 2000.0


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def status(address: str, reports: bool = False) -> admin_pb2.WorkerStatus:
    with grpc.insecure_channel(address) as channel:
        request = admin_pb2.GetStatusRequest(include_reports=reports)
        return admin_pb2_grpc.AdminStub(channel).GetStatus(request, timeout=5.0)


def sink_seen(address: str) -> int:
    """Tuples worker 0 (it runs only the sink) has consumed so far."""
    return int(status(address).consumed)


def wait_serving(address: str, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"worker at {address} exited"
            if is_serving(stub):
                return
            time.sleep(0.05)
    raise TimeoutError(f"{address} not SERVING")


def test_partition_for_5s_loses_nothing_bounds_memory_and_recovers_within_2s(tmp_path: Path):
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "fault.ids": IDS,
            "fault.rate": RATE,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
            "metrics.port": 0,
            "messaging.keepalive.millis": 1000,  # the cut is noticed within 2 s, not by TCP's timers
        },
    )
    port_a, port_b = free_ports(2)
    with VethLink() as link:
        addresses = [f"{link.root_ip}:{port_a}", f"{link.ns_ip}:{port_b}"]
        peers = ",".join(addresses)
        procs: list[subprocess.Popen[bytes]] = []
        for index, (host, port) in enumerate([(link.root_ip, port_a), (link.ns_ip, port_b)]):
            cmd = [sys.executable, "-m", "tuplemesh.cli", "worker", "tests.fault.topologies:pipe",
                   "--index", str(index), "--workers", "2", "--port", str(port), "--peers", peers,
                   "--config", str(config)]  # fmt: skip
            if index == 1:
                cmd = link.exec_prefix() + cmd
            env = {**os.environ, "PYTHONPATH": str(ROOT), "TUPLEMESH_WORKER_BIND_HOST": host}
            procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env))
        try:
            for address, proc in zip(addresses, procs, strict=True):
                wait_serving(address, proc)
            time.sleep(2.0)  # flowing
            before_cut = sink_seen(addresses[0])
            assert before_cut > 0
            baseline_rss = rss_bytes(procs[1].pid)
            link.cut()
            cut_at = time.monotonic()
            peak_rss = baseline_rss
            settled_count = None
            while time.monotonic() - cut_at < 5.0:
                peak_rss = max(peak_rss, rss_bytes(procs[1].pid))
                if settled_count is None and time.monotonic() - cut_at > 1.0:
                    settled_count = sink_seen(addresses[0])  # in-flight data has drained by now
                time.sleep(0.2)
            during_cut = sink_seen(addresses[0])
            link.heal()
            healed_at = time.monotonic()
            while sink_seen(addresses[0]) == during_cut:
                assert time.monotonic() - healed_at < 2.0, "no tuple arrived within 2 s of the heal"
                time.sleep(0.02)
            recovery = time.monotonic() - healed_at
            # the spout offered ~RATE per second for 5 s; none of it got through the cut
            assert settled_count is not None and during_cut == settled_count
            assert peak_rss - baseline_rss < 40 * 1024 * 1024, (baseline_rss, peak_rss)
            deadline = time.monotonic() + 60
            while not all(s.spouts_finished and s.idle for s in (status(a) for a in addresses)):
                assert time.monotonic() < deadline, "mesh did not settle after the heal"
                time.sleep(0.2)
            report = json.loads(status(addresses[0], reports=True).reports_json)
            seen = Counter({int(k): v for r in report["count"].values() for k, v in r["seen"].items()})
            assert seen == Counter(range(IDS)), "an id was lost or delivered twice"
            print(
                f"partition: {during_cut - before_cut} tuples before the cut took effect, recovery "
                f"{recovery:.2f}s, sender RSS {baseline_rss >> 20} -> peak {peak_rss >> 20} MiB"
            )
        finally:
            if link.is_cut:
                link.heal()
            codes = stop_processes(procs, 30)
        assert codes == [0, 0]
