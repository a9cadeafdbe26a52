"""Benchmark topology for the Spark part: rows in, the same rows out, kept until read; and the
floors of Spark's Python data source API: a source that hands Spark ready-made Arrow batches,
and a sink that reads each Arrow batch's values and sends them nowhere."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tuplemesh.gateway import ExportBolt, IngestSpout
from tuplemesh.topology import TopologyBuilder

#: rows per Arrow batch of the floor source (what the tuplemesh source fetches at once)
FLOOR_BATCH = 50_000


def build() -> Any:
    b = TopologyBuilder("sparkbench")
    b.set_spout("lines", IngestSpout("lines", ["line"], capacity=50_000), parallelism=2)
    b.set_bolt("echo", ExportBolt("echo", retention=3_000_000, schema="line STRING"), parallelism=2) \
        .local_or_shuffle_grouping("lines")  # fmt: skip
    return b.build()


def floor_source() -> Any:
    """Data source ``arrowfloor``: option ``rows`` rows of ``line STRING`` in 2 partitions, as
    Arrow batches built before the clock matters (one per partition, handed over again and
    again). What any Python data source costs Spark at least: the same Python workers, Arrow
    hand-over and row conversion as the tuplemesh source, with nothing fetched or converted."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class FloorReader(DataSourceReader):
        def __init__(self, rows: int) -> None:
            self.rows = rows

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0), InputPartition(1)]

        def read(self, partition: InputPartition) -> Iterator[Any]:  # type: ignore[override]
            import pyarrow as pa

            column = pa.array([f"row-{i}" for i in range(FLOOR_BATCH)], type=pa.string())
            batch = pa.RecordBatch.from_arrays([column], names=["line"])
            left = self.rows // 2
            while left > 0:
                yield batch if left >= FLOOR_BATCH else batch.slice(0, left)
                left -= FLOOR_BATCH

    class ArrowFloor(DataSource):
        @classmethod
        def name(cls) -> str:
            return "arrowfloor"

        def schema(self) -> str:
            return "line STRING"

        def reader(self, schema: Any) -> FloorReader:
            return FloorReader(int(self.options.get("rows", "0")))

    return ArrowFloor


def floor_sink() -> Any:
    """Data source ``arrowfloorsink``, written to: each task takes its Arrow batches and reads
    each column's values as Python objects (``to_pylist``), then drops them. What any Python sink
    that hands values on costs Spark at least: the same Python workers, Arrow hand-over and value
    conversion as the tuplemesh sink, with nothing encoded or sent."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class FloorWriter(DataSourceArrowWriter):
        def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
            for batch in iterator:
                for column in batch.columns:
                    column.to_pylist()
            return WriterCommitMessage()

    class ArrowFloorSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "arrowfloorsink"

        def writer(self, schema: Any, overwrite: bool) -> FloorWriter:
            return FloorWriter()

    return ArrowFloorSink
