"""Who may send on Transfer: only workers of the mesh, proven by the mesh secret or, under mTLS,
by a certificate with the worker role. Real worker processes on loopback; the outsider is a
hand-made Transfer client that knows everything about the mesh except its secret."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import msgpack
import pytest
import zmq

from examples.wordcount import expected_counts
from tests.helpers import eventually
from tests.security.test_mtls_and_tokens import tls_as, tls_env, wait_tls_serving
from tests.worker.conftest import Mesh, start_mesh
from tests.worker.topologies import small_wordcount
from tuplemesh.client import open_channel
from tuplemesh.security import mesh_auth, mesh_proof
from tuplemesh.transport.framing import pack_within
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc, messages_pb2, transfer_pb2_grpc

TARGET = "tests.worker.topologies:small_wordcount"
TOPOLOGY = "wordcount"
SECRET = b"the mesh secret, from a Kubernetes Secret"
WORDS = sum(expected_counts(10).values())  # what small_wordcount's count bolts execute


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secret") / "mesh-secret"
    path.write_bytes(SECRET + b"\n")  # as an editor saves it: the newline is not part of it
    return path


@pytest.fixture(scope="module")
def mesh(secret_file: Path) -> Iterator[Mesh]:
    """Two grpc workers sharing the secret, having counted small_wordcount's words."""
    mesh = start_mesh(TARGET, 2, env={"TUPLEMESH_MESH_SECRET_FILE": str(secret_file)})
    try:
        eventually(
            lambda: counted(mesh) == WORDS, timeout=30, interval=0.1, message=lambda: f"{counted(mesh)}"
        )
        yield mesh
    finally:
        assert mesh.stop() == [0, 0]


def status(mesh: Mesh, index: int, channel: grpc.Channel | None = None) -> admin_pb2.WorkerStatus:
    stub = admin_pb2_grpc.AdminStub(channel) if channel else mesh.admin(index)
    return stub.GetStatus(admin_pb2.GetStatusRequest(), timeout=5)


def counted(mesh: Mesh, channels: list[grpc.Channel] | None = None) -> int:
    """Words executed by the count bolts of every worker."""
    return sum(
        e.executed
        for i in range(len(mesh.ports))
        for e in status(mesh, i, channel=channels[i] if channels else None).executors
        if e.component == "count"
    )


def count_task_on(mesh: Mesh, worker: int, channel: grpc.Channel | None = None) -> int:
    stub = admin_pb2_grpc.AdminStub(channel) if channel else mesh.admin(0)
    assignment = stub.GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=5)
    return next(
        t for e in assignment.executors if e.component == "count" and e.worker == worker for t in e.tasks
    )


def word_for(task: int, word: str = "forged") -> bytes:
    """A tuple from split's default stream, as a count task takes it."""
    stream = small_wordcount.stream_ids()[("split", "default")]
    return msgpack.packb((0, stream, [word]), use_bin_type=True)


def batch(
    messages: list[tuple[int | None, bytes]], sender: int = 0, sequence: int = 1, session: int = 4242
) -> messages_pb2.TransferBatch:
    [(packed, _)] = pack_within(messages, 1 << 20)
    return messages_pb2.TransferBatch(
        topology_id=TOPOLOGY, sender=sender, session=session + sequence, sequence=sequence, packed=packed,
        ack_requested=True,
    )  # fmt: skip


def transfer(
    channel: grpc.Channel, batches: list[messages_pb2.TransferBatch], metadata: tuple[tuple[str, str], ...]
) -> grpc.StatusCode:
    """Send ``batches`` on one Transfer stream; OK when every one was acknowledged, else the code."""
    call = transfer_pb2_grpc.TransferStub(channel).Stream(iter(batches), metadata=metadata, timeout=10)
    try:
        acks = list(call)
    except grpc.RpcError as exc:
        return exc.code()
    assert acks and acks[-1].sequence == batches[-1].sequence
    return grpc.StatusCode.OK


def proof(
    worker: int, secret: bytes = SECRET, receiver: int = 1, clock: Callable[[], float] = time.time
) -> tuple[tuple[str, str], ...]:
    """A fresh proof, as ``worker`` opens a stream to ``receiver`` with."""
    return mesh_proof(secret, TOPOLOGY, worker, receiver, clock=clock)


