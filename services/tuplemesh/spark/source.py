"""`TuplemeshDataSource`: the data source named ``tuplemesh``, and its registration in a session."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from tuplemesh.spark.fetch import export_offsets
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
        _, answer = export_offsets(opts)
        return str(answer.schema)

    def reader(self, schema: StructType) -> TuplemeshReader:
        return TuplemeshReader(self.options, schema)

    def streamReader(self, schema: StructType) -> TuplemeshStreamReader:
        return TuplemeshStreamReader(self.options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> TuplemeshWriter:
        return TuplemeshWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> TuplemeshStreamWriter:
        return TuplemeshStreamWriter(self.options, schema)


def register(spark: Any) -> None:
    """Make ``format("tuplemesh")`` available in this session."""
    spark.dataSource.register(TuplemeshDataSource)
