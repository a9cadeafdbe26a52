"""Tuple sampling for Admin.WatchTuples: exact sampling, rate limits, and executors' watch lists."""

from __future__ import annotations

import itertools
import json

from tests.helpers import ListSpout, RecordingBolt
from tuplemesh.config import Config
from tuplemesh.sampling import BROADCAST_TASK, ExecutorTaps, TupleWatch
from tuplemesh.topology import Fields, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster

FIELDS = Fields(["n"])


def tup(n: int, stream: str = "default") -> Tuple:
    return Tuple([n], 3, "source", stream, FIELDS)


def test_a_sample_rate_takes_evenly_spaced_tuples():
    watch = TupleWatch(None, 0.25, 1000.0)
    for n in range(20):
        watch.offer("sink", 5, tup(n), now=1.0, wall=100.0)
    samples = watch.take(0)
    assert [json.loads(s.values_json) for s in samples] == [[3], [7], [11], [15], [19]]
    assert (samples[0].component, samples[0].task, samples[0].source_task) == ("sink", 5, 3)
    assert samples[0].timestamp == 100.0
    assert watch.offered == 20 and watch.sent == 5


def test_the_token_bucket_caps_a_burst_and_counts_what_it_skipped():
    watch = TupleWatch(None, 1.0, 10.0)  # a bucket of one token, refilled 10 a second
    for n in range(5):
        watch.offer("sink", 1, tup(n), now=10.0, wall=0.0)
    assert not watch.ready(10.0)
    watch.offer("sink", None, tup(5), now=10.2, wall=0.0)  # the bucket refilled
    samples = watch.take(0)
    assert [json.loads(s.values_json)[0] for s in samples] == [0, 5]
    assert [s.skipped for s in samples] == [0, 4]
    assert samples[-1].task == BROADCAST_TASK


def test_the_stride_spreads_samples_evenly_over_a_fast_stream():
    watch = TupleWatch(None, 1.0, 4.0)
    for n in range(200):  # 100 tuples a second for two seconds
        watch.offer("sink", 1, tup(n), now=n * 0.01, wall=0.0)
    samples = watch.take(0)
    numbers = [json.loads(s.values_json)[0] for s in samples]
    # the first window's burst is capped (24 skipped), then every 26th tuple or so: 4 a second
    assert numbers == [0, 49, 74, 99, 124, 149, 174, 199]
    assert [s.skipped for s in samples] == [0, 24, 0, 0, 0, 0, 0, 0]
    assert watch.offered == 200 and watch.sent == 8


def test_a_full_queue_skips_instead_of_blocking():
    watch = TupleWatch(None, 1.0, 1000.0, capacity=2)
    for n in range(4):
        watch.offer("sink", 1, tup(n), now=1.0, wall=0.0)
    assert [json.loads(s.values_json)[0] for s in watch.take(0)] == [0, 1]
    watch.offer("sink", 1, tup(9), now=1.0, wall=0.0)
    (late,) = watch.take(0)
    assert late.skipped == 2


def test_only_the_watched_stream_is_sampled_and_values_render_as_json():
    watch = TupleWatch("errors", 1.0, 1000.0)
    watch.offer("sink", 1, tup(1), now=1.0, wall=0.0)
    watch.offer("sink", 1, Tuple([b"\x00", {"k": 1}], 3, "source", "errors", Fields(["a", "b"])), 1.0, 0.0)
    (sample,) = watch.take(0)
    assert sample.stream == "errors"
    assert json.loads(sample.values_json) == ["b'\\x00'", {"k": 1}]  # bytes shown as their repr
    assert watch.offered == 1


def test_executors_sample_what_they_execute_and_forget_watches():
    b = TopologyBuilder("watched")
    b.set_spout("source", ListSpout([[n] for n in range(40)], ["n"]))
    b.set_bolt("sink", RecordingBolt(), parallelism=2).shuffle_grouping("source")
    cluster = LocalCluster(b.build(), 1, Config({"messaging.transport": "local"}))
    taps = cluster.workers[0].features["sampling"].taps
    sinks = [e for e in cluster.workers[0].bolt_executors if e.spec.component == "sink"]
    assert all(taps[e.name].watches is None for e in sinks)
    # nobody watches: the executors' per-batch check finds no observer
    assert all(e.input_observer is None for e in sinks)
    every, half = TupleWatch(None, 1.0, 1000.0), TupleWatch(None, 0.5, 1000.0)
    for executor in sinks:
        taps[executor.name].add_watch(every)
        taps[executor.name].add_watch(half)
    cluster.start()
    try:
        assert cluster.run_until_done(30.0)
    finally:
        assert cluster.stop()
    assert sorted(json.loads(s.values_json)[0] for s in every.take(0)) == list(range(40))
    assert every.offered == 40 and half.offered == 40
    assert half.sent == 20  # every second tuple offered, whichever executor offered it
    for executor in sinks:
        taps[executor.name].remove_watch(every)
        assert taps[executor.name].watches == (half,)
        taps[executor.name].remove_watch(half)
        assert taps[executor.name].watches is None and executor.input_observer is None


