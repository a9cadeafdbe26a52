"""The mesh follows its StatefulSet's replicas: worker processes with Kubernetes discovery against
the test API server, and the test doing what the StatefulSet controller does.

The stateful word count runs on 3 workers; while sentences flow the StatefulSet is scaled to 5
(the test starts pods 3 and 4, which wait to be included, and publishes their endpoints), then
to 2 (the test sends SIGTERM to pods 2, 3 and 4 right after the scale, and drops each endpoint
once its pod has exited: the chart's headless Service publishes not-ready addresses, so an
endpoint goes with its pod). Each scale drives a live rescale started by worker 0; the final
counts must be exact and no tuple may reach a worker that does not own its task.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.discovery.apiserver import FakeApiServer, endpoint_slice, statefulset
from tests.fault.harness import (
    SpoutProgress,
    assert_exact_counts,
    emitted,
    epoch_of,
    head,
    rescale_pause,
    spouting,
    stateful_wordcount_config,
    statuses,
    wait_rescaled,
    wait_settled,
)
from tests.helpers import child_pythonpath, eventually
from tests.worker.conftest import ROOT, Mesh, wait_serving
from tuplemesh.launcher import stop_processes
from tuplemesh.netutil import free_ports

TARGET = "examples.stateful_wordcount:topology"
NAME = "wc"  # the StatefulSet; its pods are wc-0, wc-1, ...
SERVICE = "wc-headless"
MOST = 5
REPEAT = 2500  # 30000 sentences
RATE = 1000.0  # sentences per second per spout task: about 15 s of input


def start_pod(mesh: Mesh, index: int, config: Path, kubeconfig: Path) -> None:
    """What the kubelet starts for pod ``index``: no worker count, the StatefulSet's name."""
    cmd = [sys.executable, "-m", "tuplemesh.cli", "worker", TARGET, "--index", str(index),
           "--port", str(mesh.ports[index]), "--discovery", "kubernetes",
           "--discovery-service", SERVICE, "--discovery-namespace", "streams",
           "--config", str(config)]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": child_pythonpath(),
        "KUBECONFIG": str(kubeconfig),
        "TUPLEMESH_STATEFULSET": NAME,
        "TUPLEMESH_METRICS_PORT": str(mesh.metrics_ports[index]),
        # as the chart sets it for a mesh that follows its StatefulSet: worker 0 rescales its
        # peers through their Admin.Rebalance
        "TUPLEMESH_ADMIN_REBALANCE_ENABLED": "true",
    }
    env.pop("TUPLEMESH_WORKERS", None)
    mesh.procs[index] = subprocess.Popen(cmd, cwd=ROOT, env=env)
    mesh.commands[index] = (cmd, env)


def publish_endpoint(apiserver: FakeApiServer, mesh: Mesh, index: int) -> None:
    pod = f"{NAME}-{index}"
    apiserver.put(endpoint_slice(pod, SERVICE, [(pod, "127.0.0.1", True)], port=mesh.ports[index]))


def test_stateful_wordcount_follows_the_statefulset_3_to_5_to_2_counts_exact(tmp_path: Path):
    api_port, *ports = free_ports(1 + 2 * MOST)
    apiserver = FakeApiServer(api_port)
    apiserver.up()
    kubeconfig = apiserver.kubeconfig(tmp_path / "kubeconfig")
    config = stateful_wordcount_config(
        tmp_path / "tuplemesh.yaml", REPEAT, RATE, **{"task.refresh.poll.secs": 0.5}
    )
    mesh = Mesh(ports[:MOST], [None] * MOST, ports[MOST:], [None] * MOST)  # type: ignore[list-item]
    try:
        apiserver.put(statefulset(NAME, 3))
        for index in range(3):
            publish_endpoint(apiserver, mesh, index)
            start_pod(mesh, index, config, kubeconfig)
        for index in range(3):
            wait_serving(mesh, index)
        assert {epoch_of(mesh, i).workers for i in range(3)} == {3}  # type: ignore[union-attr]
        eventually(lambda: emitted(mesh, 3) >= 2000, timeout=30, interval=0.1)
        with SpoutProgress([mesh.address(i) for i in range(MOST)]) as progress:
            eventually(lambda: progress.emitting(0, spouting(mesh, 3)), timeout=10, interval=0.02)

            # kubectl scale --replicas=5: the controller creates pods 3 and 4
            scaled = time.monotonic()
            apiserver.put(statefulset(NAME, 5))
            for index in (3, 4):
                start_pod(mesh, index, config, kubeconfig)
                publish_endpoint(apiserver, mesh, index)
            wait_rescaled(mesh, 5, 1)
            up = time.monotonic() - scaled, rescale_pause(mesh, progress, 0, 1, 5)
            eventually(lambda: emitted(mesh, 5) >= 2000, timeout=30, interval=0.1)

            # kubectl scale --replicas=2: the controller terminates pods 4, 3 and 2 at once
            scaled = time.monotonic()
            apiserver.put(statefulset(NAME, 2))
            for index in (4, 3, 2):
                mesh.procs[index].send_signal(signal.SIGTERM)
            for index in (4, 3, 2):
                assert mesh.procs[index].wait(60) == 0, f"removed pod {index} did not drain and exit cleanly"
                apiserver.delete(f"{NAME}-{index}")
            wait_rescaled(mesh, 2, 2)
            down = time.monotonic() - scaled, rescale_pause(mesh, progress, 1, 2, 2)

        two = head(mesh, 2)
        wait_settled(two, timeout=120.0)
        assert_exact_counts(two, REPEAT)
        assert [s.unknown_task_messages for s in statuses(two)] == [0, 0]
        print(
            f"3 -> 5 workers: {up[0]:.2f} s from the scale to the mesh serving, spouts paused {up[1]:.2f} s; "
            f"5 -> 2 workers: {down[0]:.2f} s, spouts paused {down[1]:.2f} s"
        )
    finally:
        codes = stop_processes([proc for proc in mesh.procs[:2] if proc is not None], 30)
        for proc in mesh.procs[2:]:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
        apiserver.down()
    assert codes == [0, 0]
