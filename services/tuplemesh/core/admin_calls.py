"""Calls a feature adds to the worker's Admin service (``tuplemesh.v1.Admin``).

A feature declares them in its own proto package, as the methods of a service named ``Admin``
(``<package>.v1.Admin``), and gives each its behaviour in ``Feature.serve``
(`AdminCalls.add`). The worker serves every such method as ``tuplemesh.v1.Admin/<method>``, beside
Admin's own calls and under the same TLS, bearer token and call admission; server reflection
describes Admin with them, so grpcurl calls them as it calls any Admin call, with no proto file.
The service they are declared in is never served under its own name. Admin's own proto names no
feature: the calls join it when a worker serves.

`admin_call` makes the client side of such a call on a channel (the web UI asks the peers this way).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import FileDescriptor, MethodDescriptor, ServiceDescriptor

from tuplemesh.grpcutil import handler_factory
from tuplemesh.v1 import admin_pb2

__all__ = ["ADMIN_SERVICE", "AdminCall", "AdminCalls", "admin_call", "method_handler"]

#: Admin as its own proto declares it: the calls features add may not take its methods' names.
ADMIN_SERVICE: ServiceDescriptor = admin_pb2.DESCRIPTOR.services_by_name["Admin"]


def _messages(method: MethodDescriptor) -> tuple[Any, Any]:
    return (
        message_factory.GetMessageClass(method.input_type),
        message_factory.GetMessageClass(method.output_type),
    )


def method_handler(method: MethodDescriptor, behaviour: Callable[..., Any]) -> grpc.RpcMethodHandler:
    """A gRPC handler running ``behaviour`` for ``method``, of the kind its descriptor declares
    (unary or streaming on either side), taking and answering its declared messages."""
    request, response = _messages(method)
    make = handler_factory(method.client_streaming, method.server_streaming)
    return make(
        behaviour, request_deserializer=request.FromString, response_serializer=response.SerializeToString
    )


@dataclass(frozen=True)
class AdminCall:
    """One call a feature added: its method as the feature's proto declares it, and its handler."""

    method: MethodDescriptor
    handler: grpc.RpcMethodHandler


class AdminCalls:
    """The calls features add to Admin in one worker, by method name."""

    def __init__(self) -> None:
        self.calls: dict[str, AdminCall] = {}

    def add(self, declared: ServiceDescriptor, behaviours: Mapping[str, Callable[..., Any]]) -> None:
        """Serve every method of ``declared`` (a service named ``Admin`` in the feature's proto) as
        an Admin call, run by ``behaviours[method name]`` (``(request, context) -> response``, or
        an iterator for a streaming side). ValueError, naming the method, for a service of another
        name, behaviours that do not match its methods one for one, a name Admin has already, or a
        proto file that imports Admin's (reflection describes Admin with the call, so Admin's file
        would import itself); nothing is added then."""
        if declared.name != ADMIN_SERVICE.name:
            raise ValueError(
                f"{declared.full_name}: the calls a feature adds to Admin are declared in a service "
                f"named {ADMIN_SERVICE.name}"
            )
        declared_names = sorted(method.name for method in declared.methods)
        if sorted(behaviours) != declared_names:
            raise ValueError(
                f"{declared.full_name} declares {', '.join(declared_names)}; behaviours were given "
                f"for {', '.join(sorted(behaviours)) or 'none'}"
            )
        if _imports(declared.file, ADMIN_SERVICE.file.name):
            raise ValueError(
                f"{declared.full_name}: its file {declared.file.name} imports "
                f"{ADMIN_SERVICE.file.name}, directly or not, which then would import it back: declare "
                "the messages the calls need in the feature's own files"
            )
        for method in declared.methods:
            taken = self.calls.get(method.name)
            if method.name in ADMIN_SERVICE.methods_by_name or taken is not None:
                where = ADMIN_SERVICE.full_name if taken is None else taken.method.full_name
                raise ValueError(f"{method.full_name}: {where} has a call named {method.name} already")
        for method in declared.methods:
            self.calls[method.name] = AdminCall(method, method_handler(method, behaviours[method.name]))

    def generic_handler(self) -> grpc.GenericRpcHandler | None:
        """The handler serving every added call under Admin's name; None when there is none."""
        if not self.calls:
            return None
        return grpc.method_handlers_generic_handler(
            ADMIN_SERVICE.full_name, {name: call.handler for name, call in self.calls.items()}
        )

    def methods(self) -> list[MethodDescriptor]:
        """The added methods as declared, in the order they were added (for server reflection)."""
        return [call.method for call in self.calls.values()]


def _imports(file: FileDescriptor, name: str) -> bool:
    """Whether ``file`` imports the file named ``name``, directly or through its imports."""
    return any(d.name == name or _imports(d, name) for d in file.dependencies)


def admin_call(channel: grpc.Channel, method: MethodDescriptor) -> Any:
    """The client side of ``method``, a call a feature adds to Admin, on ``channel``: a
    multi-callable of the method's kind calling ``tuplemesh.v1.Admin/<method>``."""
    request, response = _messages(method)
    kind = {
        (False, False): channel.unary_unary,
        (False, True): channel.unary_stream,
        (True, False): channel.stream_unary,
        (True, True): channel.stream_stream,
    }[(method.client_streaming, method.server_streaming)]
    return kind(
        f"/{ADMIN_SERVICE.full_name}/{method.name}",
        request_serializer=request.SerializeToString,
        response_deserializer=response.FromString,
    )