def epoch_of(mesh: Mesh, index: int, channel: grpc.Channel | None = None) -> tuple[tuple[str, str], ...]:
    return (("tuplemesh-epoch", status(mesh, index, channel=channel).epoch),)


def refused(mesh: Mesh, index: int) -> dict[str, int]:
    """tuplemesh_transfer_refused_total by reason, from worker ``index``'s /metrics."""
    text = urllib.request.urlopen(mesh.metrics_url(index), timeout=5).read().decode()
    found = re.findall(r'^tuplemesh_transfer_refused_total\{[^}]*reason="(\w+)"[^}]*\} (\S+)$', text, re.M)
    return {reason: int(float(value)) for reason, value in found}


def peer_labels(mesh: Mesh, index: int) -> set[str]:
    text = urllib.request.urlopen(mesh.metrics_url(index), timeout=5).read().decode()
    return set(re.findall(r'^tuplemesh_transfer_\w+_received_total\{[^}]*peer="([^"]*)"', text, re.M))


def test_outsiders_without_the_secret_or_with_a_wrong_one_inject_nothing(mesh: Mesh):
    task = count_task_on(mesh, 1)
    channel = grpc.insecure_channel(mesh.address(1))
    epoch = epoch_of(mesh, 1)
    before = refused(mesh, 1).get("unauthenticated", 0)
    forged = [batch([(task, word_for(task))])]
    assert transfer(channel, forged, epoch) == grpc.StatusCode.UNAUTHENTICATED  # no secret
    assert transfer(channel, forged, epoch + proof(0, b"a guess")) == grpc.StatusCode.UNAUTHENTICATED
    wrong_worker = (("tuplemesh-worker", "0"), ("tuplemesh-auth", mesh_auth(SECRET, TOPOLOGY, 1, 1)))
    assert transfer(channel, forged, epoch + wrong_worker) == grpc.StatusCode.UNAUTHENTICATED
    assert refused(mesh, 1).get("unauthenticated", 0) - before == 3
    assert counted(mesh) == WORDS  # not one forged word reached a count bolt
    # a member's stream (the secret proven, its own id on every batch) is taken
    assert (
        transfer(channel, [batch([(task, word_for(task, "member"))])], epoch + proof(0)) == grpc.StatusCode.OK
    )
    eventually(lambda: counted(mesh) == WORDS + 1, timeout=10, interval=0.05)


def test_forged_sender_ids_are_refused_and_never_become_peer_labels(mesh: Mesh):
    task = count_task_on(mesh, 1)
    channel = grpc.insecure_channel(mesh.address(1))
    epoch = epoch_of(mesh, 1)
    start = counted(mesh)
    before = refused(mesh, 1)
    # a member naming another sender on its batches
    codes = {
        transfer(channel, [batch([(task, word_for(task))], sender=s)], epoch + proof(0))
        for s in range(1000, 1020)
    }
    assert codes == {grpc.StatusCode.PERMISSION_DENIED}
    # a sender id outside the mesh, proven with the secret: still no worker of this mesh
    outside = [batch([(task, word_for(task))], sender=2000)]
    assert transfer(channel, outside, epoch + proof(2000)) == grpc.StatusCode.PERMISSION_DENIED
    after = refused(mesh, 1)
    assert after.get("sender_mismatch", 0) - before.get("sender_mismatch", 0) == 20
    assert after.get("not_a_member", 0) - before.get("not_a_member", 0) == 1
    assert counted(mesh) == start
    assert peer_labels(mesh, 1) <= {"0", "1"}
    assert all(int(peer) < 2 for peer in status(mesh, 1).binding.received_tuples_from)


def test_a_stream_naming_no_epoch_is_refused_and_counted(mesh: Mesh):
    task = count_task_on(mesh, 1)
    channel = grpc.insecure_channel(mesh.address(1))
    start, before = counted(mesh), refused(mesh, 1).get("no_epoch", 0)
    code = transfer(channel, [batch([(task, word_for(task))])], proof(0))  # a member, no epoch header
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert refused(mesh, 1).get("no_epoch", 0) - before == 1
    assert counted(mesh) == start


