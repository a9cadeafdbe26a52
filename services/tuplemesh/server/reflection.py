"""gRPC server reflection, both v1 (current clients) and v1alpha (grpcurl 1.8 speaks only it).

``grpcio-reflection`` implements v1alpha. v1 is the same protocol under another package name, so
its descriptors are derived from v1alpha's at start-up and its calls are served by the same
servicer, translating each message through its (identical) wire form.

Reflection answers from a descriptor pool of its own, holding the files of the services it lists
as they are, except ``tuplemesh/v1/admin.proto``: there, Admin gains the calls features add to it
(`tuplemesh.core.admin_calls`), with the feature's proto file as a dependency. So
``grpcurl describe tuplemesh.v1.Admin`` shows them and grpcurl calls them like Admin's own.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FileDescriptor, MethodDescriptor
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc

from tuplemesh.core.admin_calls import ADMIN_SERVICE

__all__ = ["V1_SERVICE", "enable_reflection", "tuplemesh_services"]

V1_SERVICE = "grpc.reflection.v1.ServerReflection"
_V1_FILE = "grpc/reflection/v1/reflection.proto"


def tuplemesh_services() -> list[str]:
    """Full names of every service in ``tuplemesh.v1``, with all its files loaded into the pool.

    Reflection's pool is filled from the default descriptor pool, which holds only the ``*_pb2``
    modules somebody imported: the servicer modules import the message files, not necessarily the file
    that declares the service (``transfer.proto``), so each one is imported here.
    """
    import tuplemesh.v1 as package

    names: list[str] = []
    for module_info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if module_info.name.endswith("_pb2"):
            module = importlib.import_module(f"{package.__name__}.{module_info.name}")
            names.extend(service.full_name for service in module.DESCRIPTOR.services_by_name.values())
    return names


def _v1_message_classes() -> tuple[Any, Any]:
    pool = descriptor_pool.Default()
    try:
        pool.FindFileByName(_V1_FILE)
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto()
        reflection_pb2.DESCRIPTOR.CopyToProto(proto)
        proto.name = _V1_FILE
        proto.package = "grpc.reflection.v1"
        old, new = ".grpc.reflection.v1alpha.", ".grpc.reflection.v1."
        for message in proto.message_type:
            for field in message.field:
                if field.type_name:  # assigning "" would mark a scalar field as typed
                    field.type_name = field.type_name.replace(old, new)
        for service in proto.service:
            for method in service.method:
                method.input_type = method.input_type.replace(old, new)
                method.output_type = method.output_type.replace(old, new)
        pool.Add(proto)
    request = pool.FindMessageTypeByName("grpc.reflection.v1.ServerReflectionRequest")
    response = pool.FindMessageTypeByName("grpc.reflection.v1.ServerReflectionResponse")
    return message_factory.GetMessageClass(request), message_factory.GetMessageClass(response)


def reflection_pool(service_names: Iterable[str], admin_calls: Sequence[MethodDescriptor] = ()) -> Any:
    """A descriptor pool with the file of every service of ``service_names`` (from the default
    pool) and their dependencies, Admin's file with ``admin_calls`` added to Admin."""
    default = descriptor_pool.Default()
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    adding: set[str] = set()  # files whose imports are being added (AdminCalls refuses a cycle)

    def add(file: FileDescriptor) -> None:
        if file.name in added:
            return
        if file.name in adding:
            raise ValueError(f"{file.name} would import itself once Admin describes the added calls")
        adding.add(file.name)
        for dependency in file.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        if file.name == ADMIN_SERVICE.file.name:
            [admin] = [service for service in proto.service if service.name == ADMIN_SERVICE.name]
            for method in admin_calls:
                declared_in = method.containing_service.file
                add(declared_in)
                if declared_in.name not in proto.dependency:
                    proto.dependency.append(declared_in.name)
                method.CopyToProto(admin.method.add())
        pool.Add(proto)
        added.add(file.name)

    for name in service_names:
        add(default.FindFileContainingSymbol(name))
    return pool


def enable_reflection(
    service_names: Iterable[str], server: grpc.Server, admin_calls: Sequence[MethodDescriptor] = ()
) -> None:
    """Serve reflection v1alpha and v1 for ``service_names`` (both reflection services included),
    describing Admin with ``admin_calls``, the calls features add to it."""
    v1_request, v1_response = _v1_message_classes()  # first: puts v1's file into the default pool
    names = [*service_names, reflection.SERVICE_NAME, V1_SERVICE]
    servicer = reflection.ReflectionServicer(names, pool=reflection_pool(names, admin_calls))
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)

    def v1_info(requests: Iterator[Any], context: grpc.ServicerContext) -> Iterator[Any]:
        alpha_requests = (
            reflection_pb2.ServerReflectionRequest.FromString(r.SerializeToString()) for r in requests
        )
        for answer in servicer.ServerReflectionInfo(alpha_requests, context):
            yield v1_response.FromString(answer.SerializeToString())

    handler = grpc.method_handlers_generic_handler(
        V1_SERVICE,
        {
            "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                v1_info,
                request_deserializer=v1_request.FromString,
                response_serializer=v1_response.SerializeToString,
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
