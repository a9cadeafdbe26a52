"""Framing: packed batches merge by concatenation, and the hand-encoded TransferBatch is byte for
byte what protobuf serializes (so protobuf peers read it)."""

from __future__ import annotations

import msgpack
import pytest

from tuplemesh.transport.base import TaskMessage
from tuplemesh.transport.framing import TransferBatchEncoder, merge_packed, pack_within, unpack_batch
from tuplemesh.v1 import messages_pb2


def _packed(batch: list[TaskMessage]) -> bytes:
    return msgpack.packb(batch, use_bin_type=True)


@pytest.mark.parametrize("sizes", [[1, 1], [3, 12, 1], [15, 1], [200, 70000], [0, 5]])
def test_merged_batches_unpack_to_every_pair_in_order(sizes: list[int]):
    # sizes cross msgpack's array header forms: fixarray (< 16), array16, array32
    batches = [[(i % 7 if i % 5 else None, f"{n}:{i}".encode()) for i in range(n)] for n in sizes]
    merged = merge_packed([_packed(b) for b in batches], sum(sizes))
    expected = [pair for batch in batches for pair in batch]
    messages, broadcasts = unpack_batch(merged)
    assert [tuple(m) for m in messages] == expected
    assert broadcasts == sum(1 for task, _ in expected if task is None)


def test_merge_refuses_what_is_not_a_packed_batch():
    with pytest.raises(ValueError, match="not a packed batch"):
        merge_packed([_packed([(1, b"a")]), msgpack.packb(5)], 2)


@pytest.mark.parametrize(
    ("topology", "sender", "session", "sequence", "ack"),
    [
        ("wordcount", 1, 77, 1, False),
        ("", 0, 0, 0, False),  # every field at its proto3 default
        ("t" * 300, 2**32 - 1, 2**64 - 1, 2**64 - 1, True),
        ("ünïcode", 127, 128, 16384, True),
    ],
)
def test_encoded_batch_is_exactly_the_protobuf_serialization(
    topology: str, sender: int, session: int, sequence: int, ack: bool
):
    packed = next(pack_within([(3, b"x" * 200), (None, b"all")], 1 << 20))[0]
    encoded = TransferBatchEncoder(topology, sender, session).encode(sequence, packed, ack)
    message = messages_pb2.TransferBatch(
        topology_id=topology,
        sender=sender,
        sequence=sequence,
        packed=packed,
        session=session,
        ack_requested=ack,
    )
    assert encoded == message.SerializeToString()
    assert messages_pb2.TransferBatch.FromString(encoded) == message


def test_encoded_batch_without_tuples_leaves_packed_out():
    encoded = TransferBatchEncoder("t", 2, 9).encode(4, b"", False)
    assert (
        encoded
        == messages_pb2.TransferBatch(topology_id="t", sender=2, sequence=4, session=9).SerializeToString()
    )
