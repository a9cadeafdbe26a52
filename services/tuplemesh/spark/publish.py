"""Publishing one Spark partition into an IngestSpout through the Gateway client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from tuplemesh.spark.clients import client_for
from tuplemesh.spark.options import OptionError, Options

__all__ = ["PublishCommit", "arrow_columns", "column_indices", "publish_partition"]


@dataclass
class PublishCommit(WriterCommitMessage):
    partition: int
    rows: int
    duplicates: int
    attempts: int


def column_indices(schema: StructType, columns: tuple[str, ...]) -> list[int]:
    """Positions in a row of the ``columns`` option's columns (every column when it is empty)."""
    names = [f.name for f in schema.fields]
    if not columns:
        return list(range(len(names)))
    missing = [c for c in columns if c not in names]
    if missing:
        raise OptionError(f"tuplemesh: option 'columns' names {missing}, not in the DataFrame's {names}")
    return [names.index(c) for c in columns]


def arrow_columns(batches: Iterator[Any], indices: list[int]) -> Iterator[list[list[Any]]]:
    """The ``indices`` columns of Spark's Arrow record batches, one list per column
    (``to_pylist``): no row is built."""
    for batch in batches:
        yield [batch.column(i).to_pylist() for i in indices]


def publish_partition(opts: Options, batches: Iterator[list[list[Any]]], batch_id: str) -> PublishCommit:
    """Send this task's Spark partition (batches of columns, already cut to the ``columns``
    option) as (``batch_id``, partition id): a retried task, or a replayed micro-batch with the
    same ``batch_id``, is recognised by the worker that holds it."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context else 0
    result = client_for(opts).publish_columns(opts.component, batches, batch_id=batch_id, partition=partition)
    return PublishCommit(partition, result.published, result.duplicates, result.attempts)
