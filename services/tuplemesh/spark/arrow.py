"""Export records to Arrow record batches for Spark's columnar read path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["columns_to_record_batch"]


def columns_to_record_batch(
    columns: Sequence[Sequence[Any]], count: int, arrow_schema: Any, export: str
) -> Any:
    """One ``pyarrow.RecordBatch`` of ``count`` records given as ``columns`` (one sequence per
    field, as the Gateway's columnar Fetch answers): each column becomes an Arrow array in one
    call, with no loop over rows. RuntimeError naming ``export`` when the columns do not match
    the schema's fields or ``count``."""
    import pyarrow as pa

    width = len(arrow_schema)
    if not columns and count == 0:
        columns = [() for _ in range(width)]
    if len(columns) != width:
        raise RuntimeError(f"tuplemesh: records of {export!r} have {len(columns)} fields, schema {width}")
    if any(len(column) != count for column in columns):
        raise RuntimeError(f"tuplemesh: columns of {export!r} are not all {count} records long")
    return pa.RecordBatch.from_arrays(
        [pa.array(column, type=field.type) for column, field in zip(columns, arrow_schema, strict=True)],
        schema=arrow_schema,
    )
