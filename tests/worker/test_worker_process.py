"""A worker process: reflection v1, Transfer bad input, health, Drain and SIGTERM."""

from __future__ import annotations

import signal
import socket
import time

import grpc
import msgpack
import pytest
from grpc_health.v1 import health_pb2

from tests.helpers import eventually
from tests.transport.raw_sender import epoch_metadata
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.serialization import MsgpackSerializer
from tuplemesh.server.reflection import _v1_message_classes
from tuplemesh.v1 import admin_pb2, messages_pb2, transfer_pb2_grpc


def test_reflection_v1_lists_services(wordcount_mesh: Mesh):
    request_cls, _ = _v1_message_classes()
    channel = grpc.insecure_channel(wordcount_mesh.address())
    call = channel.stream_stream(
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=_v1_message_classes()[1].FromString,
    )
    answers = list(call(iter([request_cls(list_services="")]), timeout=5))
    names = {s.name for s in answers[0].list_services_response.service}
    assert {"tuplemesh.v1.Admin", "tuplemesh.v1.Transfer", "grpc.reflection.v1.ServerReflection"} <= names


def transfer(mesh: Mesh, batches: list[messages_pb2.TransferBatch]) -> list[messages_pb2.TransferAck]:
    stub = transfer_pb2_grpc.TransferStub(grpc.insecure_channel(mesh.address()))
    epoch = epoch_metadata(mesh.ports[0])  # a member names its epoch
    return list(stub.Stream(iter(batches), timeout=10, metadata=epoch))


def batch(**fields: object) -> messages_pb2.TransferBatch:
    # sender 0: a worker of any mesh (a receiver takes batches only from its mesh's workers)
    defaults: dict[str, object] = {"topology_id": "wordcount", "sender": 0, "session": 12345, "sequence": 1}
    return messages_pb2.TransferBatch(**{**defaults, **fields})


def test_unknown_topology_is_failed_precondition(wordcount_mesh: Mesh):
    with pytest.raises(grpc.RpcError) as err:
        transfer(wordcount_mesh, [batch(topology_id="other")])
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "batch for topology 'other' from worker 0; this worker runs 'wordcount'" in err.value.details()


@pytest.mark.parametrize(
    ("packed", "message"),
    [
        (b"\xc1\xc1", "not msgpack"),
        (msgpack.packb({"a": 1}), "not an array"),
        (msgpack.packb([[1, 2, 3]]), "not a [task, payload] pair"),
        (msgpack.packb([["x", b"y"]]), "(str, bytes) is not (int or nil, bytes)"),
    ],
)
def test_malformed_batch_is_invalid_argument(wordcount_mesh: Mesh, packed: bytes, message: str):
    with pytest.raises(grpc.RpcError) as err:
        transfer(wordcount_mesh, [batch(packed=packed, session=hash(packed) & 0xFFFF)])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in err.value.details()


def test_over_size_batch_is_resource_exhausted(wordcount_mesh: Mesh):
    # the fixture's workers run with messaging.max.message.bytes: 1 MiB
    with pytest.raises(grpc.RpcError) as err:
        transfer(wordcount_mesh, [batch(packed=msgpack.packb([[1, b"x" * (2 * 1024 * 1024)]]))])
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_unknown_task_is_reported_and_the_rest_delivered(wordcount_mesh: Mesh):
    admin = wordcount_mesh.admin()
    before = admin.GetStatus(admin_pb2.GetStatusRequest())
    assignment = admin.GetAssignment(admin_pb2.GetAssignmentRequest())
    count_task = next(e.tasks[0] for e in assignment.executors if e.component == "count" and e.worker == 0)
    split_task = next(e.tasks[0] for e in assignment.executors if e.component == "split")
    payload = MsgpackSerializer().serialize(split_task, stream_id_of(("split", "default")), ["transfer-word"])
    acks = transfer(
        wordcount_mesh,
        [batch(session=999, packed=msgpack.packb([(4242, b"?"), (count_task, payload)], use_bin_type=True))],
    )
    assert [a.sequence for a in acks] == [1] and list(acks[0].unknown_tasks) == [4242]
    after = admin.GetStatus(admin_pb2.GetStatusRequest(include_reports=True))
    assert after.unknown_task_messages == before.unknown_task_messages + 1
    assert '"transfer-word": 1' in after.reports_json


def stream_id_of(pair: tuple[str, str]) -> int:
    from tests.worker.topologies import small_wordcount

    return small_wordcount.stream_ids()[pair]


