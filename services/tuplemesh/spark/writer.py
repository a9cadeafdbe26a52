"""The sink: ``df.write`` and ``df.writeStream`` with ``format("tuplemesh")``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter
from pyspark.sql.types import StructType

from tuplemesh.spark.options import OptionError, Options
from tuplemesh.spark.publish import PublishCommit, arrow_columns, column_indices, publish_partition

__all__ = ["TuplemeshStreamWriter", "TuplemeshWriter", "micro_batch_id"]


def _refuse_overwrite(overwrite: bool, what: str) -> None:
    if overwrite:
        raise OptionError(
            f"tuplemesh: {what} cannot replace what a topology already took in: write with "
            "mode('append') (streaming: outputMode('append') or 'update')"
        )


def micro_batch_id(sink_id: str, query_id: str | None, batch: str | None) -> str:
    """The Gateway batch id of one streaming micro-batch: the same whenever Spark runs that batch
    again from the query's checkpoint (the query id is kept there), different for any other
    query or batch. Each task adds its partition id."""
    return f"{sink_id}:{query_id or '-'}:{batch}"


class TuplemeshWriter(DataSourceArrowWriter):
    """Spark hands each task its rows as Arrow record batches (the Arrow writer path)."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool = False) -> None:
        self.opts = Options.parse(options, "write")
        _refuse_overwrite(overwrite, "mode('overwrite')")
        self.indices = column_indices(schema, self.opts.columns)
        self.write_id = uuid.uuid4().hex  # one job: a retried task reuses it and is recognised

    def write(self, iterator: Iterator[Any]) -> PublishCommit:
        return publish_partition(self.opts, arrow_columns(iterator, self.indices), self.write_id)


class TuplemeshStreamWriter(DataSourceStreamArrowWriter):
    """Each micro-batch's tasks get their rows as Arrow record batches."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool = False) -> None:
        self.opts = Options.parse(options, "write")
        _refuse_overwrite(overwrite, "outputMode('complete')")
        self.indices = column_indices(schema, self.opts.columns)

    def write(self, iterator: Iterator[Any]) -> PublishCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        query = context.getLocalProperty("sql.streaming.queryId") if context else None
        batch = context.getLocalProperty("streaming.sql.batchId") if context else None
        batch_id = micro_batch_id(self.opts.sink_id, query, batch)
        return publish_partition(self.opts, arrow_columns(iterator, self.indices), batch_id)

    def commit(self, messages: list[Any], batchId: int) -> None:
        return None  # rows are held once acknowledged: nothing left to do

    def abort(self, messages: list[Any], batchId: int) -> None:
        return None  # Spark replays the batch; the Gateway recognises what it already holds
