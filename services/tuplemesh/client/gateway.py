"""`GatewayClient`: publish rows into a topology and read an export by offset, from any Python.

One client talks to the workers of one mesh (``targets``), keeps one channel per worker for its
life, and puts a timeout on every call. Publishing is batched (``batch_size`` rows per request),
windowed (``window`` requests in flight) and retried with the Gateway's dedupe ids, so a retry
never publishes a held row twice on the worker that holds it::

    with GatewayClient(["w0:6700", "w1:6700"], token="s3cret") as client:
        client.publish("lines", [["the cow"], ["the fox"]], batch_id="job-7")
        for record in client.records("counts"):
            print(record.partition, record.offset, record.values)

Errors are `GatewayError` (its ``code`` is the gRPC status name) and `EpochMismatchError` (an
export partition's log restarted under the reader); gRPC's own exception types never leave here.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import msgpack

from tuplemesh.client.channel import TlsSettings, open_channel
from tuplemesh.columnar import rows_to_columns
from tuplemesh.errors import EpochMismatchError, GatewayError
from tuplemesh.v1 import gateway_pb2, gateway_pb2_grpc

__all__ = [
    "ExportOffsets",
    "Fetched",
    "FetchedBatch",
    "FetchedColumns",
    "GatewayClient",
    "PartitionOffsets",
    "PublishResult",
    "Record",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Fetch answers can carry many records: far above gRPC's 4 MB default.
MAX_RECEIVE_BYTES = 64 * 1024 * 1024

#: answers another attempt would get again, from any worker: never retried
_FINAL = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.NOT_FOUND,
    }
)
#: what to check when a worker refuses who is calling
_HINTS = {grpc.StatusCode.UNAUTHENTICATED: " (the token must be the worker's admin.token)"}


@dataclass(frozen=True)
class PartitionOffsets:
    """One export partition: the worker holding it, its log epoch, first retained and end offsets."""

    partition: int
    target: str
    epoch: int
    start: int
    end: int


@dataclass(frozen=True)
class ExportOffsets:
    """Every partition of an export across the mesh, with the export's record fields and Spark schema."""

    export: str
    partitions: Mapping[int, PartitionOffsets]
    fields: tuple[str, ...]
    schema: str


@dataclass(frozen=True)
class Fetched:
    """Records of one partition from ``offset`` up to ``next_offset`` (``end`` was the log's end)."""

    partition: int
    epoch: int
    offset: int
    records: list[list[Any]]
    next_offset: int
    end: int


@dataclass
class FetchedColumns:
    """Records of one partition from ``offset`` up to ``next_offset`` as columns: one list of
    ``count`` values per field (``end`` was the log's end)."""

    partition: int
    epoch: int
    offset: int
    columns: list[list[Any]]
    count: int
    next_offset: int
    end: int


@dataclass
class FetchedBatch:
    """Records of one partition from ``offset`` up to ``next_offset`` as one Arrow record batch
    (``batch``, of ``count`` rows) in the schema asked for (``end`` was the log's end)."""

    partition: int
    epoch: int
    offset: int
    batch: Any
    count: int
    next_offset: int
    end: int


@dataclass(frozen=True)
class Record:
    """One exported record and where it is: (partition, epoch, offset)."""

    partition: int
    epoch: int
    offset: int
    values: list[Any]


@dataclass(frozen=True)
class PublishResult:
    """What a publish did: ``rows`` it read and sent; ``published``, the rows the answered attempts
    published (a request answered OK on a retry counts only the rows that retry published again);
    ``duplicates``, requests recognised as already held; ``attempts`` (streams) it took; and the
    worker that holds the rows."""

    rows: int
    published: int
    duplicates: int
    attempts: int
    target: str


def _failed(action: str, target: str, exc: grpc.RpcError) -> GatewayError:
    code = exc.code()
    return GatewayError(
        f"tuplemesh: {action} {target} failed: {code.name}: {exc.details()}{_HINTS.get(code, '')}",
        code.name,
        target,
    )


