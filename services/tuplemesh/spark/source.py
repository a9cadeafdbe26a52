"""`TuplemeshDataSource`: the data source named ``tuplemesh``, and its registration in a session."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from tuplemesh.spark.clients import client_for
from tuplemesh.spark.options import Options
from tuplemesh.spark.reader import TuplemeshReader, TuplemeshStreamReader
from tuplemesh.spark.writer import TuplemeshStreamWriter, TuplemeshWriter

__all__ = ["TuplemeshDataSource", "register"]


class TuplemeshDataSource(DataSource):
    """Format ``tuplemesh``: see the ``tuplemesh.spark`` module documentation."""

    @classmethod
    def name(cls) -> str:
        return "tuplemesh"

    def schema(self) -> str:
        opts = Options.parse(self.options, "read")
        return client_for(opts).offsets(opts.export).schema

    def reader(self, schema: StructType) -> TuplemeshReader:
        return TuplemeshReader(self.options, schema)

    def streamReader(self, schema: StructType) -> TuplemeshStreamReader:
        return TuplemeshStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> TuplemeshWriter:
        return TuplemeshWriter(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> TuplemeshStreamWriter:
        return TuplemeshStreamWriter(self.options, schema, overwrite)


def register(spark: Any) -> None:
    """Make ``format("tuplemesh")`` available in this session."""
    spark.dataSource.register(TuplemeshDataSource)
