"""A worker process SIGKILLed mid-run and restarted, with acking on and off.

Three workers run ``tests.fault.topologies:relay``. Worker 2 holds a relay task (and, with acking
on, an acker task) but neither the spout nor the counting sink, so the sink's counts survive and
show exactly what the kill cost.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.fault.harness import reports, sink_counts, statuses, wait_settled, write_config
from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh

IDS = 9000
RATE = 3000.0  # ids per second offered; the relays (1.5 ms each) take 2000: queues hold a backlog
KILLED = 2


def spout_emitted(mesh: Mesh) -> int:
    return sum(e.emitted for status in statuses(mesh) for e in status.executors if e.spout)


def relay_backlog(mesh: Mesh, worker: int) -> int:
    """Batches waiting in the inbox of ``worker``'s relay executor."""
    status = statuses(mesh)[worker]
    return sum(q.depth for q in status.queues if q.name.startswith("inbox:relay"))


def run_with_kill(tmp_path: Path, ackers: int) -> tuple[dict, dict]:
    config = write_config(
        tmp_path / "tuplemesh.yaml",
        **{
            "fault.ids": IDS,
            "fault.rate": RATE,
            "fault.relay.delay.ms": 1.5,
            "topology.max.spout.pending": 500,
            # ids dealt strictly round-robin, whatever the relays' backlog: what the killed worker
            # held is one residue class mod 3 (a load-aware shuffle would steer ids around the
            # relay with the longest queue, and the losses could not be told apart)
            "topology.disable.loadaware.messaging": True,
            "topology.acker.executors": ackers,
            "topology.message.timeout.secs": 3.0,
            "storm.messaging.netty.min_wait_ms": 20,
            "storm.messaging.netty.max_wait_ms": 200,
        },
    )
    mesh = start_mesh("tests.fault.topologies:relay", 3, config)
    try:
        # a second's worth of ids offered: the relays hold a backlog when the kill comes
        eventually(lambda: spout_emitted(mesh) >= RATE, timeout=30)
        # and the worker to be killed holds some of it: batches it took from the network and has
        # not executed yet, which die with it (so the kill costs something to recover)
        eventually(lambda: relay_backlog(mesh, KILLED) >= 2, timeout=30)
        mesh.kill(KILLED)
        time.sleep(1.0)  # deliberate: the worker stays dead for a second while its peers keep sending
        mesh.restart(KILLED)
        wait_settled(mesh, timeout=90.0)
        merged = reports(mesh)
    finally:
        codes = mesh.stop()
    assert codes == [0, 0, 0]
    return merged["ids"][0], sink_counts(merged)


def test_with_acking_every_id_is_acked_and_the_excess_is_bounded_by_replays(tmp_path: Path):
    spout, seen = run_with_kill(tmp_path, ackers=3)
    assert spout["emitted"] == IDS
    assert spout["acked"] == IDS and spout["acked_twice"] == 0  # each id's tree completed once
    assert sorted(seen) == list(range(IDS))  # nothing lost: every id reached the sink
    excess = sum(n - 1 for n in seen.values())
    # A replayed id is counted again only if its first attempt had reached the sink.
    assert excess <= spout["replayed"]
    assert spout["replayed"] > 0  # the trees held by the killed worker's acker and relay timed out
    print(f"acking on: {spout['replayed']} replays, {excess} ids counted twice")


def test_without_acking_loss_is_limited_to_what_the_killed_worker_held(tmp_path: Path):
    spout, seen = run_with_kill(tmp_path, ackers=0)
    assert spout["emitted"] == IDS and spout["replayed"] == 0
    lost = [i for i in range(IDS) if seen[i] == 0]
    twice = [i for i, n in seen.items() if n > 1]
    # The even shuffle deals ids round-robin to the three relay tasks, so every id the killed
    # worker held is in one residue class mod 3: all losses (and resends it had processed but
    # not yet acknowledged) must be in that class; the other two thirds are exact.
    touched = {i % 3 for i in lost + twice}
    assert len(touched) == 1, f"losses outside the killed worker's share: {lost[:10]} {twice[:10]}"
    assert 0 < len(lost) + len(twice) < IDS // 3
    assert sum(seen.values()) == IDS - len(lost) + sum(seen[i] - 1 for i in twice)
    print(f"acking off: {len(lost)} ids lost, {len(twice)} counted twice with the killed worker")