class GatewayClient:
    """A client of the Gateways of one mesh. Thread-safe; close it (or use ``with``) when done.

    ``targets``: HOST:PORT of the workers (a list, or one comma-separated string); a Kubernetes
    Service name works for publishing. ``tls`` and ``token`` as for ``open_channel``.
    ``timeout``: seconds for each unary call, and the longest a publish waits for any progress.
    ``retries``: how often a failing call is tried again (with backoff), moving to another worker
    when the one called is unreachable; a publish counts only attempts in a row that got no answer.
    """

    def __init__(
        self,
        targets: str | Sequence[str],
        *,
        tls: TlsSettings | None = None,
        token: str = "",
        timeout: float = 30.0,
        retries: int = 5,
        batch_size: int = 1000,
        window: int = 8,
        backoff: float = 0.2,
    ) -> None:
        given = targets.split(",") if isinstance(targets, str) else list(targets)
        self.targets = tuple(t.strip() for t in given if t.strip())
        if not self.targets:
            raise ValueError("GatewayClient needs at least one target (HOST:PORT)")
        for name, value in (("timeout", timeout), ("batch_size", batch_size), ("window", window)):
            if value <= 0:
                raise ValueError(f"GatewayClient {name} must be > 0, got {value!r}")
        if retries < 0:
            raise ValueError(f"GatewayClient retries must be >= 0, got {retries!r}")
        self.tls = tls
        self.token = token
        self.timeout = timeout
        self.retries = retries
        self.batch_size = batch_size
        self.window = window
        self.backoff = backoff
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, gateway_pb2_grpc.GatewayStub] = {}
        self._homes: dict[tuple[str, int], str] = {}  # (export, partition) -> target holding it
        self.closed = False

    # -- plumbing ---------------------------------------------------------------------------

    def _stub(self, target: str) -> gateway_pb2_grpc.GatewayStub:
        with self._lock:
            if self.closed:
                raise GatewayError("tuplemesh: the GatewayClient is closed", "CANCELLED", target)
            stub = self._stubs.get(target)
            if stub is None:
                channel = open_channel(
                    target,
                    self.tls,
                    self.token,
                    options=[("grpc.max_receive_message_length", MAX_RECEIVE_BYTES)],
                )
                self._channels[target] = channel
                stub = self._stubs[target] = gateway_pb2_grpc.GatewayStub(channel)
            return stub

    def _pause(self, attempt: int) -> None:
        time.sleep(min(5.0, self.backoff * 2 ** (attempt - 1)))

    def _unary(self, action: str, target: str, call: Callable[[gateway_pb2_grpc.GatewayStub], T]) -> T:
        """``call`` on ``target``'s stub, retried on transient errors (every unary call here is
        safe to repeat: Fetch, Offsets and Commit are idempotent)."""
        attempt = 0
        while True:
            try:
                return call(self._stub(target))
            except grpc.RpcError as exc:
                if exc.code() in _FINAL or attempt >= self.retries:
                    raise _failed(action, target, exc) from None
                attempt += 1
                log.debug("%s %s failed (%s), retry %d", action, target, exc.code().name, attempt)
                self._pause(attempt)

    def close(self) -> None:
        """Close every channel. Idempotent."""
        with self._lock:
            self.closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
        for channel in channels:
            channel.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------------

    def offsets(self, export: str) -> ExportOffsets:
        """Every partition of ``export`` across the targets; GatewayError when none runs it or
        some partition is on no target."""
        found: dict[int, PartitionOffsets] = {}
        answer: gateway_pb2.OffsetsResponse | None = None
        request = gateway_pb2.OffsetsRequest(export=export)
        for target in self.targets:
            try:
                reply = self._unary(
                    "Offsets from", target, lambda stub: stub.Offsets(request, timeout=self.timeout)
                )
            except GatewayError as exc:
                if exc.code == "NOT_FOUND":
                    continue  # no partition of this export on that worker
                raise
            answer = reply
            for p in reply.partitions:
                found[p.partition] = PartitionOffsets(p.partition, target, p.epoch, p.start, p.end)
        if answer is None:
            raise GatewayError(
                f"tuplemesh: no worker of {list(self.targets)} runs an ExportBolt {export!r}", "NOT_FOUND"
            )
        missing = sorted(set(range(answer.total_partitions)) - set(found))
        if missing:
            raise GatewayError(
                f"tuplemesh: partitions {missing} of {export!r} were not found on {list(self.targets)}",
                "NOT_FOUND",
            )
        with self._lock:
            self._homes.update({(export, p): info.target for p, info in found.items()})
        return ExportOffsets(export, found, tuple(answer.fields), answer.schema)

    def _home(self, export: str, partition: int) -> str:
        with self._lock:
            target = self._homes.get((export, partition))
        if target is None:
            target = self.offsets(export).partitions[partition].target
        return target

    def _on_partition(
        self, export: str, partition: int, action: str, epoch: int, call: Callable[[Any], T]
    ) -> T:
        """``call`` on the worker holding the partition; after NOT_FOUND (it moved) look again once;
        FAILED_PRECONDITION (another epoch) becomes EpochMismatchError naming both epochs."""
        for fresh in (False, True):
            target = self._home(export, partition)
            try:
                return self._unary(action, target, call)
            except GatewayError as exc:
                if exc.code == "NOT_FOUND" and not fresh:
                    with self._lock:
                        self._homes.pop((export, partition), None)
                    continue
                if exc.code == "FAILED_PRECONDITION" and epoch:
                    now = self.offsets(export).partitions[partition]
                    raise EpochMismatchError(export, partition, epoch, now.epoch, target) from None
                raise
        raise AssertionError("unreachable")

    def fetch(
        self, export: str, partition: int, offset: int, *, max_records: int = 10_000, epoch: int = 0
    ) -> Fetched:
        """Records of ``partition`` from ``offset``. With an ``epoch`` (from ``offsets`` or an
        earlier fetch), EpochMismatchError when the partition's log has restarted since."""
        got = self._fetch(export, partition, offset, max_records, epoch, columns=False)
        records = msgpack.unpackb(got.packed, raw=False)
        return Fetched(partition, got.epoch, offset, records, got.next_offset, got.end_offset)

    def fetch_columns(
        self, export: str, partition: int, offset: int, *, max_records: int = 10_000, epoch: int = 0
    ) -> FetchedColumns:
        """As `fetch`, with the records as columns (one list per field): what a columnar
        consumer (Arrow, pandas) takes without a loop over rows."""
        got = self._fetch(export, partition, offset, max_records, epoch, columns=True)
        columns = self._columns_of(got)
        return FetchedColumns(
            partition, got.epoch, offset, columns, got.count, got.next_offset, got.end_offset
        )

    def fetch_arrow(
        self,
        export: str,
        partition: int,
        offset: int,
        schema: Any,
        *,
        max_records: int = 10_000,
        epoch: int = 0,
    ) -> FetchedBatch:
        """As `fetch`, with the records as one ``pyarrow.RecordBatch`` of ``schema`` (needs
        pyarrow). The worker answers in Arrow where it can, and its columns are cast to the
        schema's types; else in msgpack columns, each made an Arrow array of its field's type."""
        from tuplemesh.client.arrow import columns_to_record_batch, ipc_to_record_batch

        got = self._fetch(export, partition, offset, max_records, epoch, columns=True, arrow=True)
        if got.arrow_ipc:
            batch = ipc_to_record_batch(got.arrow_ipc, got.count, schema, export)
        else:
            batch = columns_to_record_batch(self._columns_of(got), got.count, schema, export)
        return FetchedBatch(partition, got.epoch, offset, batch, got.count, got.next_offset, got.end_offset)

    @staticmethod
    def _columns_of(got: Any) -> list[list[Any]]:
        """A Fetch answer's records as columns: its msgpack columns, or the columns of its rows
        (a worker from before columnar fetches answers rows)."""
        if got.packed_columns or not got.count:
            return msgpack.unpackb(got.packed_columns, raw=False) if got.count else []
        return rows_to_columns(msgpack.unpackb(got.packed, raw=False))

    def _fetch(
        self,
        export: str,
        partition: int,
        offset: int,
        max_records: int,
        epoch: int,
        *,
        columns: bool,
        arrow: bool = False,
    ) -> Any:
        request = gateway_pb2.FetchRequest(
            export=export,
            partition=partition,
            start_offset=offset,
            max_records=max_records,
            epoch=epoch,
            columns=columns,
            arrow=arrow,
        )
        return self._on_partition(
            export, partition, "Fetch from", epoch, lambda stub: stub.Fetch(request, timeout=self.timeout)
        )

    def commit(self, export: str, partition: int, offset: int, *, epoch: int = 0) -> int:
        """Let ``partition`` forget records below ``offset``; returns its new first offset.
        With an ``epoch``, EpochMismatchError instead of truncating a restarted log."""
        request = gateway_pb2.CommitRequest(export=export, partition=partition, offset=offset, epoch=epoch)
        answer = self._on_partition(
            export, partition, "Commit to", epoch, lambda stub: stub.Commit(request, timeout=self.timeout)
        )
        return int(answer.start)

    def records(
        self,
        export: str,
        *,
        start: Mapping[int, int] | None = None,
        follow: bool = False,
        poll: float = 0.5,
        max_records: int = 10_000,
    ) -> Iterator[Record]:
        """Every record of ``export``, partition by partition in rounds of ``max_records``, from
        ``start`` (partition -> offset; default: each log's first retained offset).

        Without ``follow`` it stops at the ends the logs had when it began; with ``follow`` it
        waits ``poll`` seconds whenever it has read everything and goes on. A partition whose log
        restarts while it is read raises EpochMismatchError (no record is skipped silently).
        Records are not committed: call ``commit`` for what you have processed.
        """
        found = self.offsets(export).partitions
        positions = {p: (info.epoch, (start or {}).get(p, info.start)) for p, info in found.items()}
        stops = {p: info.end for p, info in found.items()}
        while True:
            progressed = False
            for partition, (epoch, offset) in sorted(positions.items()):
                if not follow and offset >= stops[partition]:
                    continue
                limit = max_records if follow else min(max_records, stops[partition] - offset)
                got = self.fetch(export, partition, offset, max_records=limit, epoch=epoch)
                for i, values in enumerate(got.records):
                    yield Record(partition, epoch, offset + i, values)
                positions[partition] = (epoch, got.next_offset)
                progressed = progressed or bool(got.records)
            if not follow and all(offset >= stops[p] for p, (_, offset) in positions.items()):
                return
            if not progressed:
                time.sleep(poll)

    # -- publishing -------------------------------------------------------------------------

    def publish(
        self,
        component: str,
        rows: Iterable[Sequence[Any]],
        *,
        batch_id: str = "",
        partition: int = 0,
    ) -> PublishResult:
        """Publish ``rows`` into the IngestSpout ``component``; returns once every row is held
        (with acking on: its tuple tree completed).

        ``batch_id`` and ``partition`` name this unit of work (default: a fresh id): publishing
        the same rows again with the same names, after a failure or from a replayed job, is
        recognised by the worker that held them and publishes nothing twice there. Requests that
        fail are retried, up to ``retries`` attempts in a row without progress: on the same
        worker when rows failed in the topology (ABORTED: only those are published again), on
        the next worker when the one called is unreachable or stops. ``rows`` is read lazily,
        at most ``window`` requests ahead.
        """
        payloads = _row_payloads(rows, self.batch_size)
        stream = _PublishStream(self, component, payloads, batch_id or uuid.uuid4().hex, partition)
        return stream.run()

    def publish_columns(
        self,
        component: str,
        batches: Iterable[Sequence[Sequence[Any]]],
        *,
        batch_id: str = "",
        partition: int = 0,
    ) -> PublishResult:
        """As `publish`, with the rows given as batches of columns: each batch one sequence per
        field of the IngestSpout, all of one length (lists, or an Arrow record batch's or numpy
        arrays, whose values are sent as their Python equivalents). They travel as columns
        (``PublishRequest.packed_columns``), ``batch_size`` rows per request whatever the
        batches' sizes, and with acking off the spout emits them as columns."""
        payloads = _column_payloads(batches, self.batch_size)
        stream = _PublishStream(self, component, payloads, batch_id or uuid.uuid4().hex, partition)
        return stream.run()


