"""Topologies the web UI tests run: a word count that runs until stopped, with or without a slow
bolt, and a finite one with one hot word (and keys that look like markup) for the hot-keys view."""

from __future__ import annotations

import time
from typing import Any

from examples.wordcount import CORPUS, CountBolt, SplitBolt
from tests.helpers import ListSpout
from tests.hotkeys.topologies import Count
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, TopologyBuilder, Tuple


class EndlessSentences(Spout):
    """The word count corpus over and over, a few hundred sentences a second (paced, so three
    workers leave the machine's cores to everything else)."""

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["sentence"])

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.n = 0

    def next_tuple(self) -> None:
        self.collector.emit([CORPUS[self.n % len(CORPUS)]])
        self.n += 1
        time.sleep(0.002)


class SlowAudit(Bolt):
    """Takes 50 ms per word: far slower than the words arrive, so its inbox stays congested."""

    def execute(self, tup: Tuple) -> None:
        time.sleep(0.05)


def _build(slow: bool) -> Any:
    b = TopologyBuilder("wordcount")
    b.set_spout("sentences", EndlessSentences())
    b.set_bolt("split", SplitBolt(), parallelism=3).shuffle_grouping("sentences")
    b.set_bolt("count", CountBolt(), parallelism=3).fields_grouping("split", ["word"])
    if slow:
        b.set_bolt("audit", SlowAudit()).shuffle_grouping("split")
    return b.build()


slow_wordcount = _build(slow=True)
#: Without the slow bolt: nothing queues up, so a rescale's drain ends within a second or two.
wordcount = _build(slow=False)


#: The words of `hot_words` and how often each comes: "hot" most, then keys a page must show as
#: text (markup) and one too long to show whole.
SCRIPT_KEY = "<script>alert(1)</script>"
IMG_KEY = '<img src=x onerror="window.__pwned=1">'
LONG_KEY = "a-very-long-key-" * 8
HOT_WORDS = {"hot": 300, "ant": 60, "bee": 40, SCRIPT_KEY: 30, IMG_KEY: 20, LONG_KEY: 10}


def _hot_words() -> Any:
    # interleaved round-robin, each word until its count is used up (deterministic)
    left = dict(HOT_WORDS)
    out = []
    while left:
        for word in list(left):
            out.append([word])
            left[word] -= 1
            if not left[word]:
                del left[word]
    b = TopologyBuilder("hotwords")
    b.set_spout("words", ListSpout(out, ["word"]))
    b.set_bolt("count", Count(), parallelism=2).fields_grouping("words", ["word"])
    return b.build()


#: Every word once through ``count`` by a fields grouping, then the spout is finished.
hot_words = _hot_words()
