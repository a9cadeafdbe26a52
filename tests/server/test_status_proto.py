"""The snapshot <-> WorkerStatus conversion: every snapshot field survives the trip, and every
field of WorkerStatus (and of the messages it holds) is mapped or said to be filled elsewhere."""

from __future__ import annotations

import itertools
import typing
from collections.abc import Iterator
from dataclasses import MISSING, fields, is_dataclass, replace
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor

from tests.worker.wiring import wire
from tuplemesh.config import Config
from tuplemesh.core.feature_spec import registered_features
from tuplemesh.core.stats import HistogramSnapshot, WorkerSnapshot, field_paths
from tuplemesh.gateway.components import ExportBolt, IngestSpout
from tuplemesh.server.status_proto import field_pairs, snapshot_from_proto, snapshot_to_proto, spouts_quiet
from tuplemesh.topology import TopologyBuilder
from tuplemesh.v1 import admin_pb2
from tuplemesh.worker.executor import BoltExecutor


def filled(cls: type[Any], numbers: Iterator[int]) -> Any:
    """An instance of snapshot dataclass ``cls`` with every field set: each number, string and
    map key drawn anew from ``numbers`` (so no two fields hold the same value), each bool the
    opposite of its default, each optional dataclass present, each tuple two long."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in fields(cls):
        kwargs[f.name] = value_of(hints[f.name], f.default, numbers)
    return cls(**kwargs)


def value_of(hint: Any, default: Any, numbers: Iterator[int]) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if type(None) in args:  # optional: present
        (hint,) = (a for a in args if a is not type(None))
        return value_of(hint, MISSING, numbers)
    if hint is Any:  # JSON-able data (a feature's section): a number will do
        return next(numbers)
    if hint is bool:
        return default is not True  # the default flipped; True where there is none
    if hint is int:
        return next(numbers)
    if hint is float:
        return next(numbers) + 0.25
    if hint is str:
        return f"s{next(numbers)}"
    if hint is HistogramSnapshot:
        return HistogramSnapshot((float(next(numbers)),), (next(numbers), next(numbers)), next(numbers) + 0.5)
    if origin is tuple:
        return tuple(value_of(args[0], MISSING, numbers) for _ in range(2))
    if origin is dict:
        key = value_of(args[0], MISSING, numbers)
        return {key: value_of(args[1], MISSING, numbers)}
    assert is_dataclass(hint), f"no value for a {hint} field"
    return filled(hint, numbers)  # type: ignore[arg-type]


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """(dotted path, value, the field's default or MISSING) of every leaf of a snapshot."""
    for f in fields(value):
        child = getattr(value, f.name)
        items = child if isinstance(child, tuple) and child and is_dataclass(child[0]) else (child,)
        for item in items:
            if is_dataclass(item) and not isinstance(item, HistogramSnapshot):
                yield from leaves(item, f"{path}{f.name}.")
            else:
                yield f"{path}{f.name}", item, f.default


def proto_fields(descriptor: Descriptor, path: str = "") -> Iterator[str]:
    """Every field of a message as a dotted path, nested messages walked (a Histogram and a map
    are one field)."""
    for f in descriptor.fields:
        nested = f.message_type
        if (
            f.type == FieldDescriptor.TYPE_MESSAGE
            and nested is not admin_pb2.Histogram.DESCRIPTOR
            and not nested.GetOptions().map_entry
        ):
            yield from proto_fields(nested, f"{path}{f.name}.")
        else:
            yield f"{path}{f.name}"


def test_a_snapshot_with_every_field_set_survives_the_trip_unchanged():
    snapshot = filled(WorkerSnapshot, itertools.count(1000))
    values = [(path, value, default) for path, value, default in leaves(snapshot)]
    assert {path for path, _, _ in values} == set(field_paths())
    assert [path for path, value, default in values if value == default] == []
    numbers = [v for _, v, _ in values if not isinstance(v, bool | HistogramSnapshot)]
    assert len({repr(v) for v in numbers}) == len(numbers)  # no two fields alike

    status = snapshot_to_proto(snapshot, transport="grpc", state="SERVING", reports_json="{}", rss_bytes=7)
    assert snapshot_from_proto(admin_pb2.WorkerStatus.FromString(status.SerializeToString())) == snapshot
    assert (status.transport, status.state, status.reports_json, status.rss_bytes) == (
        "grpc",
        "SERVING",
        "{}",
        7,
    )
    assert status.idle is False  # local_queues_empty is set to False


def test_every_proto_field_and_every_snapshot_field_is_mapped_once():
    pairs = list(field_pairs())
    protos = [proto for _, proto in pairs]
    snapshots = [snapshot for snapshot, _ in pairs if snapshot is not None]
    assert sorted(protos) == sorted(set(protos)), "a WorkerStatus field mapped twice"
    assert sorted(snapshots) == sorted(set(snapshots)), "a snapshot field mapped twice"
    assert set(proto_fields(admin_pb2.WorkerStatus.DESCRIPTOR)) - set(protos) == set(), "not mapped"
    assert set(field_paths()) - set(snapshots) == set(), "not mapped"
    assert ("binding.duplicate_batches", "duplicate_batches") in pairs
    assert ("peers.connection.address", "peers.address") in pairs
    assert ("export_lost", "export_lost") in pairs  # filled by a feature (Gateway)


def test_unset_optional_fields_read_back_as_their_senders_meant():
    """A worker of a release without ``spouts_quiet`` is taken as quiet; a transport that does
    not count broadcasts sends none; a missing checkpoint or alignment is None."""
    snapshot = filled(WorkerSnapshot, itertools.count(1))
    status = snapshot_to_proto(snapshot)
    status.ClearField("spouts_quiet")
    status.binding.ClearField("broadcast_messages")
    status.ClearField("checkpoints")
    status.executors[0].ClearField("alignment")
    back = snapshot_from_proto(status)
    assert spouts_quiet(status) is True and back.spouts_quiet is True
    assert back.binding.broadcast_messages is None and back.checkpoints is None
    assert back.executors[0].alignment is None and back.executors[1].alignment is not None


def test_the_fields_registered_features_fill_go_through_the_same_table():
    builder = TopologyBuilder("features")
    builder.set_spout("rows", IngestSpout("rows", ["line"]))
    builder.set_bolt("out", ExportBolt("out", retention=10), tasks=2).fields_grouping("rows", ["line"])
    conf = Config({"topology.hotkeys.enabled": True})
    wired = wire(builder.build(), conf, lambda context: registered_features().build(context).values())
    # every registered one (batch tracing only where a tracer provider is set)
    assert {f.name for f in wired.features} >= {"ticks", "hotkeys", "sampling", "gateway"}
    BoltExecutor(wired.spec("out"), wired.wiring)  # attached: the Gateway counts its exports
    filled_by_features = {name: value for f in wired.features for name, value in f.snapshot_fields().items()}
    assert filled_by_features == {"export_lost": {"out": 0}}  # the Gateway's
    mapped = {snapshot for snapshot, _ in field_pairs() if snapshot is not None}
    assert set(filled_by_features) <= mapped
    snapshot = replace(filled(WorkerSnapshot, itertools.count(1)), **filled_by_features)
    assert snapshot_from_proto(snapshot_to_proto(snapshot)) == snapshot