#: one request's rows, encoded: (whether as columns, the msgpack bytes, how many rows)
_Payload = tuple[bool, bytes, int]


def _row_payloads(rows: Iterable[Sequence[Any]], batch_size: int) -> Iterator[_Payload]:
    """``rows`` as the payloads of requests of ``batch_size`` rows (``packed``), made lazily."""
    source = iter(rows)
    while chunk := [list(row) for row in itertools.islice(source, batch_size)]:
        yield False, msgpack.packb(chunk, use_bin_type=True, default=str), len(chunk)


def _column_payloads(batches: Iterable[Sequence[Sequence[Any]]], batch_size: int) -> Iterator[_Payload]:
    """The rows of ``batches`` (columns each) as the payloads of requests of ``batch_size`` rows
    (``packed_columns``; the last one may hold fewer), made lazily. Requests are cut from the
    rows, not from the batches: the same rows make the same requests however they were batched,
    so a retry under the same ids is recognised. ValueError for a batch without columns, whose
    columns differ in length, or whose width differs from the first batch's."""
    pending: list[list[Any]] | None = None  # rows carried over to the next request, as columns
    for batch in batches:
        columns = [_plain_values(column) for column in batch]
        if not columns:
            raise ValueError("a batch of columns holds one column per field of the spout, not none")
        lengths = {len(column) for column in columns}
        if len(lengths) > 1:
            raise ValueError(f"columns of one batch must be of one length, not {sorted(lengths)}")
        if pending is None:
            pending = [[] for _ in columns]
        elif len(columns) != len(pending):
            raise ValueError(f"a batch of {len(columns)} columns after batches of {len(pending)}")
        for held, column in zip(pending, columns, strict=True):
            held.extend(column)
        start = 0
        while len(pending[0]) - start >= batch_size:
            part = [held[start : start + batch_size] for held in pending]
            start += batch_size
            yield True, msgpack.packb(part, use_bin_type=True, default=str), batch_size
        if start:  # once per batch: what is left is less than a request
            pending = [held[start:] for held in pending]
    if pending is not None and pending[0]:
        yield True, msgpack.packb(pending, use_bin_type=True, default=str), len(pending[0])


