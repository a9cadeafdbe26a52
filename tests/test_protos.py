"""The generated protobuf code is current: it matches what protos/ compiles to right now."""

from __future__ import annotations

import importlib

from google.protobuf import descriptor_pb2

from tuplemesh.protogen import compile_descriptor_set, proto_files


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


def test_task_message_round_trip():
    from tuplemesh.v1 import messages_pb2 as pb

    batch = pb.TransferBatch(topology_id="wc", sender=2, sequence=7)
    batch.messages.add(task=-1, payload=b"")
    batch.messages.add(task=12, payload=b"\x93\x01\x00\x91\xa3cow")
    decoded = pb.TransferBatch.FromString(batch.SerializeToString())
    assert decoded == batch
    assert [(m.task, m.payload) for m in decoded.messages] == [(-1, b""), (12, b"\x93\x01\x00\x91\xa3cow")]
