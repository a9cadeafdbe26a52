"""`GatewayClient` against real worker processes: publish, read, commit, epochs, retries, errors."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import grpc
import msgpack
import pytest

from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.client import (
    EpochMismatchError,
    GatewayClient,
    GatewayError,
    PublishResult,
    open_channel,
)
from tuplemesh.netutil import free_ports
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc

ACKING = {"TUPLEMESH_TOPOLOGY_ACKER_EXECUTORS": "2"}


def targets(mesh: Mesh) -> list[str]:
    return [mesh.address(i) for i in range(len(mesh.ports))]


def held(client: GatewayClient, export: str) -> int:
    """Records the export's logs hold now."""
    return sum(p.end - p.start for p in client.offsets(export).partitions.values())


@pytest.fixture(scope="module")
def echo_mesh() -> Iterator[Mesh]:
    mesh = start_mesh("tests.spark.topologies:echo", 2)
    yield mesh
    assert mesh.stop() == [0, 0]


@pytest.fixture(scope="module")
def flaky_mesh() -> Iterator[Mesh]:
    mesh = start_mesh("tests.client.topologies:flaky_numbers", 2, env=ACKING)
    yield mesh
    assert mesh.stop() == [0, 0]


def test_publish_in_windowed_batches_then_read_every_record_once(echo_mesh: Mesh):
    with GatewayClient(targets(echo_mesh), batch_size=40, window=4) as client:
        ends = {p: info.end for p, info in client.offsets("echo").partitions.items()}
        rows = [[f"round-trip-{i:04d}"] for i in range(500)]
        result = client.publish("lines", rows, batch_id="round-trip")
        assert result == PublishResult(500, 500, 0, 1, echo_mesh.address(0))
        eventually(
            lambda: sum(p.end for p in client.offsets("echo").partitions.values()) == sum(ends.values()) + 500
        )
        records = list(client.records("echo", start=ends, max_records=64))
        assert sorted(r.values for r in records) == rows  # each row once, none lost
        [(partition, end)] = ends.items()  # the echo export has one partition
        assert [r.offset for r in records] == list(range(end, end + 500))  # consecutive offsets
        assert {(r.partition, r.epoch) for r in records} == {
            (partition, client.offsets("echo").partitions[partition].epoch)
        }


def test_publishing_a_batch_again_publishes_nothing_twice(echo_mesh: Mesh):
    with GatewayClient(targets(echo_mesh), batch_size=10) as client:
        ends = {p: info.end for p, info in client.offsets("echo").partitions.items()}
        rows = [[f"again-{i}"] for i in range(35)]

        def exported() -> Counter[str]:
            """This test's rows in the export log since it started (other tests' rows are there too)."""
            values = (r.values[0] for r in client.records("echo", start=ends, max_records=64))
            return Counter(v for v in values if v.startswith("again-"))

        first = client.publish("lines", rows, batch_id="again", partition=1)
        eventually(lambda: len(exported()) == 35, message=lambda: f"exported {sorted(exported())}")
        again = client.publish("lines", rows, batch_id="again", partition=1)
        assert (first.published, first.duplicates) == (35, 0)
        assert (again.rows, again.published, again.duplicates) == (35, 0, 4)  # 4 requests recognised
        # deliberate: a republished row would reach the export log within this window
        time.sleep(0.5)
        assert exported() == Counter(row[0] for row in rows)  # each row exactly once


def test_fetch_and_commit_check_the_epoch(echo_mesh: Mesh):
    with GatewayClient(targets(echo_mesh)) as client:
        client.publish("lines", [[f"epoch-{i}"] for i in range(10)])
        eventually(lambda: held(client, "echo") >= 10)
        [info] = client.offsets("echo").partitions.values()
        got = client.fetch("echo", info.partition, info.start, max_records=3, epoch=info.epoch)
        assert (len(got.records), got.next_offset, got.epoch) == (3, info.start + 3, info.epoch)
        stale = info.epoch + 1
        with pytest.raises(EpochMismatchError) as err:
            client.fetch("echo", info.partition, info.start, epoch=stale)
        assert (err.value.reader_epoch, err.value.log_epoch) == (stale, info.epoch)
        assert f"epoch {stale}" in str(err.value) and f"epoch {info.epoch}" in str(err.value)
        with pytest.raises(EpochMismatchError):
            client.commit("echo", info.partition, info.end, epoch=stale)
        assert client.offsets("echo").partitions[info.partition].start == info.start  # not truncated
        assert client.commit("echo", info.partition, info.start + 2, epoch=info.epoch) == info.start + 2
        with pytest.raises(GatewayError) as below:
            client.fetch("echo", info.partition, info.start)
        assert below.value.code == "OUT_OF_RANGE" and "below the retained start" in str(below.value)


