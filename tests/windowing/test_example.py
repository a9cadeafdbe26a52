"""The windowed averages example checks itself: per-sensor sliding event-time averages over an
out-of-order log, late readings on the late stream, with and without checkpointed windows."""

from __future__ import annotations

import pytest

from examples.windowed_averages import build, expected
from tuplemesh.worker.local_cluster import LocalCluster


def test_the_expected_answer_has_late_readings_and_every_window():
    averages, late = expected(600)
    assert len(late) == 59  # held back past the lag: every 53rd reading of the first 520 steps
    assert len(averages) == 6 * 61  # every sensor in every window from [-1, 1) to [59, 61)


@pytest.mark.parametrize("checkpointed", [False, True])
@pytest.mark.parametrize("acking", [0, 1])
def test_the_example_matches_its_precomputed_averages(checkpointed: bool, acking: int):
    conf = {"messaging.transport": "local", "topology.acker.executors": acking}
    summary = LocalCluster(build(300, checkpointed=checkpointed), 3, conf).run(60)
    assert summary.completed and summary.matched, summary.message
