"""Admin/WatchTuples with the real grpcurl binary against running worker processes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.worker.conftest import Mesh, start_mesh
from tests.worker.test_grpcurl import GRPCURL, grpcurl

WATCH = "tuplemesh.v1.Admin/WatchTuples"


@pytest.fixture(scope="module")
def ticker_mesh() -> Iterator[Mesh]:
    """Two workers: the spout ``ticks`` on worker 0 feeds ``sink`` on both (one task each)."""
    mesh = start_mesh("tests.worker.topologies:ticker", 2)
    yield mesh
    assert mesh.stop() == [0, 0]


def messages(stdout: str) -> list[dict[str, Any]]:
    decoder, text, out = json.JSONDecoder(), stdout.strip(), []
    while text:
        message, end = decoder.raw_decode(text)
        out.append(message)
        text = text[end:].strip()
    return out


def watch(mesh: Mesh, index: int, body: dict[str, Any], seconds: float) -> list[dict[str, Any]]:
    out = grpcurl("-max-time", str(seconds), "-d", json.dumps(body), mesh.address(index), WATCH)
    assert "DeadlineExceeded" in out.stderr, out.stderr  # the stream ends when the client stops
    return messages(out.stdout)


def test_describe_shows_the_stream(ticker_mesh: Mesh):
    out = grpcurl(ticker_mesh.address(), "describe", "tuplemesh.v1.Admin")
    assert out.returncode == 0, out.stderr
    assert (
        "rpc WatchTuples ( .tuplemesh.v1.WatchTuplesRequest ) returns ( stream .tuplemesh.v1.SampledTuple )"
        in out.stdout
    )


@pytest.mark.parametrize("index", [0, 1])  # local deliveries on 0, decoded payloads on 1
def test_samples_are_rate_limited_json_and_in_order(ticker_mesh: Mesh, index: int):
    samples = watch(ticker_mesh, index, {"component": "sink", "max_per_second": 20}, 1.5)
    # a burst of 2, then 20 a second: never more than 2 + 20 * 1.5
    assert 10 <= len(samples) <= 32, len(samples)
    for sample in samples:
        assert sample["component"] == "sink"
        assert sample["source_component"] == "ticks" and sample["stream"] == "default"
        assert sample["timestamp"] > 1.7e9
    values = [json.loads(s["values_json"]) for s in samples]
    assert all(len(v) == 1 and isinstance(v[0], int) for v in values)
    numbers = [v[0] for v in values]
    assert numbers == sorted(set(numbers))  # one spout task, one inbox: in order, no repeats
    # the spout emits far more than 20 a second: the rate limit skipped (and counted) some
    assert sum(int(s.get("skipped", "0")) for s in samples) > 0


def test_a_spouts_emits_name_the_task_each_went_to(ticker_mesh: Mesh):
    body = {"component": "ticks", "emitted": True, "max_per_second": 50}
    samples = watch(ticker_mesh, 0, body, 2.0)
    assert len(samples) >= 20
    # one sink task on each worker: evenly spaced samples show deliveries to both
    tasks = {s.get("task", 0) for s in samples}
    assert len(tasks) == 2
    assert all(s["component"] == "ticks" and s["source_component"] == "ticks" for s in samples)


def test_two_watchers_at_once(ticker_mesh: Mesh):
    argv = [GRPCURL, "-plaintext", "-max-time", "1.5", "-d", json.dumps({"component": "sink"}),
            ticker_mesh.address(0), WATCH]  # fmt: skip
    procs = [
        subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in (1, 2)
    ]
    outputs = [p.communicate(timeout=30) for p in procs]
    for stdout, stderr in outputs:
        assert "DeadlineExceeded" in stderr, stderr
        assert 5 <= len(messages(stdout)) <= 26  # the default: 10 a second each


@pytest.mark.parametrize(
    ("body", "code", "message"),
    [
        ({"component": "nope"}, "NotFound", "no component 'nope' (known: sink, ticks)"),
        ({"component": "ticks"}, "FailedPrecondition", "is a spout"),
        (
            {"component": "ticks", "emitted": True, "stream": "nope"},
            "NotFound",
            "component 'ticks' declares no stream 'nope' (it has: default)",
        ),
        ({"component": "sink", "stream": "other"}, "NotFound", "subscribes to no stream 'other'"),
        ({"component": "sink", "sample_rate": 1.5}, "InvalidArgument", "sample_rate must be in (0, 1]"),
        (
            {"component": "sink", "max_per_second": 5000},
            "InvalidArgument",
            "max_per_second must be in (0, 1000]",
        ),
        ({"component": "sink", "max_per_second": -1}, "InvalidArgument", "max_per_second must be in"),
    ],
)
def test_bad_requests(ticker_mesh: Mesh, body: dict[str, Any], code: str, message: str):
    out = grpcurl("-d", json.dumps(body), ticker_mesh.address(0), WATCH)
    assert out.returncode != 0
    assert f"Code: {code}" in out.stderr and message in out.stderr, out.stderr
