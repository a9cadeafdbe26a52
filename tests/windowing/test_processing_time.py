"""Processing-time duration windows on a real clock and ticks, with acking on (generous bounds:
the machine may be loaded)."""

from __future__ import annotations

from tests.helpers import eventually
from tests.windowing.topologies import ClockWindows, StampedSpout
from tuplemesh.topology import TopologyBuilder
from tuplemesh.windowing import Duration
from tuplemesh.worker.local_cluster import LocalCluster

COUNT = 600
RATE = 500.0  # about 1.2 s of tuples


def run(bolt: ClockWindows) -> tuple[dict[str, list], LocalCluster]:
    builder = TopologyBuilder("clock-windows")
    builder.set_spout("stamped", StampedSpout(COUNT, RATE))
    builder.set_bolt("windows", bolt).shuffle_grouping("stamped")
    cluster = LocalCluster(builder.build(), 1, {"topology.acker.executors": 1})
    cluster.start()
    spout = next(iter(cluster.workers[0].spout_executors[0].tasks.values()))
    assert isinstance(spout, StampedSpout)
    # every tuple acked: the ticks evaluate the last window although no tuple follows it
    eventually(lambda: spout.acked == COUNT, 20, 0.01, lambda: f"{spout.acked} of {COUNT} acked")
    cluster.stop()
    return cluster.reports(), cluster


def test_tumbling_windows_follow_the_wall_clock_and_every_tuple_is_acked_after_its_window():
    reports, _ = run(ClockWindows(Duration(0.2)))
    windows = reports["windows"][0]["windows"]
    assert sorted(n for _, _, tuples in windows for n, _ in tuples) == list(range(COUNT))
    assert reports["stamped"][0]["failed"] == 0
    starts = [start for start, _, _ in windows]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    for start, end, tuples in windows:
        assert abs(end - start - 0.2) < 1e-6
        assert abs(round(start / 0.2) * 0.2 - start) < 1e-6  # aligned on multiples of the length
        # sent before its window closed, and not long before it opened (queueing on a loaded box)
        assert all(start - 1.0 <= sent_at < end for _, sent_at in tuples)
    span = windows[-1][1] - windows[0][0]
    assert 1.0 <= span <= 5.0 and len(windows) <= round(span / 0.2)


def test_sliding_windows_hold_each_tuple_in_every_window_of_its_slide():
    reports, _ = run(ClockWindows(Duration(0.4), Duration(0.2)))
    windows = reports["windows"][0]["windows"]
    held: dict[int, int] = {}
    for _, _, tuples in windows:
        for n, _ in tuples:
            held[n] = held.get(n, 0) + 1
    assert sorted(held) == list(range(COUNT))
    assert set(held.values()) == {2}  # a 0.4 s window sliding by 0.2 s: two windows each
    assert reports["stamped"][0]["failed"] == 0
