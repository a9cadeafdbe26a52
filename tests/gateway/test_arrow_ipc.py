"""Records as an Arrow IPC stream (the Gateway's Arrow answers), and what makes none."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tuplemesh.client.arrow import ipc_to_record_batch
from tuplemesh.gateway import arrow_ipc


def test_records_become_one_batch_of_inferred_types_named_by_the_fields():
    assert arrow_ipc.available()
    batch = pa.ipc.open_stream(
        arrow_ipc.encode([["cow", 2, 0.5], ["fox", None, 1.0]], ["w", "n", "x"])
    ).read_next_batch()
    assert batch.schema.names == ["w", "n", "x"]
    assert batch.schema.types == [pa.string(), pa.int64(), pa.float64()]
    assert batch.to_pylist() == [{"w": "cow", "n": 2, "x": 0.5}, {"w": "fox", "n": None, "x": 1.0}]
    assert pa.ipc.open_stream(arrow_ipc.encode([], ["w"])).read_next_batch().num_rows == 0


@pytest.mark.parametrize(
    ("records", "fields"),
    [([[1], ["one"]], ["n"]), ([[2**70]], ["n"]), ([["a", "b"]], ["w"]), ([["a"], ["b", "c"]], ["w"])],
)
def test_values_arrow_cannot_hold_in_one_array_per_field_are_a_value_error(records, fields):
    with pytest.raises(ValueError):
        arrow_ipc.encode(records, fields)


def test_a_reader_casts_the_answer_to_its_schema_and_checks_its_shape():
    ipc = arrow_ipc.encode([[1, "a"], [2, None]], ["n", "w"])
    schema = pa.schema([("count", pa.float64()), ("word", pa.string())])
    batch = ipc_to_record_batch(ipc, 2, schema, "counts")
    assert batch.schema == schema and batch.to_pylist() == [
        {"count": 1.0, "word": "a"},
        {"count": 2.0, "word": None},
    ]
    with pytest.raises(RuntimeError, match="have 2 fields, schema 1"):
        ipc_to_record_batch(ipc, 2, pa.schema([("n", pa.int64())]), "counts")
    with pytest.raises(RuntimeError, match="an answer of 2 records from 'counts', 3 announced"):
        ipc_to_record_batch(ipc, 3, schema, "counts")
