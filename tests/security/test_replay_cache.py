"""A worker's replay cache full: each worker remembers the nonce of every proof it took until its
window ends, at most ``mesh.secret.replay.cache.entries``. Two real grpc workers on loopback with a
cache of 8 and a short window; the test holds the secret, as a member would, and opens fresh
valid streams until the cache is full. Then a new stream is refused RESOURCE_EXHAUSTED and
counted, the streams already open carry the mesh's tuples as before, and a restarted worker's new
stream waits (refused, retried) until the window lets the nonces expire, losing nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2

from tests.helpers import eventually
from tests.security.test_mesh_identity import (
    SECRET,
    TARGET,
    TOPOLOGY,
    WORDS,
    batch,
    count_task_on,
    counted,
    epoch_of,
    received,
    refused,
    status,
    word_for,
)
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.security import REBALANCE, mesh_proof
from tuplemesh.topology.assignment import Epoch
from tuplemesh.v1 import admin_pb2, transfer_pb2_grpc

ENTRIES = 8
SKEW = 10  # mesh.secret.max.skew.secs: the nonces of a proof made now are forgotten within 10 s
FULL = "Transfer: 8 proofs taken within the skew window; try again later"


def counted_on(mesh: Mesh, index: int) -> int:
    return sum(e.executed for e in status(mesh, index).executors if e.component == "count")


def serving(mesh: Mesh, index: int) -> bool:
    reply = mesh.health(index).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def emit_sentence(mesh: Mesh, index: int, prefix: str) -> None:
    """40 distinct words into worker ``index``'s split task: the count tasks of both workers get some."""
    sentence = " ".join(f"{prefix}{i}" for i in range(40))
    mesh.admin(index).Emit(admin_pb2.EmitRequest(component="split", values_json=f'["{sentence}"]'), timeout=5)


def open_stream(
    mesh: Mesh, sender: int, receiver: int, n: int, clock: Callable[[], float] = time.time
) -> tuple[grpc.StatusCode, str]:
    """One Transfer stream from ``sender`` with a fresh valid proof, carrying one word for a count
    task of ``receiver``: OK once it is acknowledged, else the code and message it was refused with."""
    task = count_task_on(mesh, receiver)
    one = [batch([(task, word_for(task, f"fill{n}"))], sender=sender, session=9000 + 10 * n)]
    proof = epoch_of(mesh, receiver) + mesh_proof(SECRET, TOPOLOGY, sender, receiver, clock=clock)
    channel = grpc.insecure_channel(mesh.address(receiver))
    call = transfer_pb2_grpc.TransferStub(channel).Stream(iter(one), metadata=proof, timeout=10)
    try:
        acks = list(call)
    except grpc.RpcError as exc:
        return exc.code(), str(exc.details())
    finally:
        channel.close()
    assert acks[-1].sequence == one[-1].sequence
    return grpc.StatusCode.OK, ""


