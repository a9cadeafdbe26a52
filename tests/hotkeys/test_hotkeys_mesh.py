"""Hot keys in a real 2-worker mesh: Admin/HotKeys through the real grpcurl binary names the
skewed word first with its exact count and share, and /metrics has the skew gauge, labelled by
worker and component only."""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import eventually
from tests.hotkeys.topologies import COLD, COLD_TUPLES, HOT_TUPLES
from tests.worker.conftest import Mesh, start_mesh
from tests.worker.test_grpcurl import grpcurl

TOTAL = HOT_TUPLES + len(COLD) * COLD_TUPLES
ON = {
    "TUPLEMESH_ADMIN_HOTKEYS_ENABLED": "true",
    "TUPLEMESH_TOPOLOGY_HOTKEYS_ENABLED": "true",
    "TUPLEMESH_TOPOLOGY_HOTKEYS_SAMPLE_EVERY": "1",  # every tuple: exact counts
    "TUPLEMESH_TOPOLOGY_HOTKEYS_TOP_K": "3",
}


@pytest.fixture(scope="module")
def mesh() -> Iterator[Mesh]:
    mesh = start_mesh("tests.hotkeys.topologies:skewed", 2, env=ON)
    yield mesh
    assert mesh.stop() == [0, 0]


def hot_keys(mesh: Mesh, index: int, body: str = "{}") -> Any:
    out = grpcurl("-d", body, mesh.address(index), "tuplemesh.v1.Admin/HotKeys")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def counted(mesh: Mesh) -> list[Any]:
    """Each worker's answer once every word is executed somewhere."""
    answers = [hot_keys(mesh, i) for i in (0, 1)]
    total = sum(int(s.get("tuples", 0)) for a in answers for s in a.get("streams", []))
    return answers if total == TOTAL else []


def test_hot_keys_names_the_hot_word_first_with_its_exact_count_and_share(mesh: Mesh):
    answers = eventually(lambda: counted(mesh), 60)
    # proto3 JSON leaves out zero values (worker 0's "worker"); 64-bit counts come as strings
    assert [a.get("worker", 0) for a in answers] == [0, 1]
    assert all(a["top_k"] == 3 and a["sample_every"] == 1 for a in answers)
    streams = [a["streams"][0] for a in answers]
    for stream in streams:
        assert (stream["component"], stream["source_component"], stream["stream"]) == (
            "count",
            "words",
            "default",
        )
        assert stream["tasks"] == 2  # count has 4 tasks, 2 on each worker
        assert stream.get("error_bound", "0") == "0"
    # a fields grouping sends "hot" to one task: one worker has it, first, with all 600
    hot = next(s for s in streams if json.loads(s["keys"][0]["key_json"]) == "hot")
    top = hot["keys"][0]
    assert int(top["tuples"]) == HOT_TUPLES
    assert top["tuple_share"] == HOT_TUPLES / int(hot["tuples"])
    assert 0 < top["execute_share"] <= 1
    assert hot["skew"] == top["tuple_share"] * 2
    # every cold word counted exactly where it went (top 3 only: the rest are left out)
    listed = {json.loads(k["key_json"]): int(k["tuples"]) for s in streams for k in s["keys"]}
    assert {w: n for w, n in listed.items() if w != "hot"} == {w: COLD_TUPLES for w in listed if w != "hot"}
    assert all(len(s["keys"]) <= 3 for s in streams)


def test_hot_keys_of_one_component_and_of_an_unknown_one(mesh: Mesh):
    eventually(lambda: counted(mesh), 60)
    assert [s["component"] for s in hot_keys(mesh, 0, '{"component": "count"}')["streams"]] == ["count"]
    out = grpcurl("-d", '{"component": "words"}', mesh.address(0), "tuplemesh.v1.Admin/HotKeys")
    assert out.returncode != 0
    assert "Code: NotFound" in out.stderr
    assert "component 'words' has no fields-grouped input on worker 0" in out.stderr


def test_the_skew_gauge_has_bounded_labels(mesh: Mesh):
    answers = eventually(lambda: counted(mesh), 60)
    for index, answer in enumerate(answers):
        text = urllib.request.urlopen(mesh.metrics_url(index), timeout=10).read().decode()
        samples = re.findall(r"^tuplemesh_key_skew\{(.*)\} (\S+)$", text, re.M)
        assert [labels for labels, _ in samples] == [f'component="count",worker="{index}"']
        assert float(samples[0][1]) == answer["streams"][0]["skew"]


def test_hot_keys_is_refused_while_admin_hotkeys_is_off(tmp_path: Any):
    mesh = start_mesh(
        "tests.hotkeys.topologies:skewed", 1, env={**ON, "TUPLEMESH_ADMIN_HOTKEYS_ENABLED": "false"}
    )
    try:
        out = grpcurl("-d", "{}", mesh.address(0), "tuplemesh.v1.Admin/HotKeys")
        assert out.returncode != 0
        assert "Code: PermissionDenied" in out.stderr
        assert "Admin/HotKeys is off: set admin.hotkeys.enabled: true" in out.stderr
    finally:
        assert mesh.stop() == [0]


def test_hot_keys_is_a_failed_precondition_while_key_counting_is_off():
    mesh = start_mesh(
        "tests.hotkeys.topologies:skewed", 1, env={"TUPLEMESH_ADMIN_HOTKEYS_ENABLED": "true"}
    )  # topology.hotkeys.enabled: false, the default
    try:
        out = grpcurl("-d", "{}", mesh.address(0), "tuplemesh.v1.Admin/HotKeys")
        assert out.returncode != 0
        assert "Code: FailedPrecondition" in out.stderr
        assert "hot keys are not counted: set topology.hotkeys.enabled: true" in out.stderr
        metrics = urllib.request.urlopen(mesh.metrics_url(0), timeout=10).read().decode()
        assert "tuplemesh_key_skew" not in metrics
    finally:
        assert mesh.stop() == [0]
