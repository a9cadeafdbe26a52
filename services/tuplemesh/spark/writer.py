"""The sink: ``df.write`` and ``df.writeStream`` with ``format("tuplemesh")``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter
from pyspark.sql.types import StructType

from tuplemesh.spark.options import Options
from tuplemesh.spark.publish import PublishCommit, column_indices, publish_partition

__all__ = ["TuplemeshStreamWriter", "TuplemeshWriter"]


class TuplemeshWriter(DataSourceWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = Options.parse(options, "write")
        self.indices = column_indices(schema, self.opts.columns)
        self.write_id = uuid.uuid4().hex  # one job: a retried task reuses it and is recognised

    def write(self, iterator: Iterator[Any]) -> PublishCommit:
        return publish_partition(self.opts, self.indices, iterator, self.write_id)


class TuplemeshStreamWriter(DataSourceStreamWriter):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = Options.parse(options, "write")
        self.indices = column_indices(schema, self.opts.columns)

    def write(self, iterator: Iterator[Any]) -> PublishCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty("streaming.sql.batchId") if context else None
        # <sinkId>:<micro-batch id>: stable across query restarts, so a replayed batch is recognised
        return publish_partition(self.opts, self.indices, iterator, f"{self.opts.sink_id}:{batch}")

    def commit(self, messages: list[Any], batchId: int) -> None:
        return None  # rows are in the topology once acknowledged: nothing left to do

    def abort(self, messages: list[Any], batchId: int) -> None:
        return None  # Spark replays the batch; the Gateway recognises what it already has
