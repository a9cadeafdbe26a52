"""Publishing one Spark partition into an IngestSpout through Gateway ``Publish``, with retries."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import msgpack
from pyspark.sql.datasource import WriterCommitMessage
from pyspark.sql.types import StructType

from tuplemesh.spark.channel import call_failed, gateway
from tuplemesh.spark.options import OptionError, Options
from tuplemesh.v1 import gateway_pb2

__all__ = ["PublishCommit", "column_indices", "publish_partition"]

#: answers that another attempt, on any worker, would get again: no retry
_FINAL = (
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
)


@dataclass
class PublishCommit(WriterCommitMessage):
    partition: int
    rows: int
    duplicates: int
    attempts: int


def column_indices(schema: StructType, columns: tuple[str, ...]) -> list[int]:
    """Positions in a row of the ``columns`` option's columns (every column when it is empty)."""
    names = [f.name for f in schema.fields]
    if not columns:
        return list(range(len(names)))
    missing = [c for c in columns if c not in names]
    if missing:
        raise OptionError(f"tuplemesh: option 'columns' names {missing}, not in the DataFrame's {names}")
    return [names.index(c) for c in columns]


def publish_partition(opts: Options, indices: list[int], rows: Iterator[Any], batch_id: str) -> PublishCommit:
    """Send one Spark partition; retry the whole partition (recognised by the Gateway) on failure."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context else 0
    requests: list[gateway_pb2.PublishRequest] = []
    chunk: list[list[Any]] = []
    for row in rows:
        chunk.append([row[i] for i in indices])
        if len(chunk) >= opts.batch_size:
            requests.append(_request(opts, batch_id, partition, len(requests) + 1, chunk))
            chunk = []
    if chunk:
        requests.append(_request(opts, batch_id, partition, len(requests) + 1, chunk))
    attempt = 0  # failures counted against ``retries``
    turn = 0  # which target to try next
    hosting = list(opts.targets)  # targets that may run the IngestSpout (NOT_FOUND removes one)
    while True:
        target = hosting[(partition + turn) % len(hosting)]
        try:
            with gateway(opts, target) as stub:
                acks = list(stub.Publish(iter(requests), timeout=opts.timeout * max(1, len(requests))))
            if len(acks) != len(requests):
                raise RuntimeError(
                    f"tuplemesh: {target} acknowledged {len(acks)} of {len(requests)} requests"
                )
            accepted = sum(a.accepted for a in acks)
            duplicates = sum(1 for a in acks if a.duplicate)
            return PublishCommit(partition, accepted, duplicates, attempt + 1)
        except grpc.RpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.NOT_FOUND and len(hosting) > 1:
                hosting.remove(target)  # no ingest task on that worker: not a failure
                continue
            if code in _FINAL or attempt >= opts.retries:
                raise call_failed("publishing to", target, exc) from None
            attempt += 1
            turn += 1
            time.sleep(min(5.0, 0.2 * 2**attempt))


def _request(opts: Options, batch_id: str, partition: int, sequence: int, rows: list[list[Any]]) -> Any:
    return gateway_pb2.PublishRequest(
        component=opts.component,
        packed=msgpack.packb(rows, use_bin_type=True, default=str),
        batch_id=batch_id,
        partition=partition,
        sequence=sequence,
    )
