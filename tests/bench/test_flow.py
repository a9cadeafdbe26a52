"""``python -m bench flow``: each figure in a tiny configuration, real worker processes; the
records' shape (cases, baselines, the figures beside them), never a rate or a duration."""

from __future__ import annotations

from pathlib import Path

from bench import flow
from bench.runner import PARTS
from tuplemesh.cpus import own_shares


def test_flow_is_a_part_of_the_bench():
    assert PARTS["flow"] is flow.run


def test_latency_at_full_load_beside_half_rate_and_placed_beside_sharing_cores():
    record, shared = (r.as_dict() for r in flow.latency(1.0, 1))
    assert record["part"] == "flow" and record["unit"] == "tuples"
    [baseline] = record["baselines"]
    assert baseline["name"] == "the same at half the max rate"
    extra = record["extra"]
    # as tuplemesh run places 2 workers here: pinned where each can have a CPU of its own
    assert extra["workers pinned (as tuplemesh run places them here)"] is (own_shares(2) is not None)
    for q in ("p50", "p99", "p999"):
        for load in ("full load", "half rate"):
            assert isinstance(extra[f"{q} cross-worker emit-to-execute ms, {load}"], float)
        assert isinstance(extra[f"{q} full load / half rate"], float)
    full, half = (int(n) for n in extra["latency samples, full load / half rate"].split(" / "))
    assert full > 0 and half > 0  # both runs sampled tuples that crossed workers
    for q in ("p50", "p99"):
        assert isinstance(extra[f"{q} cross-worker ms, half rate, messaging.coalesce.ms 0"], float)
        assert isinstance(extra[f"{q} half rate: coalescing on / off"], float)
    # the baseline's workers really ran without coalescing: not one batch joined another
    _, uncoalesced = extra["batches coalesced, half rate / messaging.coalesce.ms 0"].split(" / ")
    assert uncoalesced == "0"
    # the same with the workers sharing every core, beside the placed run
    assert shared["part"] == "flow" and shared["unit"] == "tuples"
    assert [b["name"] for b in shared["baselines"]] == ["the same, placed as tuplemesh run does"]
    assert shared["baselines"][0]["tuples_per_second"] == record["tuples_per_second"]
    for q in ("p50", "p99", "p999"):
        for load in ("full load", "half rate"):
            assert isinstance(
                shared["extra"][f"{q} cross-worker emit-to-execute ms, {load}, sharing cores"], float
            )
        assert isinstance(shared["extra"][f"{q} half rate: sharing cores / placed"], float)
    for load in ("full load", "half rate"):
        assert isinstance(shared["extra"][f"cores per worker, {load}: sharing cores / placed"], float)


def test_checkpoints_at_full_load_beside_paced(tmp_path: Path):
    window = flow.checkpoint_window(tmp_path, 0.0, 3.0, 1_000_000)
    assert set(window) == {"first", "serving", "committed", "abandoned", "started", "longest"}
    # every checkpoint counted was started first (the ids the coordinator drew from the store)
    assert window["started"] >= window["committed"] + window["abandoned"]
    record = flow.checkpoints(tmp_path, 3.0, 1_000_000).as_dict()
    assert record["unit"] == "checkpoints"
    assert [b["name"] for b in record["baselines"]] == ["the same paced at 1000 sentences/s per spout"]
    assert set(record["extra"]) == {
        "full load",
        "paced",
        "first commit / interval, full load",
        "longest trigger to commit / interval, full load",
    }
    assert record["extra"]["paced"].startswith("first committed ")


def test_rescale_at_full_load_is_exact_and_beside_paced(tmp_path: Path):
    record = flow.rescale(tmp_path, 300.0).as_dict()
    assert record["unit"] == "pauses"
    extra = record["extra"]
    assert not [key for key in extra if key.startswith("failed")], extra
    assert extra["counts exact after the full-load rescale"] is True
    assert isinstance(extra["pause at full load, s"], float)
    assert isinstance(extra["pause paced at 1000 sentences/s per spout, s"], float)
    assert [b["name"] for b in record["baselines"]] == ["the same paced"]
    assert extra["sentences emitted before the rescale, full load"] > 0
    assert extra["sentences counted, drained after the full-load rescale"] > 0


def test_worker_rss_under_floods_beside_idle(tmp_path: Path):
    peer, spout = (r.as_dict() for r in flow.memory(tmp_path, 1.0, 10))
    assert peer["unit"] == spout["unit"] == "bytes"
    idle, peak = (float(v) for v in peer["extra"]["receiving worker RSS MiB, idle / peak"].split(" / "))
    assert 0 < idle <= peak
    assert peer["extra"]["flooded MiB"] % 15 == 0  # whole 15 MiB batches
    assert spout["case"].startswith("a spout emits 10 tuples of 1 MiB")
    for worker in ("sending", "receiving"):
        idle, peak = (float(v) for v in spout["extra"][f"{worker} worker RSS MiB, idle / peak"].split(" / "))
        assert 0 < idle <= peak
        assert spout["extra"][f"{worker} peak / idle"] >= 1.0