def refusal(
    channel: grpc.Channel, batches: list[messages_pb2.TransferBatch], metadata: tuple[tuple[str, str], ...]
) -> tuple[grpc.StatusCode, str]:
    """The code and message a Transfer stream was refused with."""
    call = transfer_pb2_grpc.TransferStub(channel).Stream(iter(batches), metadata=metadata, timeout=10)
    with pytest.raises(grpc.RpcError) as caught:
        list(call)
    return caught.value.code(), caught.value.details()


def received(mesh: Mesh, index: int) -> tuple[int, int]:
    """(batches, tuples) worker ``index``'s binding took, as GetStatus says."""
    binding = status(mesh, index).binding
    return binding.received_batches, binding.received_tuples


def test_a_captured_stream_header_replayed_on_another_stream_is_refused(mesh: Mesh):
    task = count_task_on(mesh, 1)
    channel = grpc.insecure_channel(mesh.address(1))
    captured = epoch_of(mesh, 1) + proof(0)  # a member's stream header, as read off the wire
    start, before = counted(mesh), refused(mesh, 1)
    taken = received(mesh, 1)
    taken_batch = batch([(task, word_for(task, "member"))], session=7000)  # a session of its own
    assert transfer(channel, [taken_batch], captured) == grpc.StatusCode.OK
    eventually(lambda: counted(mesh) == start + 1, timeout=10, interval=0.05)
    assert received(mesh, 1) == (taken[0] + 1, taken[1] + 1)
    # the same header on a second stream, with the replayer's own batches: refused before any is read
    replayed = [
        batch([(task, word_for(task, "replayed")), (-1, b"")], sequence=s, session=8000) for s in (1, 2, 3)
    ]
    for _ in range(3):
        assert refusal(channel, replayed, captured) == (
            grpc.StatusCode.UNAUTHENTICATED,
            "Transfer: a proof already used (each stream or call needs a fresh one): replayed",
        )
    after = refused(mesh, 1)
    assert {r: after.get(r, 0) - before.get(r, 0) for r in after if after.get(r) != before.get(r)} == {
        "replayed_proof": 3
    }
    assert status(mesh, 1).binding.refused["replayed_proof"] == after["replayed_proof"]
    assert received(mesh, 1) == (taken[0] + 1, taken[1] + 1)  # nothing of the replays delivered
    assert status(mesh, 1).binding.shutdown_messages == 0
    assert counted(mesh) == start + 1


def test_a_proof_made_for_one_worker_is_refused_by_another(mesh: Mesh):
    task = count_task_on(mesh, 0)
    for_worker_1 = epoch_of(mesh, 0) + proof(1, receiver=1)  # worker 1's proof, as sent to worker 1
    start, before, taken = counted(mesh), refused(mesh, 0).get("wrong_receiver", 0), received(mesh, 0)
    code = refusal(grpc.insecure_channel(mesh.address(0)), [batch([(task, word_for(task))], 1)], for_worker_1)
    assert code == (
        grpc.StatusCode.UNAUTHENTICATED,
        "Transfer: a proof made for worker 1, presented to worker 0",
    )
    assert refused(mesh, 0).get("wrong_receiver", 0) - before == 1
    assert received(mesh, 0) == taken
    assert counted(mesh) == start


def test_a_stale_proof_is_refused(mesh: Mesh):
    task = count_task_on(mesh, 1)
    channel = grpc.insecure_channel(mesh.address(1))
    start, before, taken = counted(mesh), refused(mesh, 1).get("stale_proof", 0), received(mesh, 1)
    for shift, when in ((-400, "before"), (400, "after")):  # made 400 s ago, or 400 s ahead
        stale = epoch_of(mesh, 1) + proof(0, clock=lambda shift=shift: time.time() + shift)
        code, message = refusal(channel, [batch([(task, word_for(task))])], stale)
        assert code == grpc.StatusCode.UNAUTHENTICATED
        assert re.fullmatch(
            rf"Transfer: a proof made (399|40\d) s {when} now by this worker's clock, outside the 300 s "
            r"window \(mesh.secret.max.skew.secs; are the clocks synchronised\?\)",
            message,
        ), message
    assert refused(mesh, 1).get("stale_proof", 0) - before == 2
    assert received(mesh, 1) == taken
    assert counted(mesh) == start


