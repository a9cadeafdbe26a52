"""``python -m bench``: the benchmark runner as ``make bench`` calls it from a checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import child_pythonpath
from tuplemesh import compiled_modules

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        env={**os.environ, "PYTHONPATH": child_pythonpath()},
    )  # fmt: skip


def test_bench_ring_json_records_ratios(tmp_path):
    out = bench("ring", "--quick", "--json", "--output", str(tmp_path / "r.json"))
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    cases = [r["case"] for r in records]
    assert cases[0] == "1P-1C one item per publish" and len(cases) == 6
    first = records[0]
    names = [b["name"] for b in first["baselines"]]
    assert names == ["queue.Queue(maxsize=1024)", "queue.SimpleQueue", "deque+Condition(1024)"]
    for b in first["baselines"]:
        assert b["ratio"] == pytest.approx(first["items_per_second"] / b["items_per_second"], rel=1e-2)
    written = json.loads((tmp_path / "r.json").read_text())
    assert written["records"] == records
    # the machine the figures depend on, printed above the plots of the docs
    assert written["cores"] == os.cpu_count() and written["cpu"]
    assert written["compiled"] is bool(compiled_modules())  # the child runs with this process's env


def test_bench_features_reports_each_feature_against_no_features_with_the_hot_keys_target(tmp_path):
    out = bench("features", "--quick", "--json", "--output", str(tmp_path / "f.json"))
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    variants = [r["case"].split("one thread: ", 1)[1] for r in records]
    assert variants == [
        "features, hot keys off",
        *[f"hot keys, 1 batch in {every}" for every in (1, 16, 64, 128)],
        "one watch (1%, 10/s)",
        "tracing on",
    ]
    for record in records:
        (baseline,) = record["baselines"]
        assert baseline["name"] == "the same executor with no features, this run"
        assert baseline["ratio"] == pytest.approx(
            record["tuples_per_second"] / baseline["tuples_per_second"], rel=1e-2
        )
    targets = {v: r["target"] for v, r in zip(variants, records, strict=True) if r["target"]}
    assert targets == {
        "features, hot keys off": "nothing wraps the loop (ratio >= 0.95)",
        "hot keys, 1 batch in 128": "at the default sampling: costs <= 5% (ratio >= 0.95)",
    }
