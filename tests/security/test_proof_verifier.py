"""`ProofVerifier`: what makes a proof of the mesh secret good once, at one worker, for a while.
Unit tests with an injected clock (the process tests are in test_mesh_identity,
test_forwarded_rebalance and test_replay_cache)."""

from __future__ import annotations

import grpc
import pytest

from tuplemesh.security import (
    AUTH_METADATA,
    REBALANCE,
    TRANSFER,
    WORKER_METADATA,
    ProofRefused,
    ProofVerifier,
    mesh_auth,
    mesh_proof,
)
from tuplemesh.transport.grpc_sender import handshake
from tuplemesh.transport.settings import TransportSettings

SECRET = b"s3cret"
TOPOLOGY = "wordcount"
T0 = 1_800_000_000.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def verifier(clock: Clock, capacity: int = 100, index: int = 1, skew: float = 300.0) -> ProofVerifier:
    return ProofVerifier(SECRET, TOPOLOGY, index, TRANSFER, skew, capacity=capacity, clock=clock)


def refusal(v: ProofVerifier, claimed: str, auth: str) -> tuple[str, grpc.StatusCode, str]:
    with pytest.raises(ProofRefused) as caught:
        v.verify(claimed, auth)
    return caught.value.reason, caught.value.code, str(caught.value)


def test_a_proof_is_taken_once():
    clock = Clock()
    v = verifier(clock)
    auth = mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=clock)
    assert v.verify("0", auth) == 0
    assert refusal(v, "0", auth) == (
        "replayed_proof",
        grpc.StatusCode.UNAUTHENTICATED,
        "a proof already used (each stream or call needs a fresh one): replayed",
    )
    assert v.verify("0", mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=clock)) == 0  # a fresh one is
    assert len(v) == 2


def test_a_proof_for_another_worker_is_refused_without_being_remembered():
    clock = Clock()
    v = verifier(clock, index=0)
    auth = mesh_auth(SECRET, TOPOLOGY, 1, 1, clock=clock)  # worker 1's proof for itself
    assert refusal(v, "1", auth) == (
        "wrong_receiver",
        grpc.StatusCode.UNAUTHENTICATED,
        "a proof made for worker 1, presented to worker 0",
    )
    assert len(v) == 0


def test_a_proof_outside_the_skew_window_either_way_is_stale():
    clock = Clock()
    v = verifier(clock)
    old = mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=Clock(T0 - 301))
    ahead = mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=Clock(T0 + 301))
    reason, code, message = refusal(v, "0", old)
    assert (reason, code) == ("stale_proof", grpc.StatusCode.UNAUTHENTICATED)
    assert message == (
        "a proof made 301 s before now by this worker's clock, outside the 300 s window "
        "(mesh.secret.max.skew.secs; are the clocks synchronised?)"
    )
    assert refusal(v, "0", ahead)[2].startswith("a proof made 301 s after now by this worker's clock")
    # at the edges of the window: taken
    assert v.verify("0", mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=Clock(T0 - 300))) == 0
    assert v.verify("0", mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=Clock(T0 + 300))) == 0


@pytest.mark.parametrize(
    ("claimed", "auth"),
    [
        ("0", ""),  # no proof
        ("", mesh_auth(SECRET, TOPOLOGY, 0, 1)),  # no worker named
        ("1", mesh_auth(SECRET, TOPOLOGY, 0, 1)),  # worker 0's proof, named 1
        ("0", mesh_auth(b"a guess", TOPOLOGY, 0, 1)),  # another secret
        ("0", mesh_auth(SECRET, "another-topology", 0, 1)),
        ("0", mesh_auth(SECRET, TOPOLOGY, 0, 1, purpose=REBALANCE)),  # an Admin call's proof
        ("0", "a" * 64),  # the static proof of old
        ("0", "1.2.3.4"),
        ("0", "1." + "9" * 400 + "." + "0" * 32 + "." + "0" * 64),  # a huge timestamp
        ("9" * 4000, mesh_auth(SECRET, TOPOLOGY, 0, 1)),  # a huge worker id
    ],
)
def test_a_wrong_or_malformed_proof_is_refused_without_saying_more(claimed: str, auth: str):
    v = ProofVerifier(SECRET, TOPOLOGY, 1, TRANSFER, 300.0)  # the real clock: the proofs are fresh
    assert refusal(v, claimed, auth) == (
        "unauthenticated",
        grpc.StatusCode.UNAUTHENTICATED,
        "no or a wrong proof of the mesh secret (metadata tuplemesh-worker and tuplemesh-auth)",
    )
    assert len(v) == 0


