"""Gateway on real worker processes: publish rows in, fetch running counts out by offset."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import msgpack
import pytest

from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc

LINES = ["the cow jumped over the moon", "the quick brown fox", "a cow and a fox"] * 40


def stubs(mesh: Mesh) -> list[gateway_pb2_grpc.GatewayStub]:
    return [
        gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(mesh.address(i))) for i in range(len(mesh.ports))
    ]


def publish(stub: gateway_pb2_grpc.GatewayStub, rows: list[list[object]], batch_id: str = "",
            partition: int = 0, per_request: int = 25) -> list[gateway_pb2.PublishAck]:  # fmt: skip
    requests = [
        gateway_pb2.PublishRequest(
            component="lines",
            packed=msgpack.packb(rows[i : i + per_request]),
            batch_id=batch_id,
            partition=partition,
            sequence=i // per_request + 1,
        )
        for i in range(0, len(rows), per_request)
    ]
    return list(stub.Publish(iter(requests), timeout=30))


def exported_records(mesh: Mesh) -> list[list[object]]:
    """Every record held by every export partition of every worker."""
    records = []
    for stub in stubs(mesh):
        offsets = stub.Offsets(gateway_pb2.OffsetsRequest(export="counts"))
        for p in offsets.partitions:
            request = gateway_pb2.FetchRequest(
                export="counts", partition=p.partition, start_offset=p.start, max_records=100_000
            )
            records.extend(msgpack.unpackb(stub.Fetch(request).packed))
    return records


def final_counts(mesh: Mesh, expect_total: int, timeout: float = 30) -> dict[str, int]:
    """Max count per word over every export partition, once expect_total records arrived."""
    eventually(lambda: len(exported_records(mesh)) >= expect_total, timeout, 0.1)
    records = exported_records(mesh)
    assert len(records) == expect_total, f"{len(records)} records, expected {expect_total}"
    counts: dict[str, int] = {}
    for word, count in records:
        counts[word] = max(count, counts.get(word, 0))
    return counts


@pytest.fixture(scope="module")
def pipeline_mesh() -> Iterator[Mesh]:
    mesh = start_mesh("examples.pipeline:topology", 2)
    yield mesh
    assert mesh.stop() == [0, 0]


def test_publish_then_fetch_counts_exactly(pipeline_mesh: Mesh):
    expected = Counter(w for line in LINES for w in line.split())
    half = len(LINES) // 2
    acks = publish(stubs(pipeline_mesh)[0], [[line] for line in LINES[:half]], batch_id="b1")
    acks += publish(stubs(pipeline_mesh)[1], [[line] for line in LINES[half:]], batch_id="b2")
    assert sum(a.accepted for a in acks) == len(LINES) and not any(a.duplicate for a in acks)
    assert final_counts(pipeline_mesh, sum(expected.values())) == dict(expected)


def test_offsets_schema_commit_and_out_of_range(pipeline_mesh: Mesh):
    stub = stubs(pipeline_mesh)[0]
    offsets = stub.Offsets(gateway_pb2.OffsetsRequest(export="counts"))
    assert offsets.total_partitions == 2 and list(offsets.fields) == ["word", "count"]
    assert offsets.schema == "word STRING, count BIGINT"
    [p] = offsets.partitions  # one export task per worker
    assert p.end > p.start
    middle = (p.start + p.end) // 2
    assert (
        stub.Commit(gateway_pb2.CommitRequest(export="counts", partition=p.partition, offset=middle)).start
        == middle
    )
    with pytest.raises(grpc.RpcError) as err:
        stub.Fetch(gateway_pb2.FetchRequest(export="counts", partition=p.partition, start_offset=p.start))
    assert err.value.code() == grpc.StatusCode.OUT_OF_RANGE and "committed" in err.value.details()
    got = stub.Fetch(gateway_pb2.FetchRequest(export="counts", partition=p.partition, start_offset=middle,
                                              max_records=3, json=True))  # fmt: skip
    assert got.count == 3 and got.next_offset == middle + 3 and len(json.loads(got.records_json)) == 3


def test_a_retried_request_is_recognised_not_published_twice(pipeline_mesh: Mesh):
    stub = stubs(pipeline_mesh)[0]
    rows = [["retry one two"]] * 10
    first = publish(stub, rows, batch_id="retry", partition=3, per_request=5)
    again = publish(stub, rows, batch_id="retry", partition=3, per_request=5)
    assert [a.accepted for a in first] == [5, 5] and [a.duplicate for a in again] == [True, True]


def test_bad_input(pipeline_mesh: Mesh):
    stub = stubs(pipeline_mesh)[0]

    def publish_raw(component: str, packed: bytes) -> object:
        return list(stub.Publish(iter([gateway_pb2.PublishRequest(component=component, packed=packed)])))

    two_ways = gateway_pb2.PublishRequest(
        component="lines", packed=msgpack.packb([["a"]]), packed_columns=msgpack.packb([["a"]])
    )

    def publish_columns_raw(columns: object) -> object:
        request = gateway_pb2.PublishRequest(component="lines", packed_columns=msgpack.packb(columns))
        return list(stub.Publish(iter([request]), timeout=10))

    cases = [
        (
            lambda: publish_raw("nope", msgpack.packb([["x"]])),
            (grpc.StatusCode.NOT_FOUND, "no IngestSpout 'nope'"),
        ),
        (lambda: publish_raw("lines", b"\xc1"), (grpc.StatusCode.INVALID_ARGUMENT, "not msgpack")),
        (
            lambda: stub.PublishOne(gateway_pb2.PublishOneRequest(component="lines", values_json="{}")),
            (grpc.StatusCode.INVALID_ARGUMENT, "must be a JSON array"),
        ),
        # one value per declared field ("line"): a row the spout could not emit is refused at once
        (
            lambda: stub.PublishOne(
                gateway_pb2.PublishOneRequest(component="lines", values_json="[]"), timeout=5
            ),
            (
                grpc.StatusCode.INVALID_ARGUMENT,
                "row 0 has 0 value(s); IngestSpout 'lines' declares 1 field(s)",
            ),
        ),
        (
            lambda: publish_raw("lines", msgpack.packb([["fine"], ["one", "too many"]])),
            (grpc.StatusCode.INVALID_ARGUMENT, "row 1 has 2 value(s)"),
        ),
        (
            lambda: publish_columns_raw([["a"], ["b"]]),
            (grpc.StatusCode.INVALID_ARGUMENT, "2 column(s); IngestSpout 'lines' declares 1 field(s)"),
        ),
        (
            lambda: publish_columns_raw([]),
            (grpc.StatusCode.INVALID_ARGUMENT, "0 column(s); IngestSpout 'lines' declares 1 field(s)"),
        ),
        (
            lambda: list(stub.Publish(iter([two_ways]), timeout=10)),
            (grpc.StatusCode.INVALID_ARGUMENT, "give the rows one way"),
        ),
        (
            lambda: publish_columns_raw(["not a column"]),
            (grpc.StatusCode.INVALID_ARGUMENT, "packed_columns must be an array of arrays"),
        ),
        (
            lambda: publish_columns_raw({"line": ["a"]}),
            (grpc.StatusCode.INVALID_ARGUMENT, "packed_columns must be an array of arrays"),
        ),
        (
            lambda: stub.Fetch(gateway_pb2.FetchRequest(export="counts", partition=9)),
            (grpc.StatusCode.NOT_FOUND, "partition 9"),
        ),
        (
            lambda: stub.Offsets(gateway_pb2.OffsetsRequest(export="nope")),
            (grpc.StatusCode.NOT_FOUND, "no ExportBolt"),
        ),
    ]
    for call, expected in cases:
        with pytest.raises(grpc.RpcError) as err:
            call()
        assert (err.value.code(), expected[1] in err.value.details()) == (expected[0], True), (
            err.value.details()
        )


def test_full_export_log_applies_backpressure(tmp_path: Path):
    import os

    os.environ["PIPELINE_RETENTION"] = "40"  # read by examples.pipeline in the worker processes
    try:
        mesh = start_mesh("examples.pipeline:topology", 1)
    finally:
        del os.environ["PIPELINE_RETENTION"]
    try:
        stub = stubs(mesh)[0]
        publish(stub, [[f"w{i}"] for i in range(300)], per_request=50)

        def held() -> list[tuple[int, int]]:
            """(start, end) of each export partition."""
            parts = stub.Offsets(gateway_pb2.OffsetsRequest(export="counts")).partitions
            return sorted((p.start, p.end) for p in parts)

        # Held at the retention: both logs full with the first 40 records each, nothing dropped
        # from the front, and the remaining 220 wait upstream.
        full = [(0, 40), (0, 40)]
        eventually(lambda: held() == full, message=lambda: f"offsets {held()}")
        # deliberate: with 220 records ready upstream, a log that dropped or grew instead of
        # holding would move within this window
        time.sleep(0.5)
        assert held() == full

        def commit_all() -> int:
            """Commit everything held (the consumer keeps up now); the total exported so far."""
            parts = stub.Offsets(gateway_pb2.OffsetsRequest(export="counts")).partitions
            for p in parts:
                stub.Commit(gateway_pb2.CommitRequest(export="counts", partition=p.partition, offset=p.end))
            return sum(p.end for p in parts)

        eventually(lambda: commit_all() == 300, timeout=20, interval=0.1)
    finally:
        assert mesh.stop() == [0]


def test_grpcurl_publish_one_and_offsets(pipeline_mesh: Mesh):
    import shutil
    import subprocess
    import sys

    grpcurl = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")
    address = pipeline_mesh.address(1)  # worker 1 runs an ingest task and an export task
    out = subprocess.run(
        [grpcurl, "-plaintext", "-d", '{"component": "lines", "values_json": "[\\"grpcurl says hello\\"]"}',
         address, "tuplemesh.v1.Gateway/PublishOne"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"accepted": "1"}  # uint64 is a string in proto3 JSON
    out = subprocess.run(
        [grpcurl, "-plaintext", "-d", '{"export": "counts"}', address, "tuplemesh.v1.Gateway/Offsets"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    answer = json.loads(out.stdout)
    assert answer["total_partitions"] == 2 and answer["schema"] == "word STRING, count BIGINT"


def fetcher(mesh: Mesh, batch_id: str) -> tuple[Any, Any, Callable[..., gateway_pb2.FetchResponse]]:
    """Publish some lines, then: worker 0's stub, its counts partition (more than 12 records),
    and a Fetch of that partition from its start with the request fields given."""
    publish(stubs(mesh)[0], [[line] for line in LINES[:30]], batch_id=batch_id)
    eventually(lambda: len(exported_records(mesh)) > 0)
    stub = stubs(mesh)[0]
    [p] = stub.Offsets(gateway_pb2.OffsetsRequest(export="counts")).partitions
    assert p.end - p.start > 12

    def fetch(**options: object) -> gateway_pb2.FetchResponse:
        request = gateway_pb2.FetchRequest(export="counts", partition=p.partition, start_offset=p.start)
        request.MergeFrom(gateway_pb2.FetchRequest(**options))  # type: ignore[arg-type]
        return stub.Fetch(request)

    return stub, p, fetch


def test_fetch_as_columns_answers_the_same_records_as_rows(pipeline_mesh: Mesh):
    stub, p, fetch = fetcher(pipeline_mesh, "columns")

    rows, columns = fetch(max_records=12), fetch(max_records=12, columns=True)
    assert (columns.count, columns.next_offset, columns.packed) == (12, p.start + 12, b"")
    words, counts = msgpack.unpackb(columns.packed_columns)
    assert [list(r) for r in zip(words, counts, strict=True)] == msgpack.unpackb(rows.packed)
    # a byte budget cuts both answers at the same record
    one = len(msgpack.packb(msgpack.unpackb(rows.packed)[0]))
    rows, columns = (
        fetch(max_records=12, max_bytes=3 * one),
        fetch(max_records=12, max_bytes=3 * one, columns=True),
    )
    assert 1 <= rows.count < 12 and columns.count == rows.count and columns.next_offset == rows.next_offset
    assert [len(c) for c in msgpack.unpackb(columns.packed_columns)] == [rows.count, rows.count]
    # JSON for grpcurl beside the columns
    both = fetch(max_records=5, columns=True, json=True)
    assert both.count == 5 and json.loads(both.records_json) == [list(r) for r in zip(*msgpack.unpackb(
        both.packed_columns), strict=True)]  # fmt: skip
    # nothing left to read: no columns at all
    empty = stub.Fetch(gateway_pb2.FetchRequest(export="counts", partition=p.partition, start_offset=p.end,
                                                columns=True))  # fmt: skip
    assert (empty.count, msgpack.unpackb(empty.packed_columns), empty.next_offset) == (0, [], p.end)


def test_rows_published_as_columns_count_exactly_and_a_retry_is_recognised(pipeline_mesh: Mesh):
    before = Counter(word for word, _ in exported_records(pipeline_mesh))
    total_before = len(exported_records(pipeline_mesh))
    stub = stubs(pipeline_mesh)[1]
    lines = ["columns in one", "columns in two and three"] * 10
    requests = [
        gateway_pb2.PublishRequest(
            component="lines", packed_columns=msgpack.packb([lines[i : i + 8]]), batch_id="cols", sequence=n
        )
        for n, i in enumerate(range(0, len(lines), 8), start=1)
    ]
    acks = list(stub.Publish(iter(requests), timeout=30))
    assert [(a.sequence, a.accepted, a.duplicate) for a in acks] == [
        (1, 8, False),
        (2, 8, False),
        (3, 4, False),
    ]
    again = list(stub.Publish(iter(requests), timeout=30))
    assert [(a.accepted, a.duplicate) for a in again] == [(0, True)] * 3
    words = Counter(w for line in lines for w in line.split())
    records = exported_records(pipeline_mesh)
    eventually(lambda: len(exported_records(pipeline_mesh)) == total_before + sum(words.values()), 30, 0.1)
    records = exported_records(pipeline_mesh)
    assert Counter(word for word, _ in records) - before == words
    with pytest.raises(grpc.RpcError) as err:  # columns of unequal lengths
        list(stub.Publish(iter([gateway_pb2.PublishRequest(component="lines", packed_columns=msgpack.packb(
            [["a", "b"], ["c"]]))]), timeout=10))  # fmt: skip
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_fetch_in_arrow_answers_the_columns_as_an_arrow_record_batch(pipeline_mesh: Mesh):
    import pyarrow as pa

    _, p, fetch = fetcher(pipeline_mesh, "arrow")

    rows, arrow = fetch(max_records=12), fetch(max_records=12, columns=True, arrow=True)
    assert (arrow.count, arrow.next_offset, arrow.packed, arrow.packed_columns) == (
        12,
        p.start + 12,
        b"",
        b"",
    )
    batch = pa.ipc.open_stream(arrow.arrow_ipc).read_next_batch()
    assert batch.schema.names == ["word", "count"] and batch.schema.types == [pa.string(), pa.int64()]
    assert [[r["word"], r["count"]] for r in batch.to_pylist()] == msgpack.unpackb(rows.packed)
    one = len(msgpack.packb(msgpack.unpackb(rows.packed)[0]))
    cut = fetch(max_records=12, max_bytes=4 * one, columns=True, arrow=True)
    rows_cut = fetch(max_records=12, max_bytes=4 * one)
    assert 1 <= cut.count < 12 and (cut.count, cut.next_offset) == (rows_cut.count, rows_cut.next_offset)
    assert pa.ipc.open_stream(cut.arrow_ipc).read_next_batch().num_rows == cut.count
