"""Finding an ExportBolt's partitions across the workers and fetching a range of one of them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import msgpack
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from tuplemesh.spark.arrow import to_record_batch
from tuplemesh.spark.channel import call_failed, gateway
from tuplemesh.spark.options import Options
from tuplemesh.v1 import gateway_pb2

__all__ = ["ExportRange", "export_offsets", "read_range"]


@dataclass
class ExportRange(InputPartition):
    target: str
    partition: int
    start: int
    end: int


def export_offsets(opts: Options) -> tuple[dict[int, tuple[str, int, int]], gateway_pb2.OffsetsResponse]:
    """partition -> (target, start, end) across every worker, and one Offsets answer (for the schema)."""
    found: dict[int, tuple[str, int, int]] = {}
    answer = None
    for target in opts.targets:
        try:
            with gateway(opts, target) as stub:
                reply = stub.Offsets(gateway_pb2.OffsetsRequest(export=opts.export), timeout=opts.timeout)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.NOT_FOUND:
                continue  # no partition of this export on that worker
            raise call_failed("Offsets from", target, exc) from None
        answer = reply
        for p in reply.partitions:
            found[p.partition] = (target, p.start, p.end)
    if answer is None:
        raise RuntimeError(f"tuplemesh: no worker of {list(opts.targets)} runs an ExportBolt {opts.export!r}")
    if len(found) != answer.total_partitions:
        missing = sorted(set(range(answer.total_partitions)) - set(found))
        raise RuntimeError(
            f"tuplemesh: partitions {missing} of {opts.export!r} were not found on {list(opts.targets)}"
        )
    return found, answer


def read_range(opts: Options, part: ExportRange, schema: StructType) -> Iterator[Any]:
    """The records of one range as Arrow record batches, one per Fetch."""
    from pyspark.sql.pandas.types import to_arrow_schema

    arrow_schema = to_arrow_schema(schema)
    with gateway(opts, part.target) as stub:
        offset = part.start
        while offset < part.end:
            got = stub.Fetch(
                gateway_pb2.FetchRequest(
                    export=opts.export, partition=part.partition, start_offset=offset,
                    max_records=min(opts.batch_size * 10, part.end - offset),
                ),
                timeout=opts.timeout,
            )  # fmt: skip
            if got.count == 0:
                raise RuntimeError(
                    f"tuplemesh: {part.target} returned no records at offset {offset} of {part.end}"
                )
            yield to_record_batch(msgpack.unpackb(got.packed, raw=False), arrow_schema, opts.export)
            offset = got.next_offset
