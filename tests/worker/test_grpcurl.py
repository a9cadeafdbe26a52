"""The real grpcurl binary (1.8.6, reflection v1alpha) against a running worker."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import eventually
from tests.worker.conftest import Mesh
from tuplemesh.netutil import free_ports

GRPCURL = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")


def grpcurl(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GRPCURL, "-plaintext", *args], capture_output=True, text=True, timeout=timeout)


def test_grpcurl_is_the_real_binary():
    out = subprocess.run([GRPCURL, "-version"], capture_output=True, text=True)
    assert "grpcurl v1.8.6" in (out.stdout + out.stderr)


def test_list_services(wordcount_mesh: Mesh):
    out = grpcurl(wordcount_mesh.address(), "list")
    assert out.returncode == 0, out.stderr
    assert set(out.stdout.split()) == {
        "grpc.health.v1.Health",
        "grpc.reflection.v1.ServerReflection",
        "grpc.reflection.v1alpha.ServerReflection",
        "tuplemesh.v1.Admin",
        "tuplemesh.v1.Gateway",
        "tuplemesh.v1.Transfer",
    }


def test_describe_admin_and_a_message(wordcount_mesh: Mesh):
    out = grpcurl(wordcount_mesh.address(), "describe", "tuplemesh.v1.Admin")
    assert out.returncode == 0, out.stderr
    for rpc in ("GetStatus", "GetAssignment", "ListQueues", "WatchStats", "Emit", "Drain"):
        assert f"rpc {rpc}" in out.stdout
    # a call a feature adds to Admin is described with Admin's own, from the feature's proto
    hot_keys = "( .tuplemesh.hotkeys.v1.HotKeysRequest ) returns ( .tuplemesh.hotkeys.v1.HotKeysResponse )"
    assert f"rpc HotKeys {hot_keys}" in out.stdout
    assert "returns ( stream .tuplemesh.v1.WorkerStats )" in out.stdout
    out = grpcurl(wordcount_mesh.address(), "describe", "tuplemesh.v1.TransferBatch")
    assert "fixed64 session = 6;" in out.stdout


def test_get_status(wordcount_mesh: Mesh):
    out = grpcurl("-d", "{}", wordcount_mesh.address(1), "tuplemesh.v1.Admin/GetStatus")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["topology"] == "wordcount" and status["worker"] == 1 and status["workers"] == 2
    assert status["transport"] == "grpc" and status["state"] == "SERVING"
    # proto3 JSON leaves out zero values: worker 0 has no "worker" key
    assert [p.get("worker", 0) for p in status["peers"]] == [0]
    assert status["peers"][0]["state"] == "READY"
    # executors by name, round-robin: worker 1 holds count[2], sentences[4] and split[6]
    assert sorted(e["component"] for e in status["executors"]) == ["count", "sentences", "split"]
    # what the features report of themselves: nothing watched, hot keys not counted (the
    # default); no ticks, no gateway components and no checkpoints here, so no section of theirs
    sections = json.loads(status["feature_sections_json"])
    assert sections == {
        "sampling": {"watched_executors": []},
        "hotkeys": {"top_k": 10, "sample_every": 128, "streams": []},
    }


def test_get_assignment_matches_on_every_worker(wordcount_mesh: Mesh):
    answers = [
        json.loads(grpcurl("-d", "{}", wordcount_mesh.address(i), "tuplemesh.v1.Admin/GetAssignment").stdout)
        for i in (0, 1)
    ]
    assert answers[0] == answers[1]
    assert (
        sorted(e["component"] for e in answers[0]["executors"])
        == ["count"] * 3 + ["sentences"] + ["split"] * 3
    )


def test_emit_injects_a_tuple(wordcount_mesh: Mesh):
    body = json.dumps({"component": "count", "values_json": json.dumps(["grpcurl-word"])})
    out = grpcurl("-d", body, wordcount_mesh.address(0), "tuplemesh.v1.Admin/Emit")
    assert out.returncode == 0, out.stderr
    task = json.loads(out.stdout)["task"]

    def counted() -> int | None:
        status = json.loads(
            grpcurl(
                "-d", '{"include_reports": true}', wordcount_mesh.address(0), "tuplemesh.v1.Admin/GetStatus"
            ).stdout
        )
        reports = json.loads(status["reports_json"])  # grpcurl prints the proto field names
        count: int | None = reports["count"].get(str(task), {}).get("counts", {}).get("grpcurl-word")
        return count

    assert eventually(counted, interval=0.05, message="the injected word was not counted") == 1


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"component": "nope", "values_json": "[1]"}, "NotFound", "no component 'nope'"),
        ({"component": "count", "values_json": "[1"}, "InvalidArgument", "values_json is not JSON"),
        ({"component": "count", "values_json": "{}"}, "InvalidArgument", "must be a JSON array"),
        (
            {"component": "count", "values_json": "[1, 2]"},
            "InvalidArgument",
            "has 1 field(s) ['word'], got 2",
        ),
        ({"component": "sentences", "values_json": "[1]"}, "InvalidArgument", "has no inputs"),
        ({"task": 999, "values_json": "[1]"}, "NotFound", "no task 999"),
        ({"values_json": "[1]"}, "InvalidArgument", "give a component or a task"),
    ],
)
def test_emit_bad_input(wordcount_mesh: Mesh, body, code, message):
    out = grpcurl("-d", json.dumps(body), wordcount_mesh.address(0), "tuplemesh.v1.Admin/Emit")
    assert out.returncode != 0
    assert f"Code: {code}" in out.stderr and message in out.stderr


def test_watch_stats_streams_messages(wordcount_mesh: Mesh):
    out = grpcurl("-max-time", "1.5", "-d", '{"interval_seconds": 0.2}', wordcount_mesh.address(0),
                  "tuplemesh.v1.Admin/WatchStats")  # fmt: skip
    assert "DeadlineExceeded" in out.stderr  # the stream only ends when the client stops it
    decoder = json.JSONDecoder()
    text, messages = out.stdout.strip(), []
    while text:
        message, end = decoder.raw_decode(text)
        messages.append(message)
        text = text[end:].strip()
    assert 4 <= len(messages) <= 8
    assert all(m.get("worker", 0) == 0 and m["queues"] for m in messages)


def test_list_queues(wordcount_mesh: Mesh):
    out = grpcurl("-d", "{}", wordcount_mesh.address(0), "tuplemesh.v1.Admin/ListQueues")
    queues = {q["name"]: q for q in json.loads(out.stdout)["queues"]}
    assert queues["transfer"]["capacity"] == "1024"  # uint64 is a JSON string in proto3 JSON
    # the queue-time limit: never fewer than 4 slots, never more than the ring has
    assert all(4 <= int(q["limit"]) <= int(q["capacity"]) for q in queues.values()), queues
    # one inbox per executor of worker 0: count[1], count[3], split[5], split[7]
    assert len([name for name in queues if name.startswith("inbox:")]) == 4


def test_health_check(wordcount_mesh: Mesh):
    out = grpcurl(
        "-d", '{"service": "tuplemesh.v1.Transfer"}', wordcount_mesh.address(0), "grpc.health.v1.Health/Check"
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"status": "SERVING"}


def test_top_once_shows_workers_components_and_queues(wordcount_mesh: Mesh):
    targets = f"{wordcount_mesh.address(0)},{wordcount_mesh.address(1)}"
    out = subprocess.run(
        [sys.executable, "-m", "tuplemesh.cli", "top", "--target", targets, "--once", "--interval", "0.2"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )
    assert out.returncode == 0, out.stderr
    for text in (
        "components",
        "queues",
        "limit",
        "count",
        "split",
        "transfer",
        "inbox:count",
        f"0 ({wordcount_mesh.address(0)})",
        "discarded, refused or lost",  # read back from each worker's status
        "stranded",
    ):
        assert text in out.stdout, text


def test_top_unreachable_and_bad_targets():
    (closed,) = free_ports(1)  # nothing listens there
    argv = [sys.executable, "-m", "tuplemesh.cli", "top", "--target", f"127.0.0.1:{closed}", "--once"]
    out = subprocess.run([*argv, "--interval", "0.2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and f"127.0.0.1:{closed}: UNAVAILABLE" in out.stdout
    out = subprocess.run([sys.executable, "-m", "tuplemesh.cli", "top", "--target", "nowhere"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and "--target 'nowhere' is not HOST:PORT" in out.stderr