def test_a_shutdown_notice_from_an_outsider_does_not_stop_receiving(mesh: Mesh):
    channel = grpc.insecure_channel(mesh.address(1))
    notice = [batch([(-1, b"")])]
    assert transfer(channel, notice, epoch_of(mesh, 1)) == grpc.StatusCode.UNAUTHENTICATED
    assert status(mesh, 1).binding.shutdown_messages == 0
    # a legitimate tuple from worker 0 still crosses to worker 1: a sentence into a split task of
    # worker 0 whose words the count tasks of both workers execute
    start = [sum(e.executed for e in status(mesh, i).executors if e.component == "count") for i in (0, 1)]
    sentence = " ".join(f"w{i}" for i in range(40))
    mesh.admin(0).Emit(admin_pb2.EmitRequest(component="split", values_json=f'["{sentence}"]'), timeout=5)

    def per_worker() -> list[int]:
        return [
            sum(e.executed for e in status(mesh, i).executors if e.component == "count") - start[i]
            for i in (0, 1)
        ]

    eventually(lambda: sum(per_worker()) == 40, timeout=10, interval=0.05, message=lambda: f"{per_worker()}")
    assert per_worker()[1] > 0  # some words crossed Transfer to worker 1 after the notice


def test_a_zmq_mesh_with_the_secret_counts_exactly_and_drops_outsiders(secret_file: Path):
    env = {"TUPLEMESH_MESH_SECRET_FILE": str(secret_file), "TUPLEMESH_MESSAGING_TRANSPORT": "zmq"}
    mesh = start_mesh(TARGET, 2, env=env)
    try:
        eventually(
            lambda: counted(mesh) == WORDS, timeout=30, interval=0.1, message=lambda: f"{counted(mesh)}"
        )
        task = count_task_on(mesh, 1)
        epoch = status(mesh, 1).epoch
        context = zmq.Context()
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(f"tcp://127.0.0.1:{mesh.ports[1] + 100}")  # zmq.port.offset's default
        [(packed, _)] = pack_within([(task, word_for(task)), (-1, b"")], 1 << 20)
        for auth in ("", mesh_auth(b"a guess", TOPOLOGY, 0, 1)):  # no proof, a wrong one
            dealer.send_multipart([msgpack.packb([TOPOLOGY, 0, 99, 1, True, 1, epoch, auth]), packed])
        eventually(lambda: refused(mesh, 1).get("unauthenticated", 0) == 2, timeout=10, interval=0.05)
        assert counted(mesh) == WORDS
        # a member's connection: its proof is taken on it, for as many frames as it sends
        auth = mesh_auth(SECRET, TOPOLOGY, 0, 1)
        for sequence in (1, 2):
            [(one, _)] = pack_within([(task, word_for(task, "member"))], 1 << 20)
            dealer.send_multipart([msgpack.packb([TOPOLOGY, 0, 77, sequence, True, 1, epoch, auth]), one])
        eventually(lambda: counted(mesh) == WORDS + 2, timeout=10, interval=0.05)
        # its header, read off the wire, on another connection: refused, nothing taken
        replayer = context.socket(zmq.DEALER)
        replayer.setsockopt(zmq.LINGER, 0)
        replayer.connect(f"tcp://127.0.0.1:{mesh.ports[1] + 100}")
        for sequence in (1, 2, 3):
            replayer.send_multipart(
                [msgpack.packb([TOPOLOGY, 0, 78, sequence, True, 1, epoch, auth]), packed]
            )
        eventually(lambda: refused(mesh, 1).get("replayed_proof", 0) == 3, timeout=10, interval=0.05)
        assert refused(mesh, 1) == {"unauthenticated": 2, "replayed_proof": 3}
        # a member's frames with a proof made 400 s ago, and with one made for worker 0
        stale = mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=lambda: time.time() - 400)
        for sequence, wrong in ((1, stale), (2, mesh_auth(SECRET, TOPOLOGY, 0, 0))):
            dealer.send_multipart([msgpack.packb([TOPOLOGY, 0, 79, sequence, True, 1, epoch, wrong]), packed])
        eventually(lambda: refused(mesh, 1).get("wrong_receiver", 0) == 1, timeout=10, interval=0.05)
        assert refused(mesh, 1) == {
            "unauthenticated": 2,
            "replayed_proof": 3,
            "stale_proof": 1,
            "wrong_receiver": 1,
        }
        dealer.close()
        replayer.close()
        context.term()
        assert counted(mesh) == WORDS + 2
        assert status(mesh, 1).binding.shutdown_messages == 0
    finally:
        assert mesh.stop() == [0, 0]


