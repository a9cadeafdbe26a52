"""Runs one benchmark part compiled (mypyc) and pure Python in the same run, and compares them.

Each round runs the part once per mode, alternating, in a fresh process (TUPLEMESH_PURE_PYTHON
picks the mode at import time); the record per case is the median of its rounds, with the pure
figure as its baseline, so the ratio is the compiled speed-up on this machine, now.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.records import Record
from tuplemesh import compiled_modules
from tuplemesh._compiled import PURE_PYTHON_ENV

PURE = "the same, pure Python (this run)"


def _run_part(part: str, quick: bool, pure: bool) -> dict[tuple[str, str], float]:
    """(case, unit) -> rate of one run of ``part`` in a child process in the given mode."""
    env = {k: v for k, v in os.environ.items() if k != PURE_PYTHON_ENV}
    if pure:
        env[PURE_PYTHON_ENV] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        args = [sys.executable, "-m", "bench", part, "--json", "--output", str(Path(tmp) / "r.json")]
        out = subprocess.run(
            [*args, *(["--quick"] if quick else [])], env=env, capture_output=True, text=True
        )
    if out.returncode != 0:
        raise RuntimeError(f"bench {part} ({'pure' if pure else 'compiled'}) failed: {out.stderr.strip()}")
    records = json.loads(out.stdout.splitlines()[-1])
    return {(r["case"], r["unit"]): r[f"{r['unit']}_per_second"] for r in records}


def compare(part: str, quick: bool, rounds: int) -> list[Record]:
    """Records of ``part`` compiled, each with its pure-Python rate as the baseline."""
    if not compiled_modules():
        raise RuntimeError(f"nothing is compiled here (or {PURE_PYTHON_ENV} is set): run make first")
    compiled: dict[tuple[str, str], list[float]] = {}
    pure: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for rates, is_pure in ((compiled, False), (pure, True)):
            for case, rate in _run_part(part, quick, is_pure).items():
                rates.setdefault(case, []).append(rate)
    return [
        Record(
            f"{part} compiled",
            case,
            unit,
            statistics.median(rates),
            {PURE: statistics.median(pure[case, unit])},
        )
        for (case, unit), rates in compiled.items()
    ]
