"""Word count: sentence spout -> split bolt (shuffle) -> count bolt (fields on "word").

The spout emits a fixed corpus ``wordcount.repeat`` times, so the exact answer is known and the
run checks itself: ``tuplemesh run examples.wordcount:topology --workers 3``.

It is written for guaranteed processing: with ``topology.acker.executors`` > 0 each sentence is a
tracked tuple tree, the bolts are BasicBolts (emits anchored, inputs acked), and the spout
re-emits a sentence whose tree failed or timed out. With acking off it emits without message ids.

``build(batched=True)`` (``examples.wordcount:batched``) is the same word count written against
the batch API: the spout emits with ``emit_many``, the bolts define ``execute_batch`` and the
splitter emits all the words of its batch in one ``emit_many``.

``build(columnar=True)`` (``examples.wordcount:columnar``) is the same word count on columns: the
spout emits its sentences as one column (``emit_columns``), the splitter's ``process`` splits the
sentence column into one word column, and the counter counts a whole column with
``Counter.update``. Between workers the words travel as one list per task, with no object per word.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from typing import Any

from tuplemesh.topology import BasicBolt, Columns, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple

CORPUS = [
    "the cow jumped over the moon",
    "an apple a day keeps the doctor away",
    "four score and seven years ago",
    "snow white and the seven dwarfs",
    "i am at two with nature",
    "storm moves tuples between workers",
    "every worker has a receive thread and a transfer thread",
    "each executor has its own ring buffer",
    "the disruptor is a bounded queue without locks",
    "batches travel between workers over the network",
    "a slow consumer slows down its producer and nothing is dropped",
    "the quick brown fox jumps over the lazy dog",
]

#: How many times each spout task set replays the corpus (env var overrides, for ``make run``).
DEFAULT_REPEAT = int(os.environ.get("WORDCOUNT_REPEAT", "4000"))
#: Sentences a spout task emits per ``next_tuple`` call: amortises the executor loop.
SENTENCES_PER_CALL = 16
#: Sentences per call on columns: a column is worth sending when it is long (one route, one
#: payload per task and one bolt call per batch, whatever its length).
SENTENCES_PER_COLUMN = 256


class SentenceSpout(Spout):
    """Emits the corpus ``repeat`` times in total across all of its tasks, then is finished.

    With acking on, the message id of a sentence is its index; a failed one is emitted again.
    """

    def __init__(self, repeat: int = DEFAULT_REPEAT, batched: bool = False, columnar: bool = False) -> None:
        self.repeat = repeat
        self.batched = batched
        self.columnar = columnar
        self.emitted = 0
        self.acked = 0
        self.failed = 0
        self.replayed = 0

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["sentence"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        tasks = context.component_tasks
        total = len(CORPUS) * int(conf.get("wordcount.repeat", self.repeat))
        # Task i emits sentences i, i + n, i + 2n, ...: together the tasks emit each exactly once.
        self.indices = iter(range(context.task_index, total, len(tasks)))
        self.done = False
        self.reliable = conf["topology.acker.executors"] > 0
        self.replay: list[int] = []  # failed sentence indices, emitted again before new ones

    def next_tuple(self) -> None:
        emit = self.collector.emit
        if self.replay:
            again = self.replay.pop()
            self.replayed += 1
            self.emitted += 1
            emit([CORPUS[again % len(CORPUS)]], msg_id=again)
            return
        if self.batched or self.columnar:
            self._emit_many()
            return
        for _ in range(SENTENCES_PER_CALL):  # a few per call: amortises the executor loop
            i = next(self.indices, None)
            if i is None:
                self.done = True
                return
            emit([CORPUS[i % len(CORPUS)]], msg_id=i if self.reliable else None)
            self.emitted += 1

    def _emit_many(self) -> None:
        per_call = SENTENCES_PER_COLUMN if self.columnar else SENTENCES_PER_CALL
        indices = [i for _, i in zip(range(per_call), self.indices, strict=False)]
        if len(indices) < per_call:
            self.done = True
        if not indices:
            return
        if self.columnar:  # with acking on, the whole batch is one tree: its id, its indices
            batch_id = tuple(indices) if self.reliable else None
            self.collector.emit_columns([[CORPUS[i % len(CORPUS)] for i in indices]], batch_id=batch_id)
        else:
            msg_ids = indices if self.reliable else None
            self.collector.emit_many([[CORPUS[i % len(CORPUS)]] for i in indices], msg_ids=msg_ids)
        self.emitted += len(indices)

    def ack(self, msg_id: Any) -> None:
        self.acked += len(msg_id) if type(msg_id) is tuple else 1

    def fail(self, msg_id: Any) -> None:
        failed = list(msg_id) if type(msg_id) is tuple else [msg_id]  # a batch: each sentence again
        self.failed += len(failed)
        self.replay.extend(failed)

    def is_finished(self) -> bool:
        return self.done and not self.replay

    def report(self) -> Any:
        return {
            "emitted": self.emitted,
            "acked": self.acked,
            "failed": self.failed,
            "replayed": self.replayed,
        }


class SplitBolt(BasicBolt):
    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["word"])

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit = collector.emit

    def execute(self, tup: Tuple) -> None:
        emit = self.emit
        for word in tup.values[0].split():
            emit([word])


class BatchSplitBolt(SplitBolt):
    """SplitBolt on the batch API: every word of an inbox batch in one ``emit_many`` (with acking
    on, one per sentence, anchored to it)."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit_many = collector.emit_many
        self.reliable = conf["topology.acker.executors"] > 0

    def execute_batch(self, tuples: list[Tuple]) -> None:
        emit_many = self.emit_many
        if self.reliable:
            for tup in tuples:
                emit_many([[word] for word in tup.values[0].split()], tup)
        else:
            emit_many([[word] for tup in tuples for word in tup.values[0].split()])


