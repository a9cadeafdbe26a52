"""Error log lines stay short and few: a bolt failing on huge tuples, a gRPC handler's traceback."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from tests.helpers import ListSpout
from tuplemesh.config import Config
from tuplemesh.logutil import MAX_LINE_CHARS, RateLimitFilter
from tuplemesh.topology import Bolt, TopologyBuilder, Tuple
from tuplemesh.worker.local_cluster import LocalCluster

HUGE = 1_000_000  # characters of each tuple's value


class RaisingWithTheTuple(Bolt):
    """Raises on every tuple, naming the whole tuple in the message (as user code often does)."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        pass

    def execute(self, tup: Tuple) -> None:
        raise ValueError(f"cannot handle {tup.values}")


def test_a_bolt_error_naming_a_huge_tuple_logs_one_short_line_per_interval(caplog):
    builder = TopologyBuilder("huge-errors")
    builder.set_spout("big", ListSpout([[str(i) * HUGE] for i in range(3)], ["blob"]))
    builder.set_bolt("fail", RaisingWithTheTuple()).shuffle_grouping("big")
    conf = Config({"messaging.transport": "local", "tuplemesh.log.rate.limit.secs": 3600.0})
    with caplog.at_level(logging.WARNING, logger="tuplemesh.worker.executor"):
        summary = LocalCluster(builder.build(), 1, conf).run(60)
    assert summary.components["fail"]["errors"] == 3  # every failure is counted
    records = [r for r in caplog.records if "bolt fail task" in r.getMessage()]
    assert len(records) == 1  # the others are held back within the interval
    text = records[0].getMessage()
    assert text.startswith("bolt fail task 2 raised ValueError(\"cannot handle ['000")
    assert re.search(r"\.\.\. \(\d{7} characters in all\)$", text)  # cut from over a million
    assert max(len(line) for line in text.splitlines()) <= MAX_LINE_CHARS + 40


def test_a_grpc_handler_traceback_is_cut_and_rate_limited():
    logger = logging.getLogger("test.grpc._server")
    logger.propagate = False
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(self.format(record))

    logger.addHandler(Keep())
    logger.addFilter(RateLimitFilter(3600.0))
    for _ in range(5):
        try:
            raise RuntimeError("x" * HUGE)
        except RuntimeError:
            logger.exception("Exception calling application: %s", "y" * HUGE)
    assert len(seen) == 1
    assert max(len(line) for line in seen[0].splitlines()) <= MAX_LINE_CHARS + 40
    assert "RuntimeError" in seen[0]