def _plain_values(column: Sequence[Any]) -> list[Any]:
    """A column's values as Python objects: an Arrow array's (``to_pylist``: nulls become None)
    or a numpy array's (``tolist``) as their own types, not as the scalars they index to (which
    msgpack would send as strings)."""
    if isinstance(column, list):
        return column
    for name in ("to_pylist", "tolist"):  # pyarrow.Array, numpy.ndarray: optional libraries
        convert = getattr(column, name, None)
        if callable(convert):
            return list(convert())
    return list(column)


@dataclass
class _Attempt:
    """One Publish stream: its call (to cancel it on a stall) and whether it has ended."""

    call: Any = None
    done: bool = False
    stalled: bool = False


class _PublishStream:
    """One ``publish``: requests made lazily from the rows, and those sent but not acknowledged
    (resent, in order, at the start of every retry)."""

    def __init__(
        self,
        client: GatewayClient,
        component: str,
        payloads: Iterator[_Payload],
        batch_id: str,
        partition: int,
    ) -> None:
        self.client = client
        self.component = component
        self.source = payloads
        self.batch_id = batch_id
        self.partition = partition
        self.sequences = itertools.count(1)
        self.exhausted = False
        self.rows = 0  # rows read from ``source`` so far
        self.unacked: deque[gateway_pb2.PublishRequest] = deque()
        #: what reading or encoding the caller's rows raised (on gRPC's thread): ``run`` raises it
        self.source_error: Exception | None = None
        self.cond = threading.Condition()
        self.progress_at = time.monotonic()

    def _next_request(self) -> gateway_pb2.PublishRequest | None:
        payload = next(self.source, None)
        if payload is None:
            self.exhausted = True
            return None
        as_columns, encoded, count = payload
        self.rows += count
        return gateway_pb2.PublishRequest(
            component=self.component,
            packed=b"" if as_columns else encoded,
            packed_columns=encoded if as_columns else b"",
            batch_id=self.batch_id,
            partition=self.partition,
            sequence=next(self.sequences),
        )

    def _requests(self, attempt: _Attempt) -> Iterator[gateway_pb2.PublishRequest]:
        """What one stream sends (on gRPC's thread): the unacknowledged requests again, then new
        ones within the window. It half-closes only once everything is acknowledged, so it is
        also the watchdog that cancels a stream making no progress for ``timeout`` seconds."""
        with self.cond:
            resend = list(self.unacked)
            self.progress_at = time.monotonic()
        yield from resend
        while True:
            with self.cond:
                request = None
                while request is None:
                    if attempt.done:
                        return
                    if self.unacked and time.monotonic() - self.progress_at > self.client.timeout:
                        attempt.stalled = True
                        if attempt.call is not None:
                            attempt.call.cancel()
                        return
                    if len(self.unacked) < self.client.window and not self.exhausted:
                        try:
                            request = self._next_request()
                        except Exception as exc:  # the caller's rows: theirs to hear of, not gRPC's
                            self.source_error = exc
                            if attempt.call is not None:
                                attempt.call.cancel()
                            return
                        if request is not None:
                            self.unacked.append(request)
                            continue
                    if self.exhausted and not self.unacked:
                        return  # everything acknowledged: half-close, the server ends the stream
                    self.cond.wait(0.05)
            yield request

    def run(self) -> PublishResult:
        client = self.client
        published = duplicates = 0
        failures = 0  # attempts in a row that failed without an answer, counted against ``retries``
        attempts = 0
        turn = 0
        hosting = list(client.targets)  # NOT_FOUND removes a worker that runs no such IngestSpout
        while True:
            target = hosting[(self.partition + turn) % len(hosting)]
            attempt = _Attempt()
            attempts += 1
            try:
                call = client._stub(target).Publish(self._requests(attempt))
                attempt.call = call
                for ack in call:
                    with self.cond:
                        if not self.unacked or self.unacked[0].sequence != ack.sequence:
                            raise GatewayError(
                                f"tuplemesh: publishing to {target}: acknowledgement for request "
                                f"{ack.sequence} out of order",
                                "INTERNAL",
                                target,
                            )
                        self.unacked.popleft()
                        self.progress_at = time.monotonic()
                        self.cond.notify_all()
                    published += ack.accepted
                    duplicates += ack.duplicate
                    failures = 0  # progress: the retry budget is for attempts that get nowhere
                with self.cond:
                    attempt.done = True
                    if self.exhausted and not self.unacked:
                        return PublishResult(self.rows, published, duplicates, attempts, target)
                    left = len(self.unacked)
                code, details = (
                    grpc.StatusCode.UNAVAILABLE,
                    f"the stream ended with {left} request(s) unanswered",
                )
            except grpc.RpcError as exc:
                code, details = exc.code(), str(exc.details())
                if attempt.stalled:
                    code, details = grpc.StatusCode.DEADLINE_EXCEEDED, f"no answer for {client.timeout} s"
            finally:
                with self.cond:
                    attempt.done = True
                    self.cond.notify_all()
            if self.source_error is not None:  # the rows could not be read or encoded: no retry helps
                raise self.source_error
            if code == grpc.StatusCode.NOT_FOUND and len(hosting) > 1:
                hosting.remove(target)  # no ingest task on that worker: not a failure
                continue
            if code in _FINAL or failures >= client.retries:
                raise GatewayError(
                    f"tuplemesh: publishing to {target} failed: {code.name}: {details}{_HINTS.get(code, '')}",
                    code.name,
                    target,
                )
            failures += 1
            if code != grpc.StatusCode.ABORTED:
                turn += 1  # unreachable or stopping: the next worker (ABORTED: the same one, it dedupes)
            log.info("publishing to %s failed (%s): retry %d", target, code.name, failures)
            client._pause(failures)
