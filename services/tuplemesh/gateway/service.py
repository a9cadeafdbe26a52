"""The Gateway gRPC service: a thin servicer over one worker's ingest queues and export logs.

Publish answers a request only once its rows are held (see `PublishTicket`): a reader thread per
stream takes requests and queues their rows while the handler answers, in order, as each
request's ticket settles, so a producer may keep a window of requests in flight.
"""

from __future__ import annotations

import json
import queue
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import msgpack

from tuplemesh import tracing
from tuplemesh.columnar import columns_to_rows, rows_to_columns
from tuplemesh.gateway import arrow_ipc
from tuplemesh.gateway.export_log import ExportLog, OffsetCommitted, RaggedRecords
from tuplemesh.gateway.ingest import IngestQueue, columns_of
from tuplemesh.gateway.registry import ExportInfo, GatewayRegistry
from tuplemesh.gateway.ticket import PublishTicket
from tuplemesh.grpcutil import json_array, reject
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc

__all__ = ["GatewayServicer"]

_REMEMBERED = 100_000  # (component, batch, partition, sequence) tickets kept for recognising retries
_WINDOW = 64  # requests of one stream accepted ahead of their answers
_POLL = 0.2  # seconds between checks that the publisher and the worker are still there

#: OpenTelemetry server spans of the publish calls (each a child of the caller's traceparent)
PUBLISH_SPAN = "tuplemesh.v1.Gateway/Publish"
PUBLISH_ONE_SPAN = "tuplemesh.v1.Gateway/PublishOne"
_RPC_PUBLISH = {"rpc.system": "grpc", "rpc.service": "tuplemesh.v1.Gateway", "rpc.method": "Publish"}
_RPC_PUBLISH_ONE = {**_RPC_PUBLISH, "rpc.method": "PublishOne"}


@dataclass
class _Accepted:
    """A request the stream's reader took: its ticket, and how to answer it once settled."""

    sequence: int
    ticket: PublishTicket
    published: int
    duplicate: bool


@dataclass
class _Refused:
    """The stream's reader stopped at a bad request (answered after those before it)."""

    code: grpc.StatusCode
    details: str


