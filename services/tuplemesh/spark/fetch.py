"""A range of one export partition (what one Spark task reads), and reading it as Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from tuplemesh.spark.arrow import columns_to_record_batch
from tuplemesh.spark.clients import client_for
from tuplemesh.spark.options import Options

__all__ = ["ExportRange", "read_range"]


@dataclass
class ExportRange(InputPartition):
    """Offsets [start, end) of ``partition``'s log of ``epoch``."""

    partition: int
    epoch: int
    start: int
    end: int


def read_range(opts: Options, part: ExportRange, schema: StructType) -> Iterator[Any]:
    """The records of one range as Arrow record batches, one per Fetch, fetched as columns (no
    loop over rows on either side). The fetches name the range's epoch, so a log that restarted
    meanwhile fails the task (EpochMismatchError) instead of handing over records of another log."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    client = client_for(opts)
    offset = part.start
    while offset < part.end:
        got = client.fetch_columns(
            opts.export, part.partition, offset, max_records=min(opts.batch_size * 10, part.end - offset),
            epoch=part.epoch,
        )  # fmt: skip
        if not got.count:
            raise RuntimeError(
                f"tuplemesh: partition {part.partition} of {opts.export!r} returned no records at "
                f"offset {offset} of {part.end}"
            )
        yield columns_to_record_batch(got.columns, got.count, arrow_schema, opts.export)
        offset = got.next_offset