def test_picks_take_the_positions_offering_one_by_one_would_take():
    # exactly for rates a float holds exactly; for others, a pick may land one tuple away (the
    # one-by-one credit is a sum of 100 rounded additions, a pick's the exact product)
    for rate in (1.0, 0.5, 0.3, 0.25, 0.07, 0.0625):
        one_by_one, at_once = TupleWatch(None, rate, 1e6), TupleWatch(None, rate, 1e6)
        for n in range(100):
            one_by_one.offer("sink", 1, tup(n), now=1.0, wall=0.0)
        taken: list[int] = []
        for start, count in ((0, 13), (13, 1), (14, 0), (14, 50), (64, 36)):  # uneven runs
            for position in at_once.picks(count, now=1.0):
                taken.append(start + position)
                at_once.send("sink", 1, tup(start + position), now=1.0, wall=0.0)
        expected = [json.loads(s.values_json)[0] for s in one_by_one.take(0)]
        if rate in (1.0, 0.5, 0.25, 0.0625):
            assert taken == expected, rate
        else:
            assert len(taken) == len(expected) and all(
                abs(a - b) <= 1 for a, b in zip(taken, expected, strict=True)
            )
        assert at_once.offered == one_by_one.offered == 100
        assert at_once.sent == one_by_one.sent == len(expected)


def test_picks_follow_a_rate_re_estimated_within_the_call():
    # a burst thins the stride (at most 5 a second), a quiet spell widens it again within the
    # next call: its picks are placed by the widened rate, distinct, rising and evenly spaced
    watch = TupleWatch(None, 1.0, 5.0)
    for count, now in ((1000, 0.0), (1000, 0.3), (100, 5.3), (1000, 5.6), (3, 5.9), (100, 11.0)):
        offered = watch.offered
        picks = watch.picks(count, now)
        assert picks == sorted(set(picks)) and all(0 <= p < count for p in picks), (count, picks)
        assert watch.offered == offered + count
        if count == 100 and now == 5.3:  # 100 tuples in 5 s: 20 a second, about 1 in 4 kept for 5/s
            gaps = {b - a for a, b in itertools.pairwise(picks)}  # (the stride is 4 up to rounding)
            assert len(picks) in (24, 25) and gaps <= {3, 4, 5} and 4 in gaps, picks
        for position in picks:
            watch.send("sink", 1, tup(position), now, wall=0.0)


class PayloadExecutor:
    """What ExecutorTaps uses of an executor: a payload b"p<n>" carries n tuples, numbered."""

    component = "sink"

    def __init__(self) -> None:
        self.peeked: list[bytes] = []
        self.observers: tuple[object, object] = (None, None)

    def observe(self, inputs: object, emits: object) -> None:
        self.observers = (inputs, emits)

    def tuples_in(self, payload: bytes) -> int:
        return int(payload[1:])

    def peek(self, payload: bytes) -> list[Tuple]:
        self.peeked.append(payload)
        return [tup(100 * int(payload[1:]) + i) for i in range(int(payload[1:]))]


def test_only_entries_holding_a_pick_are_decoded_and_an_unsendable_pick_is_skipped():
    executor = PayloadExecutor()
    taps = ExecutorTaps(executor)  # type: ignore[arg-type]
    watch = TupleWatch(None, 0.1, 1.0)  # every 10th tuple; one token, refilled once a second
    taps.add_watch(watch)
    observe_inputs = executor.observers[0]
    assert callable(observe_inputs)
    batch = [(1, b"p4"), (1, tup(7)), (2, [tup(8), tup(9)]), (1, b"p5"), (None, b"p3")]
    observe_inputs(batch, 5.0)  # 15 tuples: the 10th (b"p5"'s 3rd) is taken and sent
    (sample,) = watch.take(0)
    assert json.loads(sample.values_json) == [502] and sample.task == 1
    assert executor.peeked == [b"p5"]  # b"p4" and b"p3" hold no pick: never decoded
    # (5.2: within the first quarter second the stride is not re-estimated; 20.0: 45 tuples in 15 s
    # are too few to thin it)
    observe_inputs([(None, b"p9"), (1, b"p6")], 5.2)  # the 20th and 30th (b"p9"'s 5th, b"p6"'s 6th)
    assert watch.take(0) == [] and executor.peeked == [b"p5"]  # no token left: skipped, undecoded
    observe_inputs(batch, 20.0)  # the 40th: b"p5"'s 3rd, sent with the two skipped before it
    (sample,) = watch.take(0)
    assert json.loads(sample.values_json) == [502] and sample.skipped == 2
    assert executor.peeked == [b"p5", b"p5"]
    assert watch.offered == 45 and watch.sent == 2


def test_watching_emits_sees_every_delivery_local_and_to_other_workers():
    b = TopologyBuilder("watched_emits")
    b.set_spout("source", ListSpout([[n] for n in range(40)], ["n"]))
    b.set_bolt("sink", RecordingBolt(), parallelism=2).shuffle_grouping("source")
    cluster = LocalCluster(b.build(), 2, Config({"messaging.transport": "grpc"}))
    (spout,) = [e for w in cluster.workers for e in w.spout_executors]
    sink_tasks = set(cluster.workers[0].assignment.tasks_of("sink"))
    (taps,) = [w.features["sampling"].taps[spout.name] for w in cluster.workers if spout in w.executors]
    emits = TupleWatch(None, 1.0, 1000.0)
    taps.add_watch(emits, emitted=True)
    assert taps.watches is None and spout.input_observer is None and spout.outbox.watch is not None
    cluster.start()
    try:
        assert cluster.run_until_done(30.0)
    finally:
        assert cluster.stop()
    samples = emits.take(0)
    assert sorted(json.loads(s.values_json)[0] for s in samples) == list(range(40))
    assert {s.task for s in samples} == sink_tasks  # deliveries to both workers' sink tasks
    assert all(s.component == "source" and s.source_component == "source" for s in samples)
    taps.remove_watch(emits)
    assert taps.emit_watches == () and spout.outbox.watch is None
