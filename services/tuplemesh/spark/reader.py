"""The source: ``spark.read`` and ``spark.readStream`` with ``format("tuplemesh")``."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from tuplemesh.spark.channel import gateway
from tuplemesh.spark.fetch import ExportRange, export_offsets, read_range
from tuplemesh.spark.options import Options
from tuplemesh.v1 import gateway_pb2

__all__ = ["TuplemeshReader", "TuplemeshStreamReader"]


class TuplemeshReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = Options.parse(options, "read")
        self.schema = schema

    def partitions(self) -> list[ExportRange]:
        found, _ = export_offsets(self.opts)
        return [ExportRange(t, p, s, e) for p, (t, s, e) in sorted(found.items())]

    def read(self, partition: ExportRange) -> Iterator[Any]:  # type: ignore[override]
        return read_range(self.opts, partition, self.schema)


class TuplemeshStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{partition: offset}``; ``commit`` lets the export logs truncate."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = Options.parse(options, "read")
        self.schema = schema
        self._targets: dict[int, str] = {}
        self._available_now: dict[str, int] | None = None

    def _current(self) -> dict[str, int]:
        found, _ = export_offsets(self.opts)
        self._targets = {p: t for p, (t, _, _) in found.items()}
        return {str(p): end for p, (_, _, end) in sorted(found.items())}

    def initialOffset(self) -> dict[str, int]:
        found, _ = export_offsets(self.opts)
        return {str(p): start for p, (_, start, _) in sorted(found.items())}

    def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
        current = self._current()
        if self._available_now is not None:  # AvailableNow: never beyond what existed at the start
            return {p: min(end, self._available_now.get(p, end)) for p, end in current.items()}
        return current

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._current()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[ExportRange]:
        if not self._targets:
            self._current()
        return [
            ExportRange(self._targets[int(p)], int(p), start.get(p, 0), stop)
            for p, stop in sorted(end.items())
            if stop > start.get(p, 0)
        ]

    def read(self, partition: ExportRange) -> Iterator[Any]:  # type: ignore[override]
        return read_range(self.opts, partition, self.schema)

    def commit(self, end: dict[str, int]) -> None:
        if not self._targets:
            self._current()
        for p, offset in end.items():
            with gateway(self.opts, self._targets[int(p)]) as stub:
                stub.Commit(
                    gateway_pb2.CommitRequest(export=self.opts.export, partition=int(p), offset=offset)
                )
