"""The Gateway gRPC service: a thin servicer over one worker's ingest queues and export logs."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import grpc
import msgpack

from tuplemesh.gateway.ingest import IngestQueue
from tuplemesh.gateway.registry import ExportInfo, GatewayRegistry
from tuplemesh.grpcutil import json_array
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc

__all__ = ["GatewayServicer"]

_REMEMBERED = 100_000  # (component, batch, partition) entries kept for recognising retries


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    """Serves the registry of the worker it was built with (``Worker.gateway``), and only it."""

    def __init__(
        self,
        registry: GatewayRegistry,
        worker: int,
        accepting: Any = lambda: True,
        put_timeout: float = 1.0,
    ) -> None:
        self.registry = registry
        self.accepting = accepting  # False while the worker drains: publishers go elsewhere
        self.worker = worker
        self.put_timeout = put_timeout
        self._accepted: OrderedDict[tuple[str, str, int], int] = OrderedDict()
        self._lock = threading.Lock()
        self._round_robin = 0
        self.duplicates = 0

    def _queues(self, component: str, context: grpc.ServicerContext) -> list[IngestQueue]:
        if not self.accepting() or self.registry.closed:
            context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"worker {self.worker} is draining or stopping: publish elsewhere",
            )
        queues = self.registry.ingest_queues(component)
        if not queues:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"no IngestSpout {component!r} runs on worker {self.worker}"
            )
        return queues

    def _export(self, name: str, context: grpc.ServicerContext) -> ExportInfo:
        info = self.registry.export(name)
        if info is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no ExportBolt {name!r} runs on worker {self.worker}")
        return info  # type: ignore[return-value]

    def _put(self, queues: list[IngestQueue], rows: list[list[Any]], context: grpc.ServicerContext) -> None:
        with self._lock:
            queue = queues[self._round_robin % len(queues)]
            self._round_robin += 1
        while not queue.put_many(rows, self.put_timeout):  # full: the stream waits (backpressure)
            if queue.closed:
                context.abort(
                    grpc.StatusCode.UNAVAILABLE, f"worker {self.worker} is stopping: publish elsewhere"
                )
            if not context.is_active():
                context.abort(grpc.StatusCode.CANCELLED, "publisher went away")

    @staticmethod
    def _rows(request: Any, context: grpc.ServicerContext) -> list[list[Any]]:
        try:
            if request.packed:
                rows = msgpack.unpackb(request.packed, raw=False)
            else:
                rows = [json.loads(r) for r in request.rows_json]
        except ValueError as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"rows are not msgpack/JSON: {exc}")
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "rows must be an array of arrays of values")
        return rows

    def Publish(
        self, request_iterator: Iterator[gateway_pb2.PublishRequest], context: grpc.ServicerContext
    ) -> Iterator[gateway_pb2.PublishAck]:
        for request in request_iterator:
            queues = self._queues(request.component, context)
            key = (request.component, request.batch_id, request.partition)
            with self._lock:
                done = self._accepted.get(key, 0) if request.batch_id else 0
            if request.batch_id and request.sequence <= done:
                with self._lock:
                    self.duplicates += 1
                yield gateway_pb2.PublishAck(sequence=request.sequence, accepted=0, duplicate=True)
                continue
            rows = self._rows(request, context)
            if rows:
                self._put(queues, rows, context)
            if request.batch_id:
                with self._lock:
                    self._accepted[key] = request.sequence
                    self._accepted.move_to_end(key)
                    while len(self._accepted) > _REMEMBERED:
                        self._accepted.popitem(last=False)
            yield gateway_pb2.PublishAck(sequence=request.sequence, accepted=len(rows))

    def PublishOne(
        self, request: gateway_pb2.PublishOneRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.PublishAck:
        queues = self._queues(request.component, context)
        row = json_array(request.values_json, "values_json", context)
        self._put(queues, [row], context)
        return gateway_pb2.PublishAck(sequence=0, accepted=1)

    def Fetch(
        self, request: gateway_pb2.FetchRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.FetchResponse:
        info = self._export(request.export, context)
        log = info.logs.get(request.partition)
        if log is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"partition {request.partition} of {request.export!r} is not on worker {self.worker} "
                f"(here: {sorted(info.logs)})",
            )
        limit = request.max_records or 10_000
        try:
            records, end = log.fetch(request.start_offset, limit)  # type: ignore[union-attr]
        except ValueError as exc:
            context.abort(grpc.StatusCode.OUT_OF_RANGE, str(exc))
        return gateway_pb2.FetchResponse(
            packed=msgpack.packb(records, use_bin_type=True),
            count=len(records),
            next_offset=request.start_offset + len(records),
            end_offset=end,
            records_json=json.dumps(records, default=repr) if request.json else "",
        )

    def Offsets(
        self, request: gateway_pb2.OffsetsRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.OffsetsResponse:
        info = self._export(request.export, context)
        return gateway_pb2.OffsetsResponse(
            partitions=[
                gateway_pb2.PartitionOffsets(partition=p, start=log.start, end=log.end)
                for p, log in sorted(info.logs.items())
            ],
            total_partitions=info.total_partitions,
            fields=info.fields,
            schema=info.schema,
        )

    def Commit(
        self, request: gateway_pb2.CommitRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.CommitResponse:
        info = self._export(request.export, context)
        log = info.logs.get(request.partition)
        if log is None:
            context.abort(
                grpc.StatusCode.NOT_FOUND, f"partition {request.partition} of {request.export!r} is not here"
            )
        return gateway_pb2.CommitResponse(start=log.commit(request.offset))  # type: ignore[union-attr]