def test_the_cache_is_bounded_refuses_when_full_and_frees_entries_as_they_expire():
    clock = Clock()
    v = verifier(clock, capacity=3, skew=10)
    taken = []
    for offset in (0, 2, 4):  # proofs made at T0, T0 + 2, T0 + 4 (taken at T0 + 4)
        clock.now = T0 + offset
        auth = mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=clock)
        assert v.verify("0", auth) == 0
        taken.append(auth)
    fresh = mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=clock)
    assert refusal(v, "0", fresh) == (
        "replay_cache_full",
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "3 proofs taken within the skew window; try again later",
    )
    assert len(v) == 3  # nothing forgotten to make room: every taken proof is still refused
    assert [refusal(v, "0", a)[0] for a in taken] == ["replayed_proof"] * 3
    clock.now = T0 + 10  # the first proof's window has not ended yet
    assert refusal(v, "0", fresh)[0] == "replay_cache_full"
    clock.now = T0 + 10.5  # it has: its nonce is forgotten, and the proof itself is now stale
    assert v.verify("0", fresh) == 0
    assert refusal(v, "0", taken[0])[0] == "stale_proof"
    assert len(v) == 3
    clock.now = T0 + 100  # every window ended: all forgotten on the next proof taken
    assert v.verify("0", mesh_auth(SECRET, TOPOLOGY, 0, 1, clock=clock)) == 0
    assert len(v) == 1


def test_metadata_names_the_worker_and_carries_a_new_proof_every_time():
    first, second = (dict(mesh_proof(SECRET, TOPOLOGY, 0, 1)) for _ in range(2))
    assert first[WORKER_METADATA] == second[WORKER_METADATA] == "0"
    assert first[AUTH_METADATA] != second[AUTH_METADATA]
    assert SECRET.decode() not in first[AUTH_METADATA]
    assert mesh_proof(b"", TOPOLOGY, 0, 1) == ((WORKER_METADATA, "0"),)  # no secret: the name only
    v = ProofVerifier(SECRET, TOPOLOGY, 1, TRANSFER, 300.0)  # the real clock: made just now
    assert [v.verify_metadata(m) for m in (first, second)] == [0, 0]


def test_each_grpc_stream_opens_with_a_new_proof_for_its_receiver():
    from tuplemesh.config import Config

    settings = TransportSettings.from_config(Config({"mesh.secret": "s3cret", "worker.index": 0}))
    one, two = dict(handshake(settings, TOPOLOGY, 1, "")), dict(handshake(settings, TOPOLOGY, 1, ""))
    assert one[AUTH_METADATA] != two[AUTH_METADATA]
    assert one[AUTH_METADATA].split(".")[0] == "1"


def test_the_configured_cache_size_is_the_capacity_of_the_transfer_verifier():
    from tuplemesh.config import KEYS, Config
    from tuplemesh.security import REPLAY_CACHE_ENTRIES
    from tuplemesh.transport.session import ReceiverSession

    assert KEYS["mesh.secret.replay.cache.entries"].default == REPLAY_CACHE_ENTRIES
    conf = {"mesh.secret": "s3cret", "worker.index": 1, "mesh.secret.replay.cache.entries": 8}
    session = ReceiverSession.bound_with(
        TOPOLOGY, lambda *a: None, TransportSettings.from_config(Config(conf))
    )
    assert session.verifier is not None and session.verifier.capacity == 8
    default = TransportSettings.from_config(Config({"mesh.secret": "s3cret"}))
    assert default.mesh_replay_cache_entries == REPLAY_CACHE_ENTRIES