def test_resent_batch_is_discarded_as_duplicate(wordcount_mesh: Mesh):
    admin = wordcount_mesh.admin()
    before = admin.GetStatus(admin_pb2.GetStatusRequest()).duplicate_batches
    empty = msgpack.packb([])
    acks = transfer(
        wordcount_mesh,
        [batch(session=4321, sequence=s, packed=empty, ack_requested=True) for s in (1, 2, 2, 1, 3)],
    )
    assert [a.sequence for a in acks] == [1, 2, 2, 2, 3]
    assert acks[-1].duplicates == 2
    assert admin.GetStatus(admin_pb2.GetStatusRequest()).duplicate_batches == before + 2


def test_acks_are_coalesced_unless_requested(wordcount_mesh: Mesh):
    """The receiver acknowledges every credit/4 batches (32/4 = 8), or at once when asked."""
    empty = msgpack.packb([])
    batches = [batch(session=777, sequence=s, packed=empty) for s in range(1, 18)]
    batches[-1].ack_requested = True
    assert [a.sequence for a in transfer(wordcount_mesh, batches)] == [8, 16, 17]


def test_garbage_bytes_on_the_port_do_not_disturb_other_streams(wordcount_mesh: Mesh):
    host, port = wordcount_mesh.address().split(":")
    for junk in (
        b"GET / HTTP/1.1\r\n\r\n",
        bytes(range(256)) * 4,
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\xff\xff",
    ):
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            sock.sendall(junk)
            sock.settimeout(2)
            try:
                sock.recv(1024)
            except (TimeoutError, ConnectionResetError):
                pass
    status = wordcount_mesh.admin().GetStatus(admin_pb2.GetStatusRequest(), timeout=5)
    assert status.state == "SERVING"
    assert wordcount_mesh.procs[0].poll() is None


def test_drain_then_sigterm_exits_cleanly():
    mesh = start_mesh("tests.worker.topologies:ticker", 2)
    try:
        admin = mesh.admin(0)

        def spouts_emitted() -> int:
            statuses = [mesh.admin(i).GetStatus(admin_pb2.GetStatusRequest()) for i in (0, 1)]
            return sum(e.emitted for status in statuses for e in status.executors)

        eventually(spouts_emitted, message="the ticker never emitted")
        assert admin.Drain(admin_pb2.DrainRequest()).state == "NOT_SERVING"
        for service in ("", "tuplemesh.v1.Transfer"):  # readiness: out of rotation
            health = mesh.health(0).Check(health_pb2.HealthCheckRequest(service=service))
            assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING
        alive = mesh.health(0).Check(health_pb2.HealthCheckRequest(service="tuplemesh.v1.Admin"))
        assert alive.status == health_pb2.HealthCheckResponse.SERVING  # liveness: never restarted for it
        assert mesh.admin(0).GetStatus(admin_pb2.GetStatusRequest()).state == "NOT_SERVING"
        # the topology's one spout runs on worker 0 (round-robin by name: sink[1], sink[2], ticks)
        spout_executors = [
            sum(e.spout for e in mesh.admin(i).GetStatus(admin_pb2.GetStatusRequest()).executors)
            for i in (0, 1)
        ]
        assert spout_executors == [1, 0]
        time.sleep(0.3)  # deliberate: a next_tuple that was under way when Drain came finishes
        first = spouts_emitted()
        time.sleep(0.3)  # deliberate: a window in which the drained spout must emit nothing
        assert spouts_emitted() == first
    finally:
        codes = mesh.stop()
    assert codes == [0, 0]


def test_second_sigterm_forces_exit_of_a_worker_that_cannot_drain():
    mesh = start_mesh("tests.worker.topologies:stuck", 1)
    proc = mesh.procs[0]

    def spout_emitted() -> int:
        status = mesh.admin().GetStatus(admin_pb2.GetStatusRequest())
        return sum(e.emitted for e in status.executors if e.spout)

    # an emitted tuple is what sticks the bolt (received counts only after execute returns)
    eventually(spout_emitted, message="the ticker never emitted")
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.0)  # deliberate: the first SIGTERM's drain must still be waiting after a second
    assert proc.poll() is None, "a stuck bolt should keep the first SIGTERM's drain waiting"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 1


def test_admin_and_health_stay_on_the_worker_port_with_zmq_data(tmp_path):
    config = tmp_path / "zmq.yaml"
    config.write_text("messaging.transport: zmq\n")
    mesh = start_mesh("tests.worker.topologies:small_wordcount", 2, config)
    try:
        status = mesh.admin(1).GetStatus(admin_pb2.GetStatusRequest())
        assert status.transport == "zmq" and status.state == "SERVING"
        assert [p.state for p in status.peers] == ["READY"]
        assert (
            mesh.health(0).Check(health_pb2.HealthCheckRequest()).status
            == health_pb2.HealthCheckResponse.SERVING
        )
    finally:
        assert mesh.stop() == [0, 0]
