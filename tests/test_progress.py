"""The live table of ``tuplemesh run``: component totals and queue fill from the workers' snapshots."""

from __future__ import annotations

from rich.console import Console

from tuplemesh.core.stats import (
    ExecutorSnapshot,
    QueueSnapshot,
    ReceiveSnapshot,
    TransferTotals,
    WorkerSnapshot,
)
from tuplemesh.progress import LiveProgress
from tuplemesh.transport.stats import BindingStats


def snapshot(worker: int, executed: int) -> WorkerSnapshot:
    return WorkerSnapshot(
        topology="t",
        worker=worker,
        workers=2,
        uptime_seconds=1.0,
        executors=(
            ExecutorSnapshot(
                f"s{worker}", "s", (worker,), True, False, emitted=3 * executed, spout_errors=worker
            ),
            ExecutorSnapshot(f"b{worker}", "b", (2 + worker,), False, False, executed=executed),
        ),
        queues=(QueueSnapshot(f"inbox:b{worker}", 3, 4, 9, 4), QueueSnapshot("transfer", 1, 8, 5, 8)),
        peers=(),
        binding=BindingStats(),
        receive=ReceiveSnapshot(),
        transfer=TransferTotals(),
    )


def rendered(progress: LiveProgress) -> str:
    console = Console(record=True, width=120)
    console.print(progress._live.renderable)
    return console.export_text()


def test_totals_sum_every_worker_and_fill_shows_each():
    progress = LiveProgress("t", 2, "grpc")
    progress.update([snapshot(0, 10), snapshot(1, 32)], ["SERVING", "NOT_SERVING"])
    text = rendered(progress)
    assert [line.split() for line in text.splitlines() if line.strip().startswith("│ s")] == [
        ["│", "s", "│", "126", "│", "0", "│", "│", "1", "│"]  # spout errors count as errors
    ]
    rows = [line.split("│")[1:-1] for line in text.splitlines() if line.strip().startswith("│ b")]
    assert [c.strip() for c in rows[0]][:3] == ["b", "0", "42"]
    assert "w0 SERVING: fullest inbox 75%, transfer 12%" in text
    assert "w1 NOT_SERVING: fullest inbox 75%, transfer 12%" in text
