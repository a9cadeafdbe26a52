"""A worker's gRPC server is neither starved nor crashed by its clients (one worker process).

Idle streams of one kind (health watchers, half-open Transfer streams) must not take the calls
of another kind; out-of-range numbers, NaN/inf and deeply nested JSON get INVALID_ARGUMENT
instead of crashing their handler (UNKNOWN); a Fetch never answers more than a message can hold.
"""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Iterator

import grpc
import msgpack
import pytest
from grpc_health.v1 import health_pb2

from tests.helpers import eventually
from tests.transport.raw_sender import epoch_metadata
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.launcher import is_serving
from tuplemesh.serialization import MsgpackSerializer
from tuplemesh.v1 import admin_pb2, gateway_pb2, gateway_pb2_grpc, messages_pb2, transfer_pb2_grpc


@pytest.fixture(scope="module")
def mesh() -> Iterator[Mesh]:
    mesh = start_mesh("examples.pipeline:topology", 1)
    yield mesh
    assert mesh.stop() == [0]


def metric(mesh: Mesh, name: str, kind: str) -> int:
    text = urllib.request.urlopen(mesh.metrics_url(), timeout=5).read().decode()
    found = re.search(rf'{name}\{{class="{kind}",worker="0"\}} (\S+)', text)
    assert found is not None, f"{name}{{class={kind}}} not exported"
    return int(float(found.group(1)))


def _exported(mesh: Mesh) -> bool:
    text = urllib.request.urlopen(mesh.metrics_url(), timeout=5).read().decode()
    return "tuplemesh_rpc_in_use" in text


def code_of(call) -> grpc.StatusCode:  # type: ignore[no-untyped-def]
    try:
        result = call()
        if isinstance(result, Iterator):
            list(result)
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_forty_idle_health_watchers_leave_health_checks_and_calls_answered(mesh: Mesh):
    refused_before = metric(mesh, "tuplemesh_rpc_refused_total", "health") if _exported(mesh) else 0
    channel = grpc.insecure_channel(mesh.address())
    watch = channel.unary_stream(
        "/grpc.health.v1.Health/Watch",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )
    calls = [watch(health_pb2.HealthCheckRequest(service="")) for _ in range(40)]
    try:
        answers = []
        for call in calls:
            try:
                answers.append(next(call).status)
            except grpc.RpcError as err:
                answers.append(err.code())
        assert is_serving(mesh.health())
        assert mesh.admin().GetStatus(admin_pb2.GetStatusRequest(), timeout=5).worker == 0
        # server.health.streams.max (16) watch at once; the others are refused on purpose
        assert answers.count(health_pb2.HealthCheckResponse.SERVING) == 16
        assert answers.count(grpc.StatusCode.RESOURCE_EXHAUSTED) == 24
        assert metric(mesh, "tuplemesh_rpc_in_use", "health") == 16
        assert metric(mesh, "tuplemesh_rpc_refused_total", "health") == refused_before + 24
    finally:
        for call in calls:
            call.cancel()
    eventually(lambda: metric(mesh, "tuplemesh_rpc_in_use", "health") == 0, message="watchers gone")


def test_forty_half_open_transfer_streams_leave_client_calls_answered(mesh: Mesh):
    release = threading.Event()

    def silent() -> Iterator[messages_pb2.TransferBatch]:
        release.wait()  # opens the stream and never sends a batch until released
        return
        yield

    stub = transfer_pb2_grpc.TransferStub(grpc.insecure_channel(mesh.address()))
    calls = [stub.Stream(silent()) for _ in range(40)]
    try:
        eventually(lambda: metric(mesh, "tuplemesh_rpc_in_use", "peer") == 40, message="40 streams open")
        assert mesh.admin().GetStatus(admin_pb2.GetStatusRequest(), timeout=5).worker == 0
        assert is_serving(mesh.health())
    finally:
        release.set()
        for call in calls:
            call.cancel()
    eventually(lambda: metric(mesh, "tuplemesh_rpc_in_use", "peer") == 0, message="streams closed")


def _split_executed(mesh: Mesh) -> int:
    status = mesh.admin().GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    return sum(e.executed for e in status.executors if e.component == "split")


def test_a_task_id_beyond_32_bits_is_invalid_and_the_streams_earlier_batches_are_kept(mesh: Mesh):
    admin = mesh.admin()
    assignment = admin.GetAssignment(admin_pb2.GetAssignmentRequest())
    split_task = next(e.tasks[0] for e in assignment.executors if e.component == "split")
    from examples.pipeline import topology

    good = MsgpackSerializer().serialize(1, topology.stream_ids()[("lines", "default")], ["kept"])
    before = _split_executed(mesh)

    def batch(sequence: int, items: list[tuple[int, bytes]]) -> messages_pb2.TransferBatch:
        return messages_pb2.TransferBatch(
            topology_id="pipeline", sender=0, session=424242, sequence=sequence, ack_requested=True,
            packed=msgpack.packb(items, use_bin_type=True),
        )  # fmt: skip

    stub = transfer_pb2_grpc.TransferStub(grpc.insecure_channel(mesh.address()))
    epoch = epoch_metadata(mesh.ports[0])  # a member names its epoch
    call = stub.Stream(
        iter([batch(1, [(split_task, good)]), batch(2, [(split_task, good), (2**31, good)])]), metadata=epoch
    )
    acks = []
    with pytest.raises(grpc.RpcError) as err:
        for ack in call:
            acks.append(ack.sequence)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "task 2147483648 is out of range" in err.value.details()
    assert acks == [1]
    eventually(lambda: _split_executed(mesh) == before + 1, message="batch 1 executed")
    assert _split_executed(mesh) == before + 1  # batch 1 kept; batch 2 refused whole
    assert is_serving(mesh.health())


