"""Gateway Fetch answers as Arrow record batches in a reader's schema (pyarrow: the ``spark``
extra). A worker answers in Arrow where it can (``FetchRequest.arrow``), else in msgpack columns;
either way the reader gets one record batch of its schema's types."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["columns_to_record_batch", "ipc_to_record_batch"]


def columns_to_record_batch(
    columns: Sequence[Sequence[Any]], count: int, arrow_schema: Any, export: str
) -> Any:
    """One ``pyarrow.RecordBatch`` of ``count`` records given as ``columns`` (one sequence per
    field, as a msgpack columns answer holds them): each column becomes an Arrow array of its
    field's type in one call, with no loop over rows. RuntimeError naming ``export`` when the
    columns do not match the schema's fields or ``count``."""
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


def ipc_to_record_batch(ipc: bytes, count: int, arrow_schema: Any, export: str) -> Any:
    """The record batch of an Arrow answer (its columns of the types Arrow inferred on the
    worker), each column cast to its field's type in ``arrow_schema``. RuntimeError naming
    ``export`` when the answer does not hold ``count`` records of the schema's width."""
    import pyarrow as pa

    got = pa.ipc.open_stream(ipc).read_next_batch()
    width = len(arrow_schema)
    if got.num_columns != width:
        raise RuntimeError(f"tuplemesh: records of {export!r} have {got.num_columns} fields, schema {width}")
    if got.num_rows != count:
        raise RuntimeError(
            f"tuplemesh: an answer of {got.num_rows} records from {export!r}, {count} announced"
        )
    return pa.RecordBatch.from_arrays(
        [got.column(i).cast(field.type) for i, field in enumerate(arrow_schema)], schema=arrow_schema
    )
