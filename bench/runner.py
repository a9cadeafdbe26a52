"""Runs the benchmark parts, prints their tables, writes ``bench/results.json``."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from bench import (
    costs,
    e2e,
    e2e_local,
    feature_cost,
    flow,
    hotpath,
    mesh_size,
    modes,
    rescale,
    ring,
    spark,
    state,
    transport,
    ui,
    windows,
    wordcount,
)
from bench.records import Record, format_table
from tuplemesh import compiled_modules


def _e2e(quick: bool = False) -> list[Record]:
    return e2e_local.run(quick=quick) + e2e.run(quick=quick)


PARTS = {
    "ring": ring.run,
    "hotpath": hotpath.run,
    "transport": transport.run,
    "e2e": _e2e,
    "wordcount": wordcount.run,
    "costs": costs.run,
    "features": feature_cost.run,
    "spark": spark.run,
    "state": state.run,
    "windows": windows.run,
    "rescale": rescale.run,
    "flow": flow.run,
    "mesh_size": mesh_size.run,
    "ui": ui.run,
}

#: Parts that run only when named: ``mesh_size`` starts dozens of processes, which takes a small
#: machine over (64 workers on 2 cores never formed a mesh: every worker runs threads per peer).
#: ``ui`` takes over a minute (two meshes, a browser, alternating windows).
ON_REQUEST = frozenset({"mesh_size", "ui"})


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it (what the figures depend on most)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_benchmarks(part: str, as_json: bool, quick: bool, output: str, pure_vs_compiled: int = 0) -> int:
    """``pure_vs_compiled``: that many rounds of each part compiled and pure Python, compared."""
    names = [p for p in PARTS if p not in ON_REQUEST] if part == "all" else [part]
    records: list[Record] = []
    for name in names:
        if pure_vs_compiled:
            part_records = modes.compare(name, quick, pure_vs_compiled)
        else:
            part_records = PARTS[name](quick=quick)
        records.extend(part_records)
        if not as_json:
            print(format_table(part_records), flush=True)
    doc: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "compiled": bool(compiled_modules()),
        "quick": quick,
        "records": [r.as_dict() for r in records],
    }
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
    if as_json:
        print(json.dumps(doc["records"]))
    else:
        print(f"records written to {path}")
    return 0
