"""Sustained faults on real worker processes: a consumer 10x slower than its producer for 60 s, and
a peer that restarts every few seconds. Memory and threads must stay flat; nothing is dropped."""

from __future__ import annotations

import time
import urllib.request
from collections import Counter
from pathlib import Path

from tests.fault.harness import proc_status, reports, sink_counts, statuses, wait_settled, write_config
from tests.helpers import eventually
from tests.worker.conftest import start_mesh
from tuplemesh.v1 import admin_pb2

SINK, SPOUT = 0, 1  # tests.fault.topologies:pipe puts the sink on worker 0, the spout on worker 1
RATE = 3000.0  # ids per second the flapping test's spout offers


def _sample(text: str, metric: str, label: str) -> float:
    """The value of ``metric``'s sample whose labels include ``label``, from a /metrics scrape."""
    for line in text.splitlines():
        if line.startswith(metric + "{") and label in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {metric} sample with {label} in /metrics")


def test_consumer_10x_slower_for_60s_keeps_rss_bounded_and_drops_nothing(tmp_path: Path):
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "fault.ids": 10**9,  # runs until drained
            "fault.rate": 20_000.0,  # offered: 10x what the sink takes
            "fault.sink.delay.ms": 0.5,  # about 2000 tuples/s at most
            "topology.executor.receive.buffer.size": 64,
            "topology.transfer.buffer.size": 64,
            "topology.transfer.batch.size": 100,
            "messaging.window.batches": 8,  # small queues: the backlog drains in seconds at the end
        },
    )
    mesh = start_mesh("tests.fault.topologies:pipe", 2, config)
    try:
        samples: list[tuple[float, int, int]] = []
        started = time.monotonic()
        # deliberate: the overload lasts 60 s, memory sampled once a second meanwhile
        while time.monotonic() - started < 60.0:
            rss = [proc_status(p.pid)[0] for p in mesh.procs]
            samples.append((time.monotonic() - started, rss[SINK], rss[SPOUT]))
            time.sleep(1.0)
        # the spout was held on its congested sink task, and /metrics says for how long
        scraped = urllib.request.urlopen(mesh.metrics_url(SPOUT), timeout=10).read().decode()
        held = _sample(scraped, "tuplemesh_backpressure_hold_seconds_total", 'component="ids"')
        holds = _sample(scraped, "tuplemesh_backpressure_holds_total", 'component="ids"')
        mesh.admin(SPOUT).Drain(admin_pb2.DrainRequest(), timeout=10.0)
        wait_settled(mesh, timeout=60.0, drained=True)
        merged = reports(mesh)
        executed = {s.worker: s for s in statuses(mesh)}
    finally:
        codes = mesh.stop()
    assert codes == [0, 0]
    emitted = merged["ids"][0]["emitted"]
    assert holds >= 1 and held > 0.0, f"spout holds {holds}, {held} s"
    seen = sink_counts(merged)
    assert seen == Counter(range(emitted)), "an id was dropped or delivered twice"
    # the producer was held to the consumer's pace: were it not, the memory bounds below would not
    # hold (rates are the benchmark's business, not this test's)
    warm = [s for s in samples if s[0] >= 10.0]
    for column, who in ((1, "sink"), (2, "spout")):
        growth = max(s[column] for s in warm) - warm[0][column]
        assert growth < 30 * 1024 * 1024, f"{who} RSS grew {growth >> 20} MiB after warm-up"
        assert max(s[column] for s in samples) < 200 * 1024 * 1024
    assert executed[SINK].consumed == emitted
    peak = max(s[2] for s in samples) >> 20
    print(f"slow consumer: {emitted} ids in {samples[-1][0]:.0f}s, peak RSS {peak} MiB")


def test_flapping_peer_leaves_no_growth_in_memory_or_threads(tmp_path: Path):
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "fault.ids": 10**9,
            "fault.rate": RATE,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
        },
    )
    mesh = start_mesh("tests.fault.topologies:pipe", 2, config)
    spout_proc = mesh.procs[SPOUT]

    def sink_consumed() -> int:
        return int(statuses(mesh)[SINK].consumed)

    try:
        after_cycle: list[tuple[int, int]] = []
        for cycle in range(6):
            eventually(
                lambda: sink_consumed() >= RATE, timeout=30, message="a second's worth of ids at the sink"
            )
            if cycle % 2:
                mesh.kill(SINK)
            else:
                mesh.procs[SINK].terminate()  # graceful this time: drains, then exits
                assert mesh.procs[SINK].wait(30) == 0
            time.sleep(0.5)  # deliberate: the sink stays down a while; the spout's sends must wait
            mesh.restart(SINK)
            after_cycle.append(proc_status(spout_proc.pid))
        # still flowing after the last restart (the restarted sink counts from zero)
        eventually(
            lambda: sink_consumed() >= RATE, timeout=30, message="ids at the sink after the last restart"
        )
    finally:
        codes = mesh.stop()
    assert codes == [0, 0]
    rss = [r for r, _ in after_cycle]
    threads = [t for _, t in after_cycle]
    assert max(threads[1:]) <= threads[1] + 2, f"threads grew: {threads}"
    assert rss[-1] - rss[1] < 20 * 1024 * 1024, f"RSS grew: {[r >> 20 for r in rss]} MiB"
    print(f"flapping: threads {threads}, RSS {[r >> 20 for r in rss]} MiB")
