"""Assignment is a deterministic pure function of (topology, number of workers)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ListSpout, RecordingBolt
from tuplemesh.topology import Assignment, TopologyBuilder


def topo():
    b = TopologyBuilder("t")
    b.set_spout("s", ListSpout([], ["x"]), parallelism=2, tasks=3)
    b.set_bolt("b", RecordingBolt(), parallelism=3, tasks=7).shuffle_grouping("s")
    b.set_bolt("a", RecordingBolt(), parallelism=1).shuffle_grouping("s")
    return b.build()


def test_task_ids_executors_and_workers():
    a = Assignment.compute(topo(), 2)
    assert a.component_tasks == {"a": (1,), "b": (2, 3, 4, 5, 6, 7, 8), "s": (9, 10, 11)}
    assert [(e.component, e.tasks, e.worker) for e in a.executors] == [
        ("a", (1,), 0),
        ("b", (2, 3, 4), 1),
        ("b", (5, 6), 0),
        ("b", (7, 8), 1),
        ("s", (9, 10), 0),
        ("s", (11,), 1),
    ]
    assert {t for e in a.executors_of(0) for t in e.tasks} | {
        t for e in a.executors_of(1) for t in e.tasks
    } == set(range(1, 12))


def test_more_workers_than_executors_leaves_some_idle():
    a = Assignment.compute(topo(), 10)
    assert sorted({e.worker for e in a.executors}) == [0, 1, 2, 3, 4, 5]
    assert a.executors_of(9) == ()


def test_invalid_worker_count():
    with pytest.raises(ValueError, match="number of workers"):
        Assignment.compute(topo(), 0)


def test_same_assignment_in_another_process():
    """Every worker computes the assignment itself: a fresh interpreter must agree exactly."""
    code = "import json; from tests.test_assignment_helper import assignment_json; print(assignment_json())"
    here = Assignment.compute(topo(), 3).to_dict()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code.replace("tests.test_assignment_helper", "tests.topology.test_assignment"),
        ],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345", "PATH": ""},
    )
    import json

    assert json.loads(out.stdout) == here


def assignment_json() -> str:
    import json

    return json.dumps(Assignment.compute(topo(), 3).to_dict())
