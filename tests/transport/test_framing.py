"""Framing: the hand-encoded TransferBatch is byte for byte what protobuf serializes (so protobuf
peers read it)."""

from __future__ import annotations

import pytest

from tuplemesh.transport.framing import TransferBatchEncoder, join_packed, pack_within, unpack_batch
from tuplemesh.v1 import messages_pb2


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


def test_a_trace_context_is_encoded_as_the_protobuf_map_field():
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "tracestate": "é=1"}
    encoded = TransferBatchEncoder("wc", 3, 7).encode(9, b"\x91\x00", True, carrier)
    parsed = messages_pb2.TransferBatch.FromString(encoded)
    assert dict(parsed.trace_context) == carrier
    assert (parsed.topology_id, parsed.sender, parsed.session, parsed.sequence) == ("wc", 3, 7, 9)
    assert parsed.packed == b"\x91\x00" and parsed.ack_requested
    # without a context the bytes are exactly protobuf's (the map left out)
    plain = TransferBatchEncoder("wc", 3, 7).encode(9, b"\x91\x00", True, {})
    assert (
        plain
        == messages_pb2.TransferBatch(
            topology_id="wc", sender=3, session=7, sequence=9, packed=b"\x91\x00", ack_requested=True
        ).SerializeToString()
    )


@pytest.mark.parametrize(
    ("first", "second"), [(1, 1), (7, 8), (15, 1), (100, 65_435), (65_535, 1), (3, 70_000)]
)
def test_joined_batches_are_one_array_of_both_pairs_in_order(first: int, second: int):
    """Each header form: fixarray (up to 15 pairs), array 16 (up to 65,535) and array 32."""
    a = [(i, b"a%d" % i) for i in range(first)]
    b = [(None if i % 5 == 0 else i, b"b%d" % i) for i in range(second)]
    packed_a = next(pack_within(a, 1 << 30))[0]
    packed_b = next(pack_within(b, 1 << 30))[0]
    joined = join_packed(packed_a, packed_b)
    assert joined == next(pack_within(a + b, 1 << 30))[0]  # what packing them together writes
    assert unpack_batch(joined) == (a + b, sum(1 for task, _ in b if task is None))


def test_joining_what_is_not_a_packed_batch_is_refused():
    with pytest.raises(ValueError, match="not a msgpack array"):
        join_packed(b"\xc0", next(pack_within([(1, b"x")], 100))[0])
