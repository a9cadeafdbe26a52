"""Watermarks across three worker processes: spouts -> partial windows (3 tasks) -> total window.

The spout tasks run in different processes and start at different times, so their event times
drift apart; each partial task's watermark is the minimum over the three spout tasks, so no
event is late and every window is complete. The total task moves on the partial tasks'
watermarks (broadcast on the watermark stream), never ahead of the slowest of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fault.harness import reports, wait_settled, write_config
from tests.helpers import eventually
from tests.windowing.topologies import END_OF_STREAM
from tests.worker.conftest import start_mesh

EVENTS = 2000  # per spout task: 6000 events, 60 one-second windows of 100
RATE = 800.0  # per spout task: the run takes about 2.5 s


def test_watermarks_progress_as_the_minimum_over_inputs_across_three_workers(tmp_path: Path):
    conf = write_config(tmp_path / "tuplemesh.yaml", **{"chain.events": EVENTS, "chain.rate": RATE})
    mesh = start_mesh("tests.windowing.topologies:chain", 3, conf)
    try:
        seen: list[float] = []

        def progressed() -> bool:
            merged: dict[str, list[Any]] = reports(mesh)
            total = merged["total"][0]["watermark"]  # read before the partial ones: they only grow
            partial = [r["watermark"] for r in merged["partial"]]
            if total is not None:
                assert None not in partial and total <= min(partial), (total, partial)
                seen.append(total)
            return total is not None and total >= 10.0

        eventually(progressed, 30, 0.05, "the total task's watermark past 10 s of event time")
        assert seen[-1] < 55.0  # observed mid-run, not only at the end marker
        assert seen == sorted(seen)
        wait_settled(mesh, timeout=60.0)
        merged = reports(mesh)
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]
    windows = 3 * EVENTS // 100
    total = merged["total"][0]
    assert total["totals"] == {f"{s:g}": 100 for s in range(windows)}
    assert total["partials"] == {f"{s:g}": 3 for s in range(windows)}  # one partial count per task
    assert total["watermark"] == END_OF_STREAM - 0.05  # the partial tasks' end watermark, no lag
    assert [r["watermark"] for r in merged["partial"]] == [END_OF_STREAM - 0.05] * 3
    assert sum(r["windows"] for r in merged["partial"]) == 3 * windows