@pytest.mark.parametrize("interval", [float("nan"), float("inf"), -float("inf"), 1e308, 0.01])
def test_watch_stats_intervals_out_of_range_are_invalid(mesh: Mesh, interval: float):
    request = admin_pb2.WatchStatsRequest(interval_seconds=interval)
    with pytest.raises(grpc.RpcError) as err:
        next(mesh.admin().WatchStats(request, timeout=5))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "interval_seconds must be in [0.05, 86400]" in err.value.details()


DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_json_is_invalid_everywhere(mesh: Mesh):
    gateway = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(mesh.address()))
    calls = {
        "PublishOne": lambda: gateway.PublishOne(
            gateway_pb2.PublishOneRequest(component="lines", values_json=DEEP), timeout=10
        ),
        "Publish": lambda: list(
            gateway.Publish(
                iter([gateway_pb2.PublishRequest(component="lines", rows_json=[DEEP])]), timeout=10
            )
        ),
        "Emit": lambda: mesh.admin().Emit(
            admin_pb2.EmitRequest(component="split", values_json=DEEP), timeout=10
        ),
    }
    codes = {name: code_of(call) for name, call in calls.items()}
    assert codes == {name: grpc.StatusCode.INVALID_ARGUMENT for name in calls}
    assert is_serving(mesh.health())


def test_two_records_of_15_mib_are_fetched_one_at_a_time():
    mesh = start_mesh("tests.fault.topologies:blobs", 1)
    try:
        options = [
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
        ]
        gateway = gateway_pb2_grpc.GatewayStub(grpc.insecure_channel(mesh.address(), options=options))
        blobs = ["a" * (15 * 1024 * 1024), "b" * (15 * 1024 * 1024)]
        for blob in blobs:
            one = gateway_pb2.PublishOneRequest(component="blobs", values_json=f'["{blob}"]')
            assert gateway.PublishOne(one, timeout=30).accepted == 1

        def offsets() -> int:
            answer = gateway.Offsets(gateway_pb2.OffsetsRequest(export="out"), timeout=10)
            return answer.partitions[0].end

        eventually(lambda: offsets() == 2, timeout=30, message="both records exported")
        fetched, offset = [], 0
        while offset < 2:
            got = gateway.Fetch(gateway_pb2.FetchRequest(export="out", start_offset=offset), timeout=30)
            assert got.count == 1  # the default budget (8 MiB) holds one; at least one is returned
            fetched += msgpack.unpackb(got.packed, raw=False)
            offset = got.next_offset
        assert [values[0] for values in fetched] == blobs
        assert is_serving(mesh.health())
    finally:
        assert mesh.stop() == [0]


def test_a_silent_transfer_stream_is_ended_and_idle_peer_links_are_not():
    mesh = start_mesh(
        "examples.pipeline:topology", 2, env={"TUPLEMESH_SERVER_STREAM_IDLE_TIMEOUT_MS": "1000"}
    )
    try:
        release = threading.Event()

        def silent() -> Iterator[messages_pb2.TransferBatch]:
            release.wait()
            return
            yield

        stub = transfer_pb2_grpc.TransferStub(grpc.insecure_channel(mesh.address()))
        with pytest.raises(grpc.RpcError) as err:
            list(stub.Stream(silent(), timeout=30))
        release.set()
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "no message for 1 s (server.stream.idle.timeout.ms)" in err.value.details()
        # worker 1's stream to worker 0 carried no tuple all that time either, but its heartbeats
        text = urllib.request.urlopen(mesh.metrics_url(), timeout=5).read().decode()
        assert 'tuplemesh_rpc_idle_ended_total{worker="0"} 1.0' in text
        assert metric(mesh, "tuplemesh_rpc_in_use", "peer") == 1
        assert is_serving(mesh.health()) and is_serving(mesh.health(1))
    finally:
        assert mesh.stop() == [0, 0]


def rpc_errors(mesh: Mesh, method: str, code: str) -> int:
    text = urllib.request.urlopen(mesh.metrics_url(), timeout=5).read().decode()
    found = re.search(
        rf'tuplemesh_rpc_errors_total\{{code="{code}",method="{re.escape(method)}",worker="0"\}} (\S+)', text
    )
    return int(float(found.group(1))) if found else 0


def test_oversize_requests_are_refused_and_counted(mesh: Mesh):
    big = 17 * 1024 * 1024  # above messaging.max.message.bytes (16 MiB) and its framing room
    emit, stream = "/tuplemesh.v1.Admin/Emit", "/tuplemesh.v1.Transfer/Stream"
    before = (rpc_errors(mesh, emit, "RESOURCE_EXHAUSTED"), rpc_errors(mesh, stream, "RESOURCE_EXHAUSTED"))
    request = admin_pb2.EmitRequest(component="split", values_json='["' + "x" * big + '"]')
    batch = messages_pb2.TransferBatch(
        topology_id="pipeline", sender=5, session=6, sequence=1, packed=b"x" * big
    )
    stub = transfer_pb2_grpc.TransferStub(grpc.insecure_channel(mesh.address()))
    for call in (
        lambda: mesh.admin().Emit(request, timeout=30),
        lambda: stub.Stream(iter([batch]), timeout=30),
    ):
        with pytest.raises(grpc.RpcError) as err:
            result = call()
            if isinstance(result, Iterator):
                list(result)
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "above this worker's limit of 16842752 (messaging.max.message.bytes" in err.value.details()
    after = (rpc_errors(mesh, emit, "RESOURCE_EXHAUSTED"), rpc_errors(mesh, stream, "RESOURCE_EXHAUSTED"))
    assert after == (before[0] + 1, before[1] + 1)
    assert is_serving(mesh.health())
