"""The rescale history ``tuplemesh ui --target`` shows: read from the workers' Admin, with real
worker processes rescaled live."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from typing import Any

from tests.helpers import child_pythonpath, eventually
from tests.ui.test_ui_browser import _env_passthrough, _status
from tests.worker.conftest import ROOT, start_mesh
from tests.worker.test_grpcurl import grpcurl
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import admin_pb2


def _view(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return dict(json.loads(reply.read()))


def test_ui_target_lists_a_live_rescale_with_its_from_and_to_epochs() -> None:
    mesh = start_mesh("tests.ui.topologies:wordcount", 2)
    (port,) = free_ports(1)
    targets = f"{mesh.address(0)},{mesh.address(1)}"
    ui = subprocess.Popen(
        [sys.executable, "-m", "tuplemesh.cli", "ui", "--target", targets, "--port", str(port)],
        cwd=ROOT,
        env={"PYTHONPATH": child_pythonpath(), **_env_passthrough()},
    )
    url = f"http://127.0.0.1:{port}/ui/view.json"
    try:
        eventually(lambda: _status(url) == 200, timeout=30, interval=0.1, message="tuplemesh ui serving")
        first = mesh.admin(0).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=10).epoch

        def history() -> list[tuple[str, int]]:
            return [(row["epoch"], row["workers"]) for row in _view(url)["history"]]

        eventually(
            lambda: history() == [(first, 2)], timeout=30, interval=0.2, message=lambda: str(history())
        )
        before = time.time()

        # from 2 workers to 1: worker 1 drains and exits, worker 0 routes by the next epoch
        rescaled = mesh.admin(0).Rebalance(admin_pb2.RebalanceRequest(workers=1), timeout=30).epoch
        assert rescaled != first and rescaled.split("/")[1] == "1"
        eventually(
            lambda: history() == [(rescaled, 1), (first, 2)],
            timeout=60,
            interval=0.2,
            message=lambda: f"history {history()}, wanted {rescaled} then {first}",
        )
        rows = _view(url)["history"]
        assert rows[0]["since"] >= before > rows[1]["since"]

        # the same rows straight from the worker's Admin, as grpcurl shows them
        out = grpcurl("-d", "{}", mesh.address(0), "tuplemesh.v1.Admin/GetEpochHistory")
        assert out.returncode == 0, out.stderr
        answer = json.loads(out.stdout)
        assert [(e["epoch"], e["workers"]) for e in answer["epochs"]] == [(rescaled, 1), (first, 2)]
        since = [e["since_unix_seconds"] for e in answer["epochs"]]
        # only worker 0 routes by the new epoch; the first is listed from the worker that took
        # it first, worker 0 or worker 1
        assert rows[0]["since"] == since[0] and rows[1]["since"] <= since[1]
    finally:
        ui.terminate()
        ui.wait(10)
        mesh.stop()