def test_errors_name_the_worker_the_call_and_the_status(echo_mesh: Mesh):
    with GatewayClient(targets(echo_mesh)) as client:
        with pytest.raises(GatewayError) as err:
            client.publish("nope", [["x"]])
        assert err.value.code == "NOT_FOUND" and "no IngestSpout 'nope'" in str(err.value)
        with pytest.raises(GatewayError, match=r"no worker of .* runs an ExportBolt 'nope'"):
            client.offsets("nope")
    [port] = free_ports(1)
    with GatewayClient(f"127.0.0.1:{port}", retries=1, backoff=0.01, timeout=2) as nobody:
        with pytest.raises(GatewayError) as err:
            nobody.publish("lines", [["x"]])
        assert err.value.code == "UNAVAILABLE" and f"publishing to 127.0.0.1:{port} failed" in str(err.value)
        with pytest.raises(GatewayError) as err:
            nobody.offsets("echo")
        assert err.value.code == "UNAVAILABLE" and f"Offsets from 127.0.0.1:{port}" in str(err.value)
    for bad in ({"timeout": 0}, {"batch_size": 0}, {"window": 0}, {"retries": -1}):
        with pytest.raises(ValueError, match=f"GatewayClient {next(iter(bad))} must be"):
            GatewayClient("a:1", **bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one target"):
        GatewayClient(" , ")


def test_a_restarted_log_is_never_read_with_the_old_offsets(tmp_path: object):
    mesh = start_mesh("tests.spark.topologies:echo", 1)
    try:
        with GatewayClient(targets(mesh)) as client:
            client.publish("lines", [[f"old-{i}"] for i in range(30)])
            eventually(lambda: held(client, "echo") == 30)
            before = list(client.records("echo"))
            epoch, checkpoint = before[-1].epoch, before[-1].offset + 1  # what a reader would keep
            assert checkpoint == 30
            mesh.kill(0)
            mesh.restart(0)
            client.publish("lines", [[f"new-{i}"] for i in range(5)])
            eventually(lambda: held(client, "echo") == 5)
            [info] = client.offsets("echo").partitions.values()
            assert (info.start, info.end) == (0, 5) and info.epoch != epoch  # restarted at 0, below 30
            # without the epoch the old offset silently reads nothing: the 5 new records would be skipped
            assert client.fetch("echo", info.partition, checkpoint).records == []
            with pytest.raises(EpochMismatchError) as err:
                client.fetch("echo", info.partition, checkpoint, epoch=epoch)
            assert (err.value.reader_epoch, err.value.log_epoch) == (epoch, info.epoch)
            assert [r.values for r in client.records("echo")] == [[f"new-{i}"] for i in range(5)]
    finally:
        assert mesh.stop() == [0]


def test_with_acking_publish_answers_once_trees_complete_and_a_failed_row_is_an_error(flaky_mesh: Mesh):
    """The raw protocol: a request with failing rows is ABORTED; its retry republishes only those."""
    stub = gateway_pb2_grpc.GatewayStub(open_channel(flaky_mesh.address(0)))
    numbers = list(range(0, 50))
    request = gateway_pb2.PublishRequest(
        component="numbers", packed=msgpack.packb([[n] for n in numbers]), batch_id="raw", sequence=1
    )
    with pytest.raises(grpc.RpcError) as err:
        list(stub.Publish(iter([request]), timeout=30))
    failing = [n for n in numbers if n % 7 == 0]
    assert err.value.code() == grpc.StatusCode.ABORTED
    assert f"{len(failing)} row(s) of request 1 failed" in err.value.details()
    [ack] = list(stub.Publish(iter([request]), timeout=30))
    assert (ack.sequence, ack.accepted, ack.duplicate) == (1, len(failing), False)
    [again] = list(stub.Publish(iter([request]), timeout=30))
    assert (again.accepted, again.duplicate) == (0, True)
    with GatewayClient(targets(flaky_mesh)) as client:
        # answered only once held: every record is already exported, no waiting needed
        seen = Counter(r.values[0] for r in client.records("numbered"))
    assert seen == Counter(numbers)  # each number's effect exactly once


def test_the_client_retries_failed_rows_to_exactly_once_at_a_numbered_sink(flaky_mesh: Mesh):
    numbers = range(1_000, 3_000)
    with GatewayClient(targets(flaky_mesh), batch_size=100, window=4, backoff=0.05) as client:
        result = client.publish("numbers", ([n] for n in numbers), batch_id="retried", partition=1)
        failing = sum(1 for n in numbers if n % 7 == 0)
        assert result.rows == 2_000 and result.attempts > 1
        # every request had a failing row, so no first attempt was answered OK; each retry
        # published exactly the rows that had failed, none of the held ones again
        assert (result.published, result.duplicates) == (failing, 0)
        seen = Counter(r.values[0] for r in client.records("numbered") if r.values[0] >= 1_000)
    assert seen == Counter(numbers)


def test_a_publish_that_makes_no_progress_times_out():
    mesh = start_mesh("tests.client.topologies:stuck_numbers", 1, env=ACKING)
    try:
        with GatewayClient(targets(mesh), timeout=1.0, retries=0) as client:
            started = time.monotonic()
            with pytest.raises(GatewayError) as err:
                client.publish("numbers", [[1], [2]])
            assert err.value.code == "DEADLINE_EXCEEDED" and "no answer for 1.0 s" in str(err.value)
            assert time.monotonic() - started < 5
    finally:
        assert mesh.stop() == [0]


def test_fetch_columns_reads_the_records_of_fetch_as_columns(echo_mesh: Mesh):
    with GatewayClient(targets(echo_mesh)) as client:
        ends = {p: info.end for p, info in client.offsets("echo").partitions.items()}
        client.publish("lines", [[f"column-{i:03d}"] for i in range(200)], batch_id="columns")
        eventually(
            lambda: sum(p.end for p in client.offsets("echo").partitions.values()) == sum(ends.values()) + 200
        )
        seen = []
        for partition, info in client.offsets("echo").partitions.items():
            rows = client.fetch("echo", partition, ends[partition], max_records=500, epoch=info.epoch)
            got = client.fetch_columns("echo", partition, ends[partition], max_records=500, epoch=info.epoch)
            assert (got.partition, got.epoch, got.offset) == (partition, info.epoch, ends[partition])
            assert (got.count, got.next_offset, got.end) == (len(rows.records), rows.next_offset, rows.end)
            assert got.columns == ([[r[0] for r in rows.records]] if rows.records else [])
            seen.extend(got.columns[0] if got.count else [])
    assert sorted(seen) == [f"column-{i:03d}" for i in range(200)]


def test_publish_columns_sends_batches_of_columns_cut_to_the_batch_size(echo_mesh: Mesh):
    import pyarrow as pa

    with GatewayClient(targets(echo_mesh), batch_size=30, window=2) as client:
        ends = {p: info.end for p, info in client.offsets("echo").partitions.items()}
        values = [f"cols-{i:03d}" for i in range(75)]
        batches = [[values[:70]], [[]], [pa.array(values[70:])]]  # lists, an empty batch, an Arrow array
        result = client.publish_columns("lines", iter(batches), batch_id="as-columns")
        assert (result.rows, result.published, result.duplicates) == (75, 75, 0)
        eventually(
            lambda: sum(p.end for p in client.offsets("echo").partitions.values()) == sum(ends.values()) + 75
        )
        seen = [r.values[0] for r in client.records("echo", start=ends)]
        assert sorted(seen) == values  # the Arrow array's values as strings, not as scalars' reprs
        # the same rows batched otherwise make the same requests (30, 30 and 15 rows): all recognised
        again = client.publish_columns("lines", [[values[:10]], [values[10:]]], batch_id="as-columns")
        assert (again.rows, again.published, again.duplicates) == (75, 0, 3)
        with pytest.raises(ValueError, match="one length"):
            client.publish_columns("lines", [[["a", "b"], ["c"]]])
        with pytest.raises(ValueError, match="not none"):
            client.publish_columns("lines", [[]])
        with pytest.raises(ValueError, match="a batch of 2 columns after batches of 1"):
            client.publish_columns("lines", [[["a"]], [["b"], ["c"]]])
        with pytest.raises(TypeError):  # a row that is no sequence reaches the caller, not gRPC's thread
            client.publish("lines", [["fine"], 5])  # type: ignore[list-item]


def test_fetch_columns_from_a_worker_that_answers_rows_makes_the_columns_itself(
    monkeypatch: pytest.MonkeyPatch,
):
    """A worker from before columnar fetches ignores the request's ``columns`` and answers rows."""
    client = GatewayClient(["127.0.0.1:1"])
    rows_only = gateway_pb2.FetchResponse(
        packed=msgpack.packb([["cow", 2], ["fox", 1]]), count=2, next_offset=12, end_offset=20, epoch=7
    )
    monkeypatch.setattr(client, "_fetch", lambda *args, **kwargs: rows_only)
    got = client.fetch_columns("counts", 0, 10, epoch=7)
    assert (got.columns, got.count, got.next_offset, got.end, got.epoch) == (
        [["cow", "fox"], [2, 1]],
        2,
        12,
        20,
        7,
    )
    client.close()


def test_publish_columns_with_acking_republishes_only_the_failed_rows(flaky_mesh: Mesh):
    numbers = list(range(5_000, 5_600))
    with GatewayClient(targets(flaky_mesh), batch_size=100, window=4, backoff=0.05) as client:
        result = client.publish_columns(
            "numbers", [[numbers[:250]], [numbers[250:]]], batch_id="columns", partition=2
        )
        failing = sum(1 for n in numbers if n % 7 == 0)
        assert result.rows == 600 and result.attempts > 1
        assert (result.published, result.duplicates) == (failing, 0)
        seen = Counter(r.values[0] for r in client.records("numbered") if 5_000 <= r.values[0] < 5_600)
    assert seen == Counter(numbers)  # each number's effect exactly once


def test_fetch_arrow_gives_a_batch_of_the_schema_and_falls_back_to_columns_arrow_cannot_hold(echo_mesh: Mesh):
    import pyarrow as pa

    schema = pa.schema([("line", pa.string())])
    with GatewayClient(targets(echo_mesh)) as client:
        ends = {p: info.end for p, info in client.offsets("echo").partitions.items()}
        client.publish("lines", [[f"arrow-{i}"] for i in range(20)], batch_id="arrow")
        eventually(
            lambda: sum(p.end for p in client.offsets("echo").partitions.values()) == sum(ends.values()) + 20
        )
        [(partition, info)] = [
            (p, i) for p, i in client.offsets("echo").partitions.items() if i.end > ends[p]
        ]
        got = client.fetch_arrow("echo", partition, ends[partition], schema, epoch=info.epoch)
        assert got.batch.schema == schema and got.count == 20 and got.next_offset == ends[partition] + 20
        assert got.batch.column(0).to_pylist() == [f"arrow-{i}" for i in range(20)]
        # a column mixing numbers and strings makes no Arrow array on the worker: msgpack columns
        client.publish("lines", [[7], ["seven"]], batch_id="mixed")
        eventually(lambda: client.offsets("echo").partitions[partition].end == ends[partition] + 22)
        request = gateway_pb2.FetchRequest(
            export="echo", partition=partition, start_offset=ends[partition] + 20, columns=True, arrow=True
        )
        answers = []
        for address in targets(echo_mesh):  # the raw answer, from the worker holding the partition
            try:
                answers.append(gateway_pb2_grpc.GatewayStub(open_channel(address)).Fetch(request, timeout=10))
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.NOT_FOUND  # the partition is on the other worker
        [answer] = answers
        assert (answer.count, answer.arrow_ipc, msgpack.unpackb(answer.packed_columns)) == (
            2,
            b"",
            [[7, "seven"]],
        )


def test_fetch_arrow_from_a_worker_that_answers_msgpack_columns(monkeypatch: pytest.MonkeyPatch):
    import pyarrow as pa

    client = GatewayClient(["127.0.0.1:1"])
    answer = gateway_pb2.FetchResponse(
        packed_columns=msgpack.packb([["cow", "fox"], [2, None]]),
        count=2,
        next_offset=12,
        end_offset=20,
        epoch=7,
    )
    monkeypatch.setattr(client, "_fetch", lambda *args, **kwargs: answer)
    schema = pa.schema([("word", pa.string()), ("count", pa.int64())])
    got = client.fetch_arrow("counts", 0, 10, schema, epoch=7)
    assert got.batch.schema == schema and got.batch.to_pylist() == [
        {"word": "cow", "count": 2},
        {"word": "fox", "count": None},
    ]
    assert (got.count, got.next_offset, got.end, got.epoch) == (2, 12, 20, 7)
    client.close()
