"""`make pipeline` end to end: the example checks itself against Spark's own count."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_spark_pipeline_example_verifies_its_result():
    out = subprocess.run(
        [sys.executable, "examples/spark_pipeline.py"], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    assert "PIPELINE OK: 26 lines, 331 words, 180 distinct" in out.stdout
    assert (ROOT / "build" / "pipeline" / "counts.parquet").is_dir()
