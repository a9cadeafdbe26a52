"""Export records as an Arrow IPC stream, on workers that have pyarrow (the ``spark`` extra).

A reader given Arrow takes its columns as they are, with no Python object per value: what Spark's
Python data source hands the JVM. Without pyarrow, or for values Arrow cannot hold in one array
(a column mixing numbers and strings), the Gateway answers columns in msgpack instead.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from typing import Any

from tuplemesh.columnar import rows_to_columns

__all__ = ["available", "encode", "encode_columns"]


@functools.cache
def available() -> bool:
    """Whether this process can answer in Arrow: pyarrow is installed (it is imported on the
    first Arrow answer, not before: a worker that never gives one does not pay its memory)."""
    return importlib.util.find_spec("pyarrow") is not None


def encode(records: Sequence[Sequence[Any]], fields: Sequence[str]) -> bytes:
    """``records`` as an Arrow IPC stream of one record batch, a column per field, of the types
    Arrow infers. ValueError when the records do not make one Arrow array per field (the caller
    answers in msgpack instead)."""
    return encode_columns(rows_to_columns(records) if records else [[] for _ in fields], fields)


def encode_columns(columns: Sequence[Sequence[Any]], fields: Sequence[str]) -> bytes:
    """`encode` of records given as one sequence per field."""
    if not available():
        raise ValueError("pyarrow is not installed")
    import pyarrow as pa

    if len(columns) != len(fields):
        raise ValueError(f"records of {len(columns)} values, fields {list(fields)}")
    try:
        batch = pa.RecordBatch.from_arrays([pa.array(column) for column in columns], names=list(fields))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as writer:
            writer.write_batch(batch)
        return bytes(sink.getvalue().to_pybytes())
    except (pa.ArrowException, TypeError, OverflowError) as exc:
        raise ValueError(f"records do not make Arrow arrays: {exc}") from None