def changed(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {r: n - before.get(r, 0) for r, n in after.items() if n != before.get(r, 0)}


def test_a_full_replay_cache_refuses_new_streams_only_until_the_window_frees_it(tmp_path: Path):
    secret = tmp_path / "mesh-secret"
    secret.write_bytes(SECRET)
    env = {
        "TUPLEMESH_MESH_SECRET_FILE": str(secret),
        "TUPLEMESH_MESH_SECRET_REPLAY_CACHE_ENTRIES": str(ENTRIES),
        "TUPLEMESH_MESH_SECRET_MAX_SKEW_SECS": str(SKEW),
    }
    mesh = start_mesh(TARGET, 2, env=env)
    try:
        eventually(
            lambda: counted(mesh) == WORDS, timeout=30, interval=0.1, message=lambda: f"{counted(mesh)}"
        )
        ready = time.time()
        assignment = mesh.admin(0).GetAssignment(admin_pb2.GetAssignmentRequest(), timeout=5)
        [full] = {e.worker for e in assignment.executors if e.component == "sentences"}  # the spout's
        other = 1 - full  # restarted below; the spout's worker keeps running with its cache full
        # the mesh's own streams opened before `ready`: their nonces are forgotten a window later,
        # so every slot of the cache is free for the proofs below
        eventually(lambda: time.time() > ready + SKEW + 0.5, timeout=SKEW + 5, interval=0.1)
        before, taken = refused(mesh, full), received(mesh, full)

        # a member whose clock runs SKEW - 1 s ahead (still within the window): its nonces are
        # remembered for almost two windows, long enough for the restart below on a loaded machine
        def ahead() -> float:
            return time.time() + SKEW - 1

        accepted = 0
        while open_stream(mesh, other, full, accepted, ahead) == (grpc.StatusCode.OK, ""):
            accepted += 1
            assert accepted <= ENTRIES, "the cache took more proofs than mesh.secret.replay.cache.entries"
        assert accepted == ENTRIES
        # ... every next fresh, valid proof is refused, with the documented code and message
        for n in range(3):
            assert open_stream(mesh, other, full, 100 + n) == (grpc.StatusCode.RESOURCE_EXHAUSTED, FULL)
        fills_refused = 1 + 3  # the fill the loop above stopped at, and these
        after = refused(mesh, full)
        assert changed(before, after) == {"replay_cache_full": fills_refused}
        assert status(mesh, full).binding.refused["replay_cache_full"] == after["replay_cache_full"]
        eventually(lambda: counted(mesh) == WORDS + ENTRIES, timeout=10, interval=0.05)
        assert received(mesh, full) == (taken[0] + ENTRIES, taken[1] + ENTRIES)  # nothing refused got in
        assert serving(mesh, full) and serving(mesh, other)
        assert status(mesh, full).state == "SERVING"

        # the streams already open are not affected: a sentence emitted on the other worker
        # crosses the other worker's open stream to `full`, every word counted once
        start = [counted_on(mesh, i) for i in (0, 1)]
        emit_sentence(mesh, other, "a")

        def per_worker(start: list[int] = start) -> list[int]:
            return [counted_on(mesh, i) - start[i] for i in (0, 1)]

        eventually(
            lambda: sum(per_worker()) == 40, timeout=10, interval=0.05, message=lambda: f"{per_worker()}"
        )
        assert per_worker()[full] > 0
        assert changed(before, refused(mesh, full)) == {"replay_cache_full": fills_refused}  # none re-opened
        assert open_stream(mesh, other, full, 200) == (grpc.StatusCode.RESOURCE_EXHAUSTED, FULL)  # still full
        fills_refused += 1

        # a new stream of the mesh's own: the other worker restarts while the cache is full. Its
        # stream to `full` is refused and retried; its tuples wait in its send window meanwhile
        mesh.kill(other)
        mesh.restart(other)
        eventually(
            lambda: (
                refused(mesh, full)["replay_cache_full"] > before.get("replay_cache_full", 0) + fills_refused
            ),
            timeout=10,
            interval=0.05,
        )
        assert serving(mesh, other)  # its connection is up: readiness does not drop for this
        start = [counted_on(mesh, full), 0]  # the restarted worker's count tasks start from nothing
        emit_sentence(mesh, other, "b")

        def taken_after_restart() -> int:
            return counted_on(mesh, full) - start[0] + counted_on(mesh, other)

        # once the fill proofs' window ends their nonces are forgotten, the retried stream is
        # taken and every word reaches its count task once
        eventually(
            lambda: taken_after_restart() == 40,
            timeout=3 * SKEW,
            interval=0.1,
            message=lambda: f"{taken_after_restart()}",
        )
        assert counted_on(mesh, full) > start[0]  # some of them crossed the retried stream
        assert set(changed(before, refused(mesh, full))) == {"replay_cache_full"}
        assert refused(mesh, other) == {}
        assert serving(mesh, full) and serving(mesh, other)
        assert taken_after_restart() == 40
    finally:
        assert mesh.stop() == [0, 0]


def test_a_full_rebalance_replay_cache_refuses_forwarded_calls_and_leaves_transfer_alone(tmp_path: Path):
    """Forwarded Rebalance calls have a cache of their own, of the same size: filled by a member's
    calls, the next is refused RESOURCE_EXHAUSTED and counted, and Transfer streams still open."""
    secret = tmp_path / "mesh-secret"
    secret.write_bytes(SECRET)
    env = {
        "TUPLEMESH_MESH_SECRET_FILE": str(secret),
        "TUPLEMESH_MESH_SECRET_REPLAY_CACHE_ENTRIES": str(ENTRIES),
    }  # the default window (300 s): nothing expires during the test
    mesh = start_mesh(TARGET, 2, env=env)
    try:
        eventually(
            lambda: counted(mesh) == WORDS, timeout=30, interval=0.1, message=lambda: f"{counted(mesh)}"
        )
        current = Epoch.parse(status(mesh, 1).epoch)
        # an epoch for 3 workers, asking for 2: each call's proof is taken, then the call is
        # refused INVALID_ARGUMENT, and nothing moves
        request = admin_pb2.RebalanceRequest(
            workers=2, epoch=str(Epoch(3, current.code, current.counter + 1))
        )
        before = [refused(mesh, i) for i in (0, 1)]

        def forward() -> tuple[grpc.StatusCode, str]:
            """Worker 0 forwarding a rescale to worker 1, with a fresh proof."""
            try:
                mesh.admin(1).Rebalance(
                    request, metadata=mesh_proof(SECRET, TOPOLOGY, 0, 1, REBALANCE), timeout=30
                )
            except grpc.RpcError as exc:
                return exc.code(), str(exc.details())
            return grpc.StatusCode.OK, ""

        # no worker forwarded a Rebalance yet: every slot is free
        assert [forward()[0] for _ in range(ENTRIES)] == [grpc.StatusCode.INVALID_ARGUMENT] * ENTRIES
        for _ in range(3):
            assert forward() == (
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "a Rebalance naming an epoch comes from a worker: it needs a fresh proof of the mesh "
                "secret: 8 proofs taken within the skew window; try again later; to rescale, give only "
                "the worker count",
            )
        after = [refused(mesh, i) for i in (0, 1)]
        assert after[0] == before[0]
        assert changed(before[1], after[1]) == {"replay_cache_full": 3}
        assert status(mesh, 1).binding.refused["replay_cache_full"] == after[1]["replay_cache_full"]
        # Transfer's cache is its own: a member's new stream is taken, its word counted once
        assert open_stream(mesh, 0, 1, 1) == (grpc.StatusCode.OK, "")
        eventually(lambda: counted(mesh) == WORDS + 1, timeout=10, interval=0.05)
        assert changed(before[1], refused(mesh, 1)) == {"replay_cache_full": 3}
        for index in (0, 1):
            assert status(mesh, index).epoch == str(current)
            assert status(mesh, index).state == "SERVING"
            assert serving(mesh, index)
    finally:
        assert mesh.stop() == [0, 0]


def test_a_full_replay_cache_over_zmq_refuses_frames_with_new_proofs_and_counts_each(tmp_path: Path):
    """zmq takes a proof per connection (and each new one a sender makes): a member's frames, each
    with a new proof, fill the cache; every frame with a new proof after that is dropped and
    counted, while the connections already proven (the mesh's own) deliver as before."""
    import msgpack
    import zmq

    from tuplemesh.security import mesh_auth
    from tuplemesh.transport.framing import pack_within

    secret = tmp_path / "mesh-secret"
    secret.write_bytes(SECRET)
    env = {
        "TUPLEMESH_MESH_SECRET_FILE": str(secret),
        "TUPLEMESH_MESH_SECRET_REPLAY_CACHE_ENTRIES": str(ENTRIES),
        "TUPLEMESH_MESSAGING_TRANSPORT": "zmq",
    }  # the default window (300 s): the mesh's senders make their next proofs in 150 s
    mesh = start_mesh(TARGET, 2, env=env)
    context = zmq.Context()
    dealer = context.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    try:
        eventually(
            lambda: counted(mesh) == WORDS, timeout=30, interval=0.1, message=lambda: f"{counted(mesh)}"
        )
        task, epoch = count_task_on(mesh, 1), status(mesh, 1).epoch
        dealer.connect(f"tcp://127.0.0.1:{mesh.ports[1] + 100}")  # zmq.port.offset's default
        before = refused(mesh, 1)

        def send(n: int) -> str:
            """A frame from worker 0 with a new proof, one word for worker 1: "taken" once its word is
            counted, "refused" once the refusal is (a refused frame gets no answer)."""
            [(packed, _)] = pack_within([(task, word_for(task, f"z{n}"))], 1 << 20)
            header = [TOPOLOGY, 0, 700 + n, 1, True, 1, epoch, mesh_auth(SECRET, TOPOLOGY, 0, 1)]
            words, full = counted(mesh), refused(mesh, 1).get("replay_cache_full", 0)
            dealer.send_multipart([msgpack.packb(header), packed])

            def outcome() -> str:
                if refused(mesh, 1).get("replay_cache_full", 0) == full + 1:
                    return "refused"
                return "taken" if counted(mesh) == words + 1 else ""

            return eventually(outcome, timeout=10, interval=0.05)

        accepted = 0
        while send(accepted) == "taken":
            accepted += 1
            assert accepted <= ENTRIES, "the cache took more proofs than mesh.secret.replay.cache.entries"
        # worker 0's connection to worker 1 holds a slot or more (a proof per connect): the rest is ours
        assert 0 < accepted < ENTRIES
        assert [send(100 + n) for n in range(3)] == ["refused"] * 3
        assert changed(before, refused(mesh, 1)) == {"replay_cache_full": 4}
        assert status(mesh, 1).binding.refused["replay_cache_full"] == refused(mesh, 1)["replay_cache_full"]
        assert counted(mesh) == WORDS + accepted  # nothing of the refused frames delivered
        # the connections already proven carry the mesh's tuples as before: every word counted once
        start = [counted_on(mesh, i) for i in (0, 1)]
        for index in (0, 1):
            emit_sentence(mesh, index, f"w{index}-")

        def per_worker() -> list[int]:
            return [counted_on(mesh, i) - start[i] for i in (0, 1)]

        eventually(
            lambda: sum(per_worker()) == 80, timeout=10, interval=0.05, message=lambda: f"{per_worker()}"
        )
        assert changed(before, refused(mesh, 1)) == {"replay_cache_full": 4}
        assert refused(mesh, 0) == {}
        assert serving(mesh, 0) and serving(mesh, 1)
    finally:
        dealer.close()
        context.term()
        assert mesh.stop() == [0, 0]
