"""A range of one export partition (what one Spark task reads), and reading it as Arrow batches."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from tuplemesh.client import FetchedBatch
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
    """The records of one range as Arrow record batches, one per Fetch, answered in Arrow by
    workers that can (else as columns: no loop over rows on either side). The next Fetch is under
    way while Spark takes a batch, so the worker answering and this task overlap. The fetches
    name the range's epoch, so a log that restarted meanwhile fails the task (EpochMismatchError)
    instead of handing over records of another log."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    client = client_for(opts)

    def fetch(offset: int) -> FetchedBatch:
        return client.fetch_arrow(
            opts.export, part.partition, offset, arrow_schema,
            max_records=min(opts.batch_size * 10, part.end - offset), epoch=part.epoch,
        )  # fmt: skip

    if part.start >= part.end:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="tuplemesh-fetch") as ahead:
        pending: Future[FetchedBatch] | None = ahead.submit(fetch, part.start)
        while pending is not None:
            got = pending.result()
            if not got.count:
                raise RuntimeError(
                    f"tuplemesh: partition {part.partition} of {opts.export!r} returned no records at "
                    f"offset {got.offset} of {part.end}"
                )
            pending = ahead.submit(fetch, got.next_offset) if got.next_offset < part.end else None
            yield got.batch