def test_under_mtls_only_a_worker_certificate_opens_transfer(pki: Path):
    mesh = start_mesh(TARGET, 2, wait=False, env=tls_env(pki))
    try:
        for i in (0, 1):
            wait_tls_serving(mesh.address(i), pki)
        admin = [open_channel(mesh.address(i), tls_as(pki, "client")) for i in (0, 1)]
        eventually(
            lambda: counted(mesh, admin) == WORDS,
            timeout=30,
            interval=0.1,
            message=lambda: f"{counted(mesh, admin)}",
        )  # the workers' own streams carry worker certificates
        task = count_task_on(mesh, 1, admin[0])
        epoch = epoch_of(mesh, 1, admin[1])
        as_client = open_channel(mesh.address(1), tls_as(pki, "client"))
        assert (
            transfer(as_client, [batch([(task, word_for(task))])], epoch) == grpc.StatusCode.PERMISSION_DENIED
        )
        assert refused(mesh, 1) == {"not_a_worker": 1}
        assert counted(mesh, admin) == WORDS
        as_worker = open_channel(mesh.address(1), tls_as(pki, "worker"))
        assert transfer(as_worker, [batch([(task, word_for(task, "member"))])], epoch) == grpc.StatusCode.OK
        eventually(lambda: counted(mesh, admin) == WORDS + 1, timeout=10, interval=0.05)
    finally:
        assert mesh.stop() == [0, 0]


def test_after_a_worker_restarts_the_mesh_streams_both_ways_with_new_proofs(secret_file: Path):
    """The worker without the spout is SIGKILLed and restarted: its peer's stream to it reconnects
    and the new process opens its own, each with a new proof; nothing is refused and a sentence
    emitted on each side is counted exactly."""
    mesh = start_mesh(TARGET, 2, env={"TUPLEMESH_MESH_SECRET_FILE": str(secret_file)})
    try:
        eventually(
            lambda: counted(mesh) == WORDS, timeout=30, interval=0.1, message=lambda: f"{counted(mesh)}"
        )
        assignment = mesh.admin(0).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=5)
        [spout_worker] = {e.worker for e in assignment.executors if e.component == "sentences"}
        killed = 1 - spout_worker
        mesh.kill(killed)
        mesh.restart(killed)

        def count_of(index: int) -> int:
            return sum(e.executed for e in status(mesh, index).executors if e.component == "count")

        before = count_of(spout_worker)
        from_killed = status(mesh, spout_worker).binding.received_tuples_from[killed]  # before the kill
        assert count_of(killed) == 0  # a new process: its count tasks start from nothing
        for index, prefix in ((spout_worker, "a"), (killed, "b")):
            sentence = " ".join(f"{prefix}{i}" for i in range(40))
            mesh.admin(index).Emit(
                admin_pb2.EmitRequest(component="split", values_json=f'["{sentence}"]'), timeout=5
            )

        def taken() -> int:
            return count_of(spout_worker) - before + count_of(killed)

        eventually(lambda: taken() == 80, timeout=30, interval=0.1, message=lambda: f"{taken()}")
        # words crossed both ways, on streams opened after the restart
        assert status(mesh, killed).binding.received_tuples_from[spout_worker] > 0
        assert status(mesh, spout_worker).binding.received_tuples_from[killed] > from_killed
        assert refused(mesh, spout_worker) == {} and refused(mesh, killed) == {}
        assert taken() == 80
    finally:
        assert mesh.stop() == [0, 0]