class ColumnarSplitBolt(SplitBolt):
    """SplitBolt on columns: the sentence column of a batch in, one word column out, anchored to
    the batch (with acking on, a batch the spout emitted as one tree stays one: one edge per
    task's part of the words)."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.emit_columns = collector.emit_columns

    def process(self, batch: Columns) -> None:
        self.emit_columns(
            [[word for sentence in batch.column("sentence") for word in sentence.split()]], batch
        )


class CountBolt(BasicBolt):
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.counts: Counter[str] = Counter()

    def execute(self, tup: Tuple) -> None:
        self.counts[tup.values[0]] += 1

    def report(self) -> Any:
        return {"counts": dict(self.counts)}


class BatchCountBolt(CountBolt):
    """CountBolt on the batch API."""

    def execute_batch(self, tuples: list[Tuple]) -> None:
        counts = self.counts
        for tup in tuples:
            counts[tup.values[0]] += 1


class ColumnarCountBolt(CountBolt):
    """CountBolt on columns: a whole word column counted in one ``Counter.update``."""

    def process(self, batch: Columns) -> None:
        self.counts.update(batch.column("word"))


def expected_counts(repeat: int) -> Counter[str]:
    counts: Counter[str] = Counter()
    for sentence in CORPUS:
        counts.update(sentence.split())
    return Counter({word: n * repeat for word, n in counts.items()})


def make_check(repeat: int) -> Any:
    def check(reports: Mapping[str, list[Any]]) -> tuple[bool, str]:
        merged: Counter[str] = Counter()
        for report in reports.get("count", []):
            counts = report["counts"]
            overlap = merged.keys() & counts.keys()
            if overlap:
                return False, f"word(s) counted by two tasks (fields grouping broken): {sorted(overlap)[:5]}"
            merged.update(counts)
        expected = expected_counts(repeat)
        if merged == expected:
            return (
                True,
                f"{len(expected)} distinct words, {sum(expected.values())} in total: all counts exact",
            )
        wrong = sorted(w for w in expected.keys() | merged.keys() if expected[w] != merged[w])
        sample = ", ".join(f"{w}: got {merged[w]} want {expected[w]}" for w in wrong[:5])
        return False, f"{len(wrong)} word count(s) wrong ({sample})"

    return check


def build(
    repeat: int = DEFAULT_REPEAT,
    spouts: int = 1,
    splitters: int = 3,
    counters: int = 3,
    batched: bool = False,
    columnar: bool = False,
) -> Any:
    builder = TopologyBuilder("wordcount")
    builder.set_spout("sentences", SentenceSpout(repeat, batched, columnar), parallelism=spouts)
    split: SplitBolt = ColumnarSplitBolt() if columnar else BatchSplitBolt() if batched else SplitBolt()
    count: CountBolt = ColumnarCountBolt() if columnar else BatchCountBolt() if batched else CountBolt()
    builder.set_bolt("split", split, parallelism=splitters).shuffle_grouping("sentences")
    builder.set_bolt("count", count, parallelism=counters).fields_grouping("split", ["word"])
    return builder.build(conf={"wordcount.repeat": repeat}, check=make_check(repeat))


topology = build()
batched = build(batched=True)
columnar = build(columnar=True)