_END = object()  # the publisher half-closed the stream
#: records whose size a columns Fetch measures before it decides how to meet its byte budget
_BUDGET_SAMPLE = 32


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    """Serves the registry of the worker it was built with (its `GatewayFeature`'s), and only it."""

    def __init__(
        self,
        registry: GatewayRegistry,
        worker: int,
        accepting: Any = lambda: True,
        put_timeout: float = 1.0,
        fetch_max_bytes: int = 8 * 1024 * 1024,
        max_message_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        self.registry = registry
        self.fetch_max_bytes = fetch_max_bytes  # gateway.fetch.max.bytes
        self.max_message_bytes = max_message_bytes  # messaging.max.message.bytes: the hard cap
        self.accepting = accepting  # False while the worker drains: publishers go elsewhere
        self.worker = worker
        self.put_timeout = put_timeout
        self._tickets: OrderedDict[tuple[str, str, int, int], PublishTicket] = OrderedDict()
        self._lock = threading.Lock()
        self._round_robin = 0
        self.duplicates = 0
        self.tracer = tracing.tracer()  # OpenTelemetry; None: not tracing

    def _refusal(self, component: str) -> _Refused | None:
        if not self.accepting() or self.registry.closed:
            return _Refused(
                grpc.StatusCode.UNAVAILABLE,
                f"worker {self.worker} is draining or stopping: publish elsewhere",
            )
        if not self.registry.ingest_queues(component):
            return _Refused(
                grpc.StatusCode.NOT_FOUND, f"no IngestSpout {component!r} runs on worker {self.worker}"
            )
        return None

    def _export(self, name: str, context: grpc.ServicerContext) -> ExportInfo:
        info = self.registry.export(name)
        if info is None:
            reject(context, grpc.StatusCode.NOT_FOUND, f"no ExportBolt {name!r} runs on worker {self.worker}")
        return info

    def _log(self, request: Any, context: grpc.ServicerContext) -> ExportLog:
        """The log of the request's (export, partition), in the request's epoch when it names one."""
        info = self._export(request.export, context)
        log = info.logs.get(request.partition)
        if log is None:
            reject(
                context,
                grpc.StatusCode.NOT_FOUND,
                f"partition {request.partition} of {request.export!r} is not on worker {self.worker} "
                f"(here: {sorted(info.logs)})",
            )
        self._check_restored(request.export, [(request.partition, log)], context)
        if request.epoch and request.epoch != log.epoch:
            reject(
                context,
                grpc.StatusCode.FAILED_PRECONDITION,
                f"partition {request.partition} of {request.export!r} has log epoch {log.epoch}, "
                f"the offset given belongs to epoch {request.epoch}: the log restarted (its worker "
                "did), read it again from its start",
            )
        return log

    def _check_restored(
        self, export: str, logs: list[tuple[int, ExportLog]], context: grpc.ServicerContext
    ) -> None:
        """UNAVAILABLE while a log is still the fresh one of a starting worker: its epoch and
        offsets are not the ones readers know until the checkpoint restores it."""
        restoring = [p for p, log in logs if log.restoring]
        if restoring:
            reject(
                context,
                grpc.StatusCode.UNAVAILABLE,
                f"partition(s) {', '.join(map(str, restoring))} of {export!r} on worker {self.worker} "
                "are being restored from the last checkpoint: retry shortly",
            )

    def _put(
        self, component: str, ticket: PublishTicket, columns: list[list[Any]], context: Any
    ) -> _Refused | None:
        """Queue the ticket's rows (as ``columns``) on one ingest task, waiting while its queue
        is full (backpressure)."""
        queues: list[IngestQueue] = self.registry.ingest_queues(component)
        if not queues:
            return _Refused(
                grpc.StatusCode.UNAVAILABLE, f"worker {self.worker} is stopping: publish elsewhere"
            )
        with self._lock:
            target = queues[self._round_robin % len(queues)]
            self._round_robin += 1
        while not target.put(ticket, columns, self.put_timeout):
            if target.closed:
                ticket.fail_open()
                return _Refused(
                    grpc.StatusCode.UNAVAILABLE, f"worker {self.worker} is stopping: publish elsewhere"
                )
            if not context.is_active():
                ticket.fail_open()
                return _Refused(grpc.StatusCode.CANCELLED, "publisher went away")
        return None

    def _fields(self, component: str) -> list[str] | None:
        """The declared fields of ingest ``component`` (None: not found or stopping, which
        ``_put`` answers)."""
        queues = self.registry.ingest_queues(component)
        return queues[0].fields if queues else None

    @staticmethod
    def _misfit(component: str, fields: list[str], rows: list[list[Any]]) -> _Refused | None:
        """INVALID_ARGUMENT for the first row without one value per declared field: the spout
        could not emit it, and its publisher would wait for an answer that never comes."""
        for index, row in enumerate(rows):
            if len(row) != len(fields):
                return _Refused(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"row {index} has {len(row)} value(s); IngestSpout {component!r} declares "
                    f"{len(fields)} field(s) {fields}",
                )
        return None

    @staticmethod
    def _columns_misfit(component: str, fields: list[str], columns: Any) -> _Refused | None:
        """INVALID_ARGUMENT unless ``columns`` is one array per declared field, all of one length."""
        if not isinstance(columns, list) or not all(isinstance(c, list) for c in columns):
            return _Refused(grpc.StatusCode.INVALID_ARGUMENT, "packed_columns must be an array of arrays")
        if len(columns) != len(fields):
            return _Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{len(columns)} column(s); IngestSpout {component!r} declares "
                f"{len(fields)} field(s) {fields}",
            )
        lengths = sorted({len(column) for column in columns})
        if len(lengths) > 1:
            return _Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"columns of unequal lengths {lengths}: one value per row in each",
            )
        return None

    @staticmethod
    def _decoded(request: Any) -> Any:
        """The request's rows (``packed`` or ``rows_json``) or columns (``packed_columns``), decoded;
        a `_Refused` when they do not decode or when more than one of the three is given."""
        if sum(map(bool, (request.packed, request.rows_json, request.packed_columns))) > 1:
            return _Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                "give the rows one way: packed, rows_json or packed_columns, not several",
            )
        try:
            if request.packed_columns:
                return msgpack.unpackb(request.packed_columns, raw=False)
            if request.packed:
                return msgpack.unpackb(request.packed, raw=False)
            return [json.loads(r) for r in request.rows_json]
        except ValueError as exc:
            return _Refused(grpc.StatusCode.INVALID_ARGUMENT, f"rows are not msgpack/JSON: {exc}")
        except RecursionError:
            return _Refused(grpc.StatusCode.INVALID_ARGUMENT, "rows are nested too deeply")

    def _columns(self, request: Any) -> tuple[list[list[Any]], int] | _Refused | None:
        """The request's rows as columns of the spout's fields, and how many rows: rows are
        checked and turned into columns here, columns checked as they are. None when the
        component is not found or stops (``_put`` answers); a `_Refused` for bad input."""
        decoded = self._decoded(request)
        if isinstance(decoded, _Refused):
            return decoded
        fields = self._fields(request.component)
        if fields is None:
            return None
        if request.packed_columns:
            refused = self._columns_misfit(request.component, fields, decoded)
            if refused is not None:
                return refused
            return decoded, len(decoded[0]) if decoded else 0
        if not isinstance(decoded, list) or not all(isinstance(r, list) for r in decoded):
            return _Refused(grpc.StatusCode.INVALID_ARGUMENT, "rows must be an array of arrays of values")
        refused = self._misfit(request.component, fields, decoded)
        if refused is not None:
            return refused
        return columns_of(decoded, len(fields)), len(decoded)

    def _accept(self, request: gateway_pb2.PublishRequest, context: Any) -> _Accepted | _Refused:
        """Queue one request's rows (or recognise it as a retry) without waiting for them to be held."""
        refused = self._refusal(request.component)
        if refused is not None:
            return refused
        key = (request.component, request.batch_id, request.partition, request.sequence)
        with self._lock:
            earlier = self._tickets.get(key) if request.batch_id else None
        if earlier is not None and not (earlier.settled and earlier.failures):
            with self._lock:
                self.duplicates += 1
            return _Accepted(request.sequence, earlier, 0, True)  # held, or in flight: wait for it
        decoded = self._columns(request)
        if isinstance(decoded, _Refused):
            return decoded
        if decoded is None:  # its queues closed since ``_refusal`` looked: the worker stops
            return _Refused(
                grpc.StatusCode.UNAVAILABLE, f"worker {self.worker} is stopping: publish elsewhere"
            )
        columns, count = decoded
        if earlier is not None and count != earlier.size:
            return _Refused(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"request {request.sequence} of batch {request.batch_id!r} partition {request.partition} "
                f"has {count} rows, its first attempt had {earlier.size}: "
                "a retry must resend the same rows",
            )
        ticket = earlier.retry() if earlier is not None else PublishTicket(count)
        if request.batch_id:
            with self._lock:
                self._tickets[key] = ticket
                self._tickets.move_to_end(key)
                while len(self._tickets) > _REMEMBERED:
                    self._tickets.popitem(last=False)
        if ticket.indices:
            refused = self._put(request.component, ticket, columns, context)
            if refused is not None:
                return refused
        return _Accepted(request.sequence, ticket, len(ticket.indices), False)

    def _read_requests(
        self,
        requests: Iterator[gateway_pb2.PublishRequest],
        context: Any,
        window: queue.Queue[Any],
        stop: threading.Event,
    ) -> None:
        """The stream's reader thread: accept requests until the publisher half-closes or one is refused."""
        last: Any = _END
        try:
            for request in requests:
                if stop.is_set():
                    return
                item = self._accept(request, context)
                self._offer(window, item, stop)
                if isinstance(item, _Refused):
                    return
        except Exception as exc:  # the publisher cancelled, or the call ended: the handler sees it too
            last = _Refused(grpc.StatusCode.CANCELLED, f"publish stream ended: {exc}")
        self._offer(window, last, stop)

    @staticmethod
    def _offer(window: queue.Queue[Any], item: Any, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                window.put(item, timeout=_POLL)
                return
            except queue.Full:
                continue

    def _await(self, ticket: PublishTicket, sequence: int, context: grpc.ServicerContext) -> bool:
        """Wait until ``ticket`` settles; False when the publisher left. Aborts when rows failed
        (ABORTED: publish again) or the worker stops before they are held (UNAVAILABLE)."""
        while not ticket.wait(_POLL):
            if not context.is_active():
                return False
            if self.registry.closed:
                reject(
                    context,
                    grpc.StatusCode.UNAVAILABLE,
                    f"worker {self.worker} stopped before request {sequence} was held: "
                    "publish it again elsewhere",
                )
        if ticket.failures:
            reject(
                context,
                grpc.StatusCode.ABORTED,
                f"{ticket.failures} row(s) of request {sequence} failed or timed out in the topology on "
                f"worker {self.worker}: publish it again with the same ids (only those rows are published)",
            )
        return True

    def Publish(
        self, request_iterator: Iterator[gateway_pb2.PublishRequest], context: grpc.ServicerContext
    ) -> Iterator[gateway_pb2.PublishAck]:
        if self.tracer is None:
            yield from self._publish(request_iterator, context)
            return
        metadata = context.invocation_metadata()
        with tracing.server_span(self.tracer, PUBLISH_SPAN, metadata, _RPC_PUBLISH) as span:
            accepted = requests = 0
            for ack in self._publish(request_iterator, context):
                accepted, requests = accepted + ack.accepted, requests + 1
                yield ack
            span.set_attribute("tuplemesh.accepted", accepted)
            span.set_attribute("tuplemesh.requests", requests)

    def _publish(
        self, request_iterator: Iterator[gateway_pb2.PublishRequest], context: grpc.ServicerContext
    ) -> Iterator[gateway_pb2.PublishAck]:
        window: queue.Queue[Any] = queue.Queue(maxsize=_WINDOW)
        stop = threading.Event()
        reader = threading.Thread(
            target=self._read_requests,
            args=(request_iterator, context, window, stop),
            name="gateway-publish",
            daemon=True,
        )
        reader.start()
        try:
            while True:
                try:
                    item = window.get(timeout=_POLL)
                except queue.Empty:
                    if not context.is_active():
                        return
                    continue
                if item is _END:
                    return
                if isinstance(item, _Refused):
                    reject(context, item.code, item.details)
                if not self._await(item.ticket, item.sequence, context):
                    return
                yield gateway_pb2.PublishAck(
                    sequence=item.sequence, accepted=item.published, duplicate=item.duplicate
                )
        finally:
            stop.set()

    def PublishOne(
        self, request: gateway_pb2.PublishOneRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.PublishAck:
        if self.tracer is None:
            return self._publish_one(request, context)
        attributes = {**_RPC_PUBLISH_ONE, "tuplemesh.component": request.component}
        metadata = context.invocation_metadata()
        with tracing.server_span(self.tracer, PUBLISH_ONE_SPAN, metadata, attributes) as span:
            ack = self._publish_one(request, context)
            span.set_attribute("tuplemesh.accepted", ack.accepted)
            return ack

    def _publish_one(
        self, request: gateway_pb2.PublishOneRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.PublishAck:
        refused = self._refusal(request.component)
        if refused is not None:
            reject(context, refused.code, refused.details)
        row = json_array(request.values_json, "values_json", context)
        fields = self._fields(request.component) or []
        refused = self._misfit(request.component, fields, [row]) if fields else None
        if refused is not None:
            reject(context, refused.code, refused.details)
        ticket = PublishTicket(1)
        refused = self._put(request.component, ticket, [[value] for value in row], context)
        if refused is not None:
            reject(context, refused.code, refused.details)
        self._await(ticket, 0, context)
        return gateway_pb2.PublishAck(sequence=0, accepted=1)

    def Fetch(
        self, request: gateway_pb2.FetchRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.FetchResponse:
        log = self._log(request, context)
        limit = request.max_records or 10_000
        # a byte budget as well as a count: records of legal size could otherwise add up to an
        # answer above the message limit, which gRPC refuses: the partition would be unreadable
        budget = min(request.max_bytes or self.fetch_max_bytes, self.max_message_bytes)
        packer = msgpack.Packer(use_bin_type=True)
        packed, packed_columns, arrow, texts = b"", b"", b"", ""
        try:
            if request.columns and not request.json:  # columns as the log keeps them: no rows
                columns, count, end = log.fetch_columns(request.start_offset, limit)
                if request.arrow:
                    count, arrow = self._arrow_within(request, columns, count, budget, packer, context)
                if not arrow:
                    count, packed_columns = self._columns_within(columns, count, budget, packer, packer.pack)
            else:
                records, end = log.fetch(request.start_offset, limit)
                rows, texts = self._rows_within(records, budget, packer, request.json)
                records = records[: len(rows)]
                count = len(records)
                if request.columns:  # no larger than the rows: one array header per field, not per row
                    packed_columns = packer.pack(_columns_of(records))
                else:
                    packed = packer.pack_array_header(len(rows)) + b"".join(rows)
        except RaggedRecords:
            reject(context, grpc.StatusCode.INTERNAL, "records of unequal lengths cannot be columns")
        except OffsetCommitted as exc:
            reject(context, grpc.StatusCode.OUT_OF_RANGE, f"{exc}; log epoch {log.epoch}")
        return gateway_pb2.FetchResponse(
            packed=packed,
            packed_columns=packed_columns,
            arrow_ipc=arrow,
            count=count,
            next_offset=request.start_offset + count,
            end_offset=end,
            records_json=texts,
            epoch=log.epoch,
        )

    @staticmethod
    def _rows_within(
        records: Sequence[Sequence[Any]], budget: int, packer: msgpack.Packer, as_json: bool
    ) -> tuple[list[bytes], str]:
        """The first records whose msgpack encodings (and JSON texts, ``as_json``) fit ``budget``
        bytes, each encoded, and the JSON array of them; at least one record, however large: a
        fetch always makes progress."""
        packed: list[bytes] = []
        texts: list[str] = []
        size = 0
        for record in records:
            one = packer.pack(record)
            text = json.dumps(record, default=repr) if as_json else ""
            size += len(one) + len(text)
            if packed and size > budget:
                break
            packed.append(one)
            texts.append(text)
        return packed, "[" + ", ".join(texts) + "]" if as_json else ""

    def _arrow_within(
        self,
        request: gateway_pb2.FetchRequest,
        columns: list[list[Any]],
        count: int,
        budget: int,
        packer: msgpack.Packer,
        context: grpc.ServicerContext,
    ) -> tuple[int, bytes]:
        """How many of the records (``count`` of them as ``columns``) fit ``budget`` as an Arrow
        IPC stream, and the stream; no bytes where this worker has no pyarrow or the values do not
        make Arrow arrays (the answer is msgpack columns then)."""
        if not arrow_ipc.available():
            return count, b""
        fields = self._export(request.export, context).fields
        try:
            return self._columns_within(
                columns,
                count,
                budget,
                packer,
                lambda c: arrow_ipc.encode_columns(c or [[] for _ in fields], fields),
            )
        except ValueError:
            return count, b""

    def _columns_within(
        self,
        columns: list[list[Any]],
        count: int,
        budget: int,
        packer: msgpack.Packer,
        encode: Callable[[list[list[Any]]], bytes],
    ) -> tuple[int, bytes]:
        """How many of the first records (``count`` of them, as ``columns``) fit ``budget`` bytes
        (at least one), and them ``encode``d. When a sample of the records says they all fit twice
        over, they are encoded at once; otherwise (or when the sample misled) the prefix that fits
        is measured record by record first, so large records are never all encoded for an
        answer that holds few."""
        sample = columns_to_rows(columns, 0, min(count, _BUDGET_SAMPLE))
        sampled = sum(len(packer.pack(record)) for record in sample)
        if sample and 2 * sampled * count > budget * len(sample):
            count = len(self._rows_within(columns_to_rows(columns, 0, count), budget, packer, False)[0])
            columns = [column[:count] for column in columns]
        encoded = encode(columns)
        if len(encoded) > budget and count > 1:
            count = len(self._rows_within(columns_to_rows(columns, 0, count), budget, packer, False)[0])
            columns = [column[:count] for column in columns]
            encoded = encode(columns)
        return count, encoded

    def Offsets(
        self, request: gateway_pb2.OffsetsRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.OffsetsResponse:
        info = self._export(request.export, context)
        self._check_restored(request.export, sorted(info.logs.items()), context)
        return gateway_pb2.OffsetsResponse(
            partitions=[
                gateway_pb2.PartitionOffsets(partition=p, start=log.start, end=log.end, epoch=log.epoch)
                for p, log in sorted(info.logs.items())
            ],
            total_partitions=info.total_partitions,
            fields=info.fields,
            schema=info.schema,
        )

    def Commit(
        self, request: gateway_pb2.CommitRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.CommitResponse:
        log = self._log(request, context)
        return gateway_pb2.CommitResponse(start=log.commit(request.offset), epoch=log.epoch)


def _columns_of(records: Sequence[Sequence[Any]]) -> list[list[Any]]:
    """`rows_to_columns`, `RaggedRecords` for records of unequal lengths."""
    try:
        return rows_to_columns(records)
    except ValueError as exc:
        raise RaggedRecords(str(exc)) from None
