"""The source: ``spark.read`` and ``spark.readStream`` with ``format("tuplemesh")``."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from tuplemesh.client import EpochMismatchError, ExportOffsets, GatewayClient
from tuplemesh.spark.clients import client_for
from tuplemesh.spark.fetch import ExportRange, read_range
from tuplemesh.spark.options import Options
from tuplemesh.spark.positions import Position, cap_rows, from_spark, reconcile, to_spark

__all__ = ["TuplemeshReader", "TuplemeshStreamReader"]

log = logging.getLogger(__name__)


def _starting(opts: Options, now: ExportOffsets) -> dict[int, Position]:
    """Where a new query (or a batch read) starts, as option ``startingOffsets`` says."""
    given = opts.starting_offsets
    if given == "latest":
        return {p: Position(info.epoch, info.end) for p, info in now.partitions.items()}
    if isinstance(given, Mapping):
        unknown = sorted(set(given) - set(now.partitions))
        if unknown:
            raise ValueError(
                f"tuplemesh: option 'startingOffsets' names partitions {unknown}; "
                f"{opts.export!r} has {sorted(now.partitions)}"
            )
        start = {p: Position(info.epoch, given.get(p, info.start)) for p, info in now.partitions.items()}
        return reconcile(opts.export, start, now, opts.fail_on_data_loss)  # below a log's start: data loss
    return {p: Position(info.epoch, info.start) for p, info in now.partitions.items()}


class TuplemeshReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = Options.parse(options, "read")
        self.schema = schema

    def partitions(self) -> list[ExportRange]:
        now = client_for(self.opts).offsets(self.opts.export)
        start = _starting(self.opts, now)
        # every partition, empty ones too: Spark would read an empty list as one default partition
        return [
            ExportRange(p, info.epoch, min(start[p].offset, info.end), info.end)
            for p, info in sorted(now.partitions.items())
        ]

    def read(self, partition: ExportRange) -> Iterator[Any]:  # type: ignore[override]
        return read_range(self.opts, partition, self.schema)


class TuplemeshStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{partition: {"epoch": E, "offset": N}}``; ``commit`` lets the export logs
    truncate. A log that restarted under the query is data loss (option ``failOnDataLoss``)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = Options.parse(options, "read")
        self.schema = schema
        self._available_now: dict[int, Position] | None = None

    @property
    def client(self) -> GatewayClient:
        # looked up, not kept: Spark pickles the reader, and a client (its channels) cannot be
        return client_for(self.opts)

    def initialOffset(self) -> dict[str, Any]:
        return to_spark(_starting(self.opts, self.client.offsets(self.opts.export)))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_records_per_trigger:
            return ReadMaxRows(self.opts.max_records_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        now = self.client.offsets(self.opts.export)
        begin = reconcile(self.opts.export, from_spark(start), now, self.opts.fail_on_data_loss)
        end = {p: info.end for p, info in now.partitions.items()}
        target = self._available_now
        if target is not None:  # AvailableNow: never beyond what the same log held at the start
            end = {p: min(e, target[p].offset) if p in target and target[p].epoch == now.partitions[p].epoch
                   else e for p, e in end.items()}  # fmt: skip
        end = {p: max(e, begin[p].offset) for p, e in end.items()}
        if isinstance(limit, ReadMaxRows):
            end = cap_rows({p: pos.offset for p, pos in begin.items()}, end, limit.max_rows)
        return to_spark({p: Position(now.partitions[p].epoch, e) for p, e in end.items()})

    def prepareForTriggerAvailableNow(self) -> None:
        now = self.client.offsets(self.opts.export)
        self._available_now = {p: Position(info.epoch, info.end) for p, info in now.partitions.items()}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[ExportRange]:
        begin, stop = from_spark(start), from_spark(end)
        ranges = []
        for p, last in sorted(stop.items()):
            first = begin.get(p)
            if first is None or (first.epoch and first.epoch != last.epoch):
                # new to the query, or its log restarted (latestOffset accepted that): the new
                # log from its first retained record
                first = Position(last.epoch, self.client.offsets(self.opts.export).partitions[p].start)
            ranges.append(ExportRange(p, last.epoch, min(first.offset, last.offset), last.offset))
        # every partition, empty ones too: Spark would read an empty list as one default partition
        return ranges

    def read(self, partition: ExportRange) -> Iterator[Any]:  # type: ignore[override]
        return read_range(self.opts, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        for p, pos in from_spark(end).items():
            try:
                self.client.commit(self.opts.export, p, pos.offset, epoch=pos.epoch)
            except EpochMismatchError as exc:  # restarted: nothing of the old log is left to let go
                log.info("not committing: %s", exc)
