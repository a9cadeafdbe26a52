"""Exceptions of user code: recorded per executor, carried through Admin, judged by summarize."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tuplemesh.core.stats import (
    ErrorSnapshot,
    ExecutorSnapshot,
    ReceiveSnapshot,
    TransferTotals,
    WorkerSnapshot,
)
from tuplemesh.core.summary import failing_error, summarize
from tuplemesh.server.status_proto import snapshot_from_proto, snapshot_to_proto
from tuplemesh.transport.stats import BindingStats


def error(method: str, at: float, component: str = "sink", worker: int = 0) -> ErrorSnapshot:
    return ErrorSnapshot(component, 3, method, "ValueError", "bad row 7", worker, at)


def worker(index: int, *executors: ExecutorSnapshot) -> WorkerSnapshot:
    return WorkerSnapshot(
        topology="t",
        worker=index,
        workers=2,
        uptime_seconds=1.0,
        executors=executors,
        queues=(),
        peers=(),
        binding=BindingStats(),
        receive=ReceiveSnapshot(),
        transfer=TransferTotals(),
    )


def bolt(errors: int, first: ErrorSnapshot | None) -> ExecutorSnapshot:
    return ExecutorSnapshot("sink-1", "sink", (3,), False, False, errors=errors, first_error=first)


def spout(errors: int, first: ErrorSnapshot | None) -> ExecutorSnapshot:
    return ExecutorSnapshot("src-1", "src", (1,), True, False, spout_errors=errors, first_error=first)


def test_the_first_error_survives_the_trip_through_admin():
    snapshot = worker(1, bolt(4, error("execute", 1700000000.25, worker=1)), spout(0, None))
    status = snapshot_to_proto(snapshot)
    assert status.executors[0].first_error.method == "execute"
    assert not status.executors[1].HasField("first_error")
    assert snapshot_from_proto(status) == snapshot


@pytest.mark.parametrize(("tolerated", "fails"), [(None, False), (0, True), (4, True), (5, False)])
def test_errors_fail_a_run_beyond_what_is_tolerated(tolerated, fails):
    # 2 bolt and 3 spout exceptions on two workers: 5 in all; the spout's came first
    snapshots = [
        worker(0, bolt(2, error("execute", 20.0))),
        worker(1, spout(3, error("next_tuple", 10.0, "src", 1))),
    ]
    summary = summarize(
        snapshots,
        topology="t",
        workers=2,
        transport="grpc",
        seconds=1.0,
        completed=True,
        matched=True,
        message="all counted",
        tolerated=tolerated,
    )
    assert summary.errors == 5
    assert summary.first_error == error("next_tuple", 10.0, "src", 1)
    assert (summary.failed_by is not None) is fails
    if fails:
        assert summary.matched is False
        assert summary.message == (
            "user code raised 5 exception(s), the first: component 'src' task 3 (worker 1) raised "
            "in next_tuple: ValueError: bad row 7"
        )
    else:
        assert (summary.matched, summary.message) == (True, "all counted")


@pytest.mark.parametrize("method", ["prepare", "open"])
def test_a_failed_prepare_or_open_fails_the_run_whatever_is_tolerated(method):
    snapshots = [worker(0, bolt(1, error(method, 5.0)))]
    assert failing_error(snapshots, 100) == error(method, 5.0)
    assert failing_error([worker(0, bolt(1, error("execute", 5.0)))], 100) is None


def test_the_earliest_first_error_is_named_even_when_another_worker_reports_first():
    late, early = error("execute", 30.0), error("execute_batch", 12.5, worker=1)
    snapshots = [worker(0, bolt(1, late)), worker(1, replace(bolt(1, early), name="sink-2"))]
    assert failing_error(snapshots, 0) == early
