"""Calls a feature adds to Admin (`tuplemesh.core.admin_calls`): served as
``tuplemesh.v1.Admin/<method>`` beside Admin's own on a real gRPC server, called through
`admin_call`, described by reflection's pool with Admin's own; refused when they are not declared
in a service named Admin, do not match their behaviours or take a name Admin has already."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import ServiceDescriptor

from tuplemesh.core.admin_calls import ADMIN_SERVICE, AdminCalls, admin_call
from tuplemesh.server.reflection import reflection_pool, tuplemesh_services
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

Field = descriptor_pb2.FieldDescriptorProto


def declared(package: str, service: str, methods: list[tuple[str, bool, bool]]) -> ServiceDescriptor:
    """``package.service`` in a proto file of its own (in a pool of its own), whose methods
    ``(name, client streaming, server streaming)`` take and answer ``package.Ping``."""
    proto = descriptor_pb2.FileDescriptorProto(
        name=f"{package.replace('.', '/')}/{service.lower()}.proto", package=package, syntax="proto3"
    )
    ping = proto.message_type.add(name="Ping")
    ping.field.add(name="text", number=1, type=Field.TYPE_STRING, label=Field.LABEL_OPTIONAL)
    ping.field.add(name="count", number=2, type=Field.TYPE_UINT32, label=Field.LABEL_OPTIONAL)
    declared_service = proto.service.add(name=service)
    for name, client_streaming, server_streaming in methods:
        declared_service.method.add(
            name=name,
            input_type=f".{package}.Ping",
            output_type=f".{package}.Ping",
            client_streaming=client_streaming,
            server_streaming=server_streaming,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return pool.FindServiceByName(f"{package}.{service}")


FEATURE = declared("example.v1", "Admin", [("Echo", False, False), ("Countdown", False, True)])


def echo(request: Any, context: grpc.ServicerContext) -> Any:
    if not request.text:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, "text is empty")
    return type(request)(text=request.text.upper())


def countdown(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
    for left in range(request.count, 0, -1):
        yield type(request)(count=left)


def test_added_calls_are_served_as_admin_calls_beside_admin_own():
    calls = AdminCalls()
    calls.add(FEATURE, {"Echo": echo, "Countdown": countdown})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    admin_pb2_grpc.add_AdminServicer_to_server(admin_pb2_grpc.AdminServicer(), server)
    handler = calls.generic_handler()
    assert handler is not None
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        ping = FEATURE.methods_by_name["Echo"]
        call = admin_call(channel, ping)  # calls /tuplemesh.v1.Admin/Echo
        message = message_factory.GetMessageClass(ping.input_type)
        assert call(message(text="hot"), timeout=10).text == "HOT"
        with pytest.raises(grpc.RpcError) as err:  # the behaviour's own status reaches the caller
            call(message(), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and err.value.details() == "text is empty"
        stream = admin_call(channel, FEATURE.methods_by_name["Countdown"])
        assert [m.count for m in stream(message(count=3), timeout=10)] == [3, 2, 1]
        # Admin's own calls are still Admin's (the base servicer answers UNIMPLEMENTED)
        with pytest.raises(grpc.RpcError) as err:
            admin_pb2_grpc.AdminStub(channel).GetStatus(admin_pb2.GetStatusRequest(), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
        # the declaring service is not served under its own name
        with pytest.raises(grpc.RpcError) as err:
            channel.unary_unary("/example.v1.Admin/Echo")(b"", timeout=10)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        channel.close()
        server.stop(0)


def test_nothing_added_serves_nothing():
    calls = AdminCalls()
    assert calls.generic_handler() is None and calls.methods() == []


@pytest.mark.parametrize(
    ("service", "behaviours", "message"),
    [
        (
            declared("other.v1", "Tools", [("Echo", False, False)]),
            {"Echo": echo},
            "other.v1.Tools: the calls a feature adds to Admin are declared in a service named Admin",
        ),
        (
            FEATURE,
            {"Echo": echo},
            "example.v1.Admin declares Countdown, Echo; behaviours were given for Echo",
        ),
        (
            declared("clash.v1", "Admin", [("GetStatus", False, False)]),
            {"GetStatus": echo},
            "clash.v1.Admin.GetStatus: tuplemesh.v1.Admin has a call named GetStatus already",
        ),
    ],
)
def test_a_bad_declaration_is_refused_naming_it(service: ServiceDescriptor, behaviours: Any, message: str):
    with pytest.raises(ValueError) as err:
        AdminCalls().add(service, behaviours)
    assert str(err.value) == message


def test_two_features_adding_one_name_are_refused_naming_the_first():
    calls = AdminCalls()
    calls.add(FEATURE, {"Echo": echo, "Countdown": countdown})
    with pytest.raises(ValueError) as err:
        calls.add(declared("second.v1", "Admin", [("Echo", False, False)]), {"Echo": echo})
    assert str(err.value) == "second.v1.Admin.Echo: example.v1.Admin.Echo has a call named Echo already"


def test_reflection_describes_admin_with_the_added_calls_and_leaves_other_files_as_they_are():
    calls = AdminCalls()
    calls.add(FEATURE, {"Echo": echo, "Countdown": countdown})
    pool = reflection_pool(tuplemesh_services(), calls.methods())  # (which loads their files)
    admin = pool.FindServiceByName("tuplemesh.v1.Admin")
    own = [method.name for method in ADMIN_SERVICE.methods]
    assert [method.name for method in admin.methods] == [*own, "Echo", "Countdown"]
    added = admin.methods_by_name["Countdown"]
    assert added.input_type.full_name == "example.v1.Ping" and added.server_streaming
    assert "example/v1/admin.proto" in [file.name for file in admin.file.dependencies]
    transfer = pool.FindServiceByName("tuplemesh.v1.Transfer")
    assert [method.name for method in transfer.methods] == ["Stream"]
    # without added calls, Admin is described as its proto declares it
    plain = reflection_pool(["tuplemesh.v1.Admin"]).FindServiceByName("tuplemesh.v1.Admin")
    assert [method.name for method in plain.methods] == own


def test_a_refused_service_adds_none_of_its_calls():
    calls = AdminCalls()
    mixed = declared("mixed.v1", "Admin", [("Fine", False, False), ("Drain", False, False)])
    with pytest.raises(ValueError, match=r"tuplemesh\.v1\.Admin has a call named Drain already"):
        calls.add(mixed, {"Fine": echo, "Drain": echo})
    assert calls.methods() == [] and calls.generic_handler() is None


def test_calls_declared_in_a_file_importing_admins_are_refused_naming_it():
    # a pool holding Admin's file (and its imports), and a feature's file importing it
    pool = reflection_pool(tuplemesh_services())
    proto = descriptor_pb2.FileDescriptorProto(
        name="loop/v1/loop.proto", package="loop.v1", syntax="proto3", dependency=["tuplemesh/v1/admin.proto"]
    )
    proto.service.add(name="Admin").method.add(
        name="Status", input_type=".tuplemesh.v1.GetStatusRequest", output_type=".tuplemesh.v1.WorkerStatus"
    )
    pool.Add(proto)
    with pytest.raises(ValueError) as err:
        AdminCalls().add(pool.FindServiceByName("loop.v1.Admin"), {"Status": echo})
    assert str(err.value).startswith(
        "loop.v1.Admin: its file loop/v1/loop.proto imports tuplemesh/v1/admin.proto, directly or not"
    )
