"""A network partition between two workers in different network namespaces, cut for 5 s and healed.

Worker 0 (the sink) runs in the root namespace, worker 1 (the spout) in a namespace of its own,
joined by a veth pair. While the link is cut the spout keeps offering tuples: the sender's window
and rings fill and block it, so its memory stays bounded; after the heal the held tuples flow
again within 2 s and every id arrives exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.fault.harness import proc_status, reports, sink_counts, wait_settled, write_config
from tests.fault.netns import VethLink
from tests.helpers import child_pythonpath, eventually
from tests.worker.conftest import Mesh, wait_serving
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import admin_pb2

ROOT = Path(__file__).resolve().parents[2]
IDS = 24_000
RATE = 2000.0


def sink_seen(mesh: Mesh) -> int:
    """Tuples worker 0 (it runs only the sink) has consumed so far."""
    return int(mesh.admin(0).GetStatus(admin_pb2.GetStatusRequest(), timeout=5.0).consumed)


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
        mesh = Mesh([port_a, port_b], [], [], [], hosts=[link.root_ip, link.ns_ip])
        peers = ",".join(mesh.address(i) for i in (0, 1))
        for index, (host, port) in enumerate([(link.root_ip, port_a), (link.ns_ip, port_b)]):
            cmd = [sys.executable, "-m", "tuplemesh.cli", "worker", "tests.fault.topologies:pipe",
                   "--index", str(index), "--workers", "2", "--port", str(port), "--peers", peers,
                   "--config", str(config)]  # fmt: skip
            if index == 1:
                cmd = link.exec_prefix() + cmd
            env = {**os.environ, "PYTHONPATH": child_pythonpath(), "TUPLEMESH_WORKER_BIND_HOST": host}
            mesh.procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env))
            mesh.commands.append((cmd, env))
        try:
            for index in (0, 1):
                wait_serving(mesh, index)
            eventually(
                lambda: sink_seen(mesh) >= RATE, timeout=30, message="a second's worth of ids at the sink"
            )
            before_cut = sink_seen(mesh)
            baseline_rss = proc_status(mesh.procs[1].pid)[0]
            link.cut()
            cut_at = time.monotonic()
            peak_rss = baseline_rss
            settled_count = None
            # deliberate: the partition lasts 5 s; sample the sender's memory meanwhile
            while time.monotonic() - cut_at < 5.0:
                peak_rss = max(peak_rss, proc_status(mesh.procs[1].pid)[0])
                if settled_count is None and time.monotonic() - cut_at > 1.0:
                    settled_count = sink_seen(mesh)  # in-flight data has drained by now
                time.sleep(0.2)  # deliberate: the sampling period
            during_cut = sink_seen(mesh)
            link.heal()
            healed_at = time.monotonic()
            eventually(
                lambda: sink_seen(mesh) != during_cut,
                timeout=2.0,
                interval=0.02,
                message="a tuple within 2 s of the heal",
            )
            recovery = time.monotonic() - healed_at
            # the spout offered ~RATE per second for 5 s; none of it got through the cut
            assert settled_count is not None and during_cut == settled_count
            assert peak_rss - baseline_rss < 40 * 1024 * 1024, (baseline_rss, peak_rss)
            wait_settled(mesh, timeout=60.0)
            assert sink_counts(reports(mesh)) == Counter(range(IDS)), "an id was lost or delivered twice"
            print(
                f"partition: {during_cut - before_cut} tuples before the cut took effect, recovery "
                f"{recovery:.2f}s, sender RSS {baseline_rss >> 20} -> peak {peak_rss >> 20} MiB"
            )
        finally:
            if link.is_cut:
                link.heal()
            codes = mesh.stop()
        assert codes == [0, 0]
