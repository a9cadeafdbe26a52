"""Every RPC of a worker, fed requests generated from the proto descriptors, against ONE process.

Each field gets the edges of its type: integers at and beyond their widths' ends, NaN and the
infinities, empty, huge (1 MiB) and 100 000-deep JSON strings, random bytes, enum numbers no enum
names, nested messages and repeated fields. No call may end UNKNOWN (a crashed handler); the
worker must stay SERVING and a small topology's counts must still be exact afterwards.

Admin.Rebalance is left out (it rescales the mesh: a lifecycle action, not input handling);
Admin.Drain is called with draining off (PERMISSION_DENIED), so the worker keeps serving.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import grpc
import msgpack
import pytest
from google.protobuf import descriptor as pb
from google.protobuf import message_factory
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers import eventually
from tests.worker.conftest import Mesh, start_mesh
from tuplemesh.core.admin_calls import ADMIN_SERVICE
from tuplemesh.hotkeys.v1 import hotkeys_pb2
from tuplemesh.launcher import is_serving
from tuplemesh.v1 import admin_pb2, gateway_pb2, gateway_pb2_grpc, transfer_pb2

DELIBERATE = {
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.ABORTED,  # a Gateway publish whose rows failed in the topology: publish again
}
#: A streaming call is ended by the test after its first answer, or by its deadline.
ENDED_BY_THE_TEST = {grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED}
SKIPPED = {"/tuplemesh.v1.Admin/Rebalance"}
#: The health servicer grpcio ships does not serve List, which its proto declares.
ALSO_DELIBERATE = {"/grpc.health.v1.Health/List": {grpc.StatusCode.UNIMPLEMENTED}}
PER_RPC = settings(max_examples=10, deadline=None, database=None, suppress_health_check=list(HealthCheck))

DEEP_JSON = "[" * 100_000 + "]" * 100_000
HUGE = 1024 * 1024

F = pb.FieldDescriptor
_INTS = {
    F.TYPE_INT32: (-(2**31), 2**31 - 1),
    F.TYPE_SINT32: (-(2**31), 2**31 - 1),
    F.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    F.TYPE_UINT32: (0, 2**32 - 1),
    F.TYPE_FIXED32: (0, 2**32 - 1),
    F.TYPE_INT64: (-(2**63), 2**63 - 1),
    F.TYPE_SINT64: (-(2**63), 2**63 - 1),
    F.TYPE_SFIXED64: (-(2**63), 2**63 - 1),
    F.TYPE_UINT64: (0, 2**64 - 1),
    F.TYPE_FIXED64: (0, 2**64 - 1),
}
_FLOATS = st.sampled_from(
    [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 5e-324, -0.0, 0.0, 0.5, 1.0]
)
# names this topology has (so calls get past their lookups) as often as edge values
_NAMES = st.sampled_from(
    ["lines", "split", "count", "counts", "pipeline", "default", "__acker", '["a b"]', "[]"]
)
_STRINGS = st.one_of(
    _NAMES,
    _NAMES,
    st.sampled_from([DEEP_JSON, "x" * HUGE, '["' + "y" * HUGE + '"]', "[" * 5000]),
    st.text(max_size=20),
)
_BYTES = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda n: msgpack.packb([[n, b"\xc1"]], use_bin_type=True), st.integers(-(2**63), 2**64 - 1)),
    st.just(b"\x00" * HUGE),
)


#: Fields that name something: mostly a name this topology has, so calls reach their handling
#: of the other fields, sometimes any edge string.
_KNOWN = {
    "component": ["lines", "split", "count", "counts"],
    "export": ["counts"],
    "topology_id": ["pipeline"],
    "stream": ["default"],
}


def _scalar(field: pb.FieldDescriptor) -> st.SearchStrategy[Any]:
    if field.name in _KNOWN:
        known = st.sampled_from(_KNOWN[field.name])
        return st.one_of(known, known, known, _STRINGS)
    if field.type in _INTS:
        low, high = _INTS[field.type]
        return st.one_of(st.sampled_from([low, high, 0, 1, -1 if low else 2]), st.integers(low, high))
    if field.type in (F.TYPE_DOUBLE, F.TYPE_FLOAT):
        return _FLOATS
    if field.type == F.TYPE_BOOL:
        return st.booleans()
    if field.type == F.TYPE_STRING:
        return _STRINGS
    if field.type == F.TYPE_BYTES:
        return _BYTES
    if field.type == F.TYPE_ENUM:  # open enums: any int32, named or not
        return st.one_of(
            st.sampled_from([v.number for v in field.enum_type.values]), st.integers(-(2**31), 2**31 - 1)
        )
    raise AssertionError(f"no strategy for {field.full_name}")


def _class(descriptor: pb.Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


def messages(descriptor: pb.Descriptor, cls: type[Message], depth: int = 0) -> st.SearchStrategy[Message]:
    """Messages of ``cls`` with any subset of fields set to edge values (nested up to depth 2)."""
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.type == F.TYPE_MESSAGE:
            if depth >= 2 or field.message_type.GetOptions().map_entry:
                continue
            value = messages(field.message_type, _class(field.message_type), depth + 1)
        else:
            value = _scalar(field)
        if field.is_repeated:
            value = st.lists(value, max_size=3)
        parts[field.name] = value if field.name in _KNOWN else st.one_of(st.none(), value)

    def build(values: dict[str, Any]) -> Message:
        message = cls()
        for name, value in values.items():
            if value is None:
                continue
            target = getattr(message, name)
            if isinstance(value, list):
                target.extend(value)
            elif isinstance(value, Message):
                target.CopyFrom(value)
            else:
                setattr(message, name, value)
        return message

    return st.fixed_dictionaries(parts).map(build)


def _every_rpc() -> list[tuple[str, pb.MethodDescriptor, Any]]:
    found = []
    for module in (admin_pb2, gateway_pb2, transfer_pb2, health_pb2):
        for service in module.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                path = f"/{service.full_name}/{method.name}"
                if path not in SKIPPED:
                    found.append((path, method, module))
    # the calls features add to Admin, served under Admin's name (hot keys': Admin/HotKeys)
    for method in hotkeys_pb2.DESCRIPTOR.services_by_name["Admin"].methods:
        found.append((f"/{ADMIN_SERVICE.full_name}/{method.name}", method, hotkeys_pb2))
    return found


RPCS = _every_rpc()


@pytest.fixture(scope="module")
def mesh() -> Iterator[Mesh]:
    env = {
        "TUPLEMESH_ADMIN_DRAIN_ENABLED": "false",
        # hot keys counted and listed: Admin/HotKeys runs its handler, not only its refusal
        "TUPLEMESH_TOPOLOGY_HOTKEYS_ENABLED": "true",
        "TUPLEMESH_ADMIN_HOTKEYS_ENABLED": "true",
    }
    mesh = start_mesh("examples.pipeline:topology", 1, env=env)
    yield mesh
    assert mesh.stop() == [0]


def call_once(
    channel: grpc.Channel, path: str, method: pb.MethodDescriptor, requests: list[Message]
) -> grpc.StatusCode:
    response = _class(method.output_type)
    options = {
        "request_serializer": lambda m: m.SerializeToString(),
        "response_deserializer": response.FromString,
    }
    try:
        if method.client_streaming and method.server_streaming:
            call = channel.stream_stream(path, **options)(iter(requests), timeout=2)
        elif method.server_streaming:
            call = channel.unary_stream(path, **options)(requests[0], timeout=2)
        elif method.client_streaming:
            channel.stream_unary(path, **options)(iter(requests), timeout=5)
            return grpc.StatusCode.OK
        else:
            channel.unary_unary(path, **options)(requests[0], timeout=5)
            return grpc.StatusCode.OK
        for _ in call:
            call.cancel()  # one answer is enough: a watch would go on
            break
        return grpc.StatusCode.OK
    except grpc.RpcError as err:
        return err.code()


def _counts(mesh: Mesh, word: str, gateway: gateway_pb2_grpc.GatewayStub, start: dict[int, int]) -> int:
    best = 0
    for partition, offset in start.items():
        got = gateway.Fetch(
            gateway_pb2.FetchRequest(export="counts", partition=partition, start_offset=offset)
        )
        best = max([best, *(count for w, count in msgpack.unpackb(got.packed, raw=False) if w == word)])
    return best


def fuzz_rpc(
    channel: grpc.Channel, path: str, method: pb.MethodDescriptor, seen: Counter[tuple[str, str]]
) -> None:
    """PER_RPC generated calls of ``path``; each code seen is counted in ``seen``."""
    strategy = st.lists(messages(method.input_type, _class(method.input_type)), min_size=1, max_size=2)
    streaming = method.server_streaming or method.client_streaming
    allowed = (DELIBERATE | ENDED_BY_THE_TEST if streaming else DELIBERATE) | ALSO_DELIBERATE.get(path, set())

    @PER_RPC
    @given(strategy)
    def fuzz(requests: list[Message]) -> None:
        code = call_once(channel, path, method, requests)
        seen[(path, code.name)] += 1
        assert code in allowed, f"{path} answered {code.name} to {[str(r)[:300] for r in requests]}"

    fuzz()


def test_generated_requests_for_every_rpc_get_deliberate_codes_and_hurt_nothing(mesh: Mesh):
    channel = grpc.insecure_channel(
        mesh.address(), options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)]
    )
    seen: Counter[tuple[str, str]] = Counter()
    for path, method, _module in RPCS:
        fuzz_rpc(channel, path, method, seen)
        assert is_serving(mesh.health()), f"not SERVING after {path}"
    print("codes seen:", dict(sorted(seen.items())))
    assert {path for path, _ in seen} == {path for path, _, _ in RPCS}  # every RPC was called

    # nothing lost: a word published now is counted exactly
    gateway = gateway_pb2_grpc.GatewayStub(channel)
    offsets = gateway.Offsets(gateway_pb2.OffsetsRequest(export="counts"))
    start = {p.partition: p.end for p in offsets.partitions}
    rows = [gateway_pb2.PublishRequest(component="lines", rows_json=['["robustcheck robustcheck"]'] * 10)]
    assert [ack.accepted for ack in gateway.Publish(iter(rows), timeout=30)] == [10]
    eventually(lambda: _counts(mesh, "robustcheck", gateway, start) >= 20, message="20 counted")
    assert _counts(mesh, "robustcheck", gateway, start) == 20
    assert is_serving(mesh.health())
