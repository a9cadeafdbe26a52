"""The generated protobuf code is current: it matches what protos/ compiles to right now, the
package carries the same .proto files, and nothing in the package needs the code generator."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from google.protobuf import descriptor_pb2

from tests.protogen import PACKAGED_PROTOS, PROTO_ROOT, compile_descriptor_set, proto_files

PACKAGE = Path(__file__).resolve().parents[1] / "services" / "tuplemesh"


def _clear_json_names(messages) -> None:
    for message in messages:
        for field in message.field:
            field.ClearField("json_name")
        _clear_json_names(message.nested_type)


def test_generated_code_matches_protos(tmp_path):
    out = tmp_path / "set.pb"
    compile_descriptor_set(out)
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    for proto in fresh.file:  # the descriptor set spells out json_name; generated code leaves it implicit
        _clear_json_names(proto.message_type)
    assert sorted(f.name for f in fresh.file) == proto_files()
    for proto in fresh.file:
        module_name = (
            "tuplemesh."
            + proto.name.removeprefix("tuplemesh/").removesuffix(".proto").replace("/", ".")
            + "_pb2"
        )
        module = importlib.import_module(module_name)
        generated = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        assert generated == proto, f"{proto.name} changed: run `make proto` and commit the result"


def test_the_package_carries_the_proto_files():
    # a link, not a copy: the package can never carry stale sources
    assert PACKAGED_PROTOS.is_symlink() and PACKAGED_PROTOS.resolve() == PROTO_ROOT.resolve()
    assert proto_files(PACKAGED_PROTOS) == [
        "tuplemesh/hotkeys/v1/hotkeys.proto",  # the call a feature adds to Admin, in its own package
        "tuplemesh/v1/admin.proto",
        "tuplemesh/v1/gateway.proto",
        "tuplemesh/v1/messages.proto",
        "tuplemesh/v1/transfer.proto",
    ]


def _imported_modules(source: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source.read_text(), str(source))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_nothing_in_the_package_imports_the_code_generator():
    sources = sorted(PACKAGE.rglob("*.py"))
    assert len(sources) > 50  # the walk sees the whole package
    offenders = [
        str(path.relative_to(PACKAGE))
        for path in sources
        if any(name.split(".")[0] == "grpc_tools" for name in _imported_modules(path))
    ]
    assert offenders == []


def test_task_message_round_trip():
    from tuplemesh.v1 import messages_pb2 as pb

    batch = pb.TransferBatch(topology_id="wc", sender=2, sequence=7)
    batch.messages.add(task=-1, payload=b"")
    batch.messages.add(task=12, payload=b"\x93\x01\x00\x91\xa3cow")
    decoded = pb.TransferBatch.FromString(batch.SerializeToString())
    assert decoded == batch
    assert [(m.task, m.payload) for m in decoded.messages] == [(-1, b""), (12, b"\x93\x01\x00\x91\xa3cow")]
