"""`ExportLog`: one ExportBolt task's bounded log of records, read by offset through the Gateway."""

from __future__ import annotations

import secrets
import threading
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from tuplemesh.columnar import columns_to_rows, rows_to_columns

__all__ = [
    "CHUNK_RECORDS",
    "COLUMNS",
    "MARK_FORMAT",
    "ROWS",
    "ExportLog",
    "OffsetCommitted",
    "RaggedRecords",
    "new_epoch",
]

#: Records a chunk of the log grows to by joining what comes after it (a larger batch is a chunk
#: of its own); what a commit frees is whole chunks, so the log holds fewer than this many
#: committed records besides its own (or one batch's, when batches are larger).
CHUNK_RECORDS = 4096

#: ``mark``'s format: ``[epoch, start, chunks, MARK_FORMAT]``, each chunk ``[ROWS, records, n]``
#: or ``[COLUMNS, columns, n]``; a part of three (``[epoch, start, records]``) is a checkpoint an
#: older release took, restored as records.
MARK_FORMAT = 2
ROWS, COLUMNS = 0, 1


class RaggedRecords(ValueError):
    """Records of unequal lengths asked for as columns, which they do not make."""


class OffsetCommitted(ValueError):
    """A read from an offset below the log's retained start: committed away."""


def new_epoch() -> int:
    """A random log epoch in [1, 2**53): 0 means "any epoch" on the wire, and staying below 2**53
    keeps it exact in every JSON reader (Spark checkpoints its offsets as JSON)."""
    return 1 + secrets.randbelow(2**53 - 1)


class _Chunk:
    """Consecutive records from offset ``first``: as they were appended (``rows``), or as one list
    per field (``columns``: a columnar batch, kept without an object per record). A sealed chunk
    (part of a checkpoint's mark) never changes again: what comes next starts a new one."""

    __slots__ = ("columns", "count", "first", "rows", "sealed")

    def __init__(
        self, first: int, rows: list[Sequence[Any]] | None, columns: list[list[Any]] | None, count: int
    ):
        self.first = first
        self.rows = rows
        self.columns = columns
        self.count = count
        self.sealed = False

    def records(self, low: int, high: int) -> list[Sequence[Any]]:
        """Its records ``low`` to ``high`` (positions in the chunk) as rows."""
        if self.rows is not None:
            return self.rows[low:high]
        assert self.columns is not None
        return columns_to_rows(self.columns, low, high)

    def column_slices(self, low: int, high: int) -> list[list[Any]]:
        """Its records ``low`` to ``high`` as one list per field; ValueError for rows of unequal
        lengths."""
        if self.columns is not None:
            return [column[low:high] for column in self.columns]
        assert self.rows is not None
        try:
            return rows_to_columns(self.rows[low:high])
        except ValueError as exc:
            raise RaggedRecords(str(exc)) from None

    def slice(self, low: int, high: int) -> _Chunk:
        """A new chunk of its records ``low`` to ``high`` (this one may be part of a mark:
        unchanged)."""
        rows = None if self.rows is None else self.rows[low:high]
        columns = None if self.columns is None else [column[low:high] for column in self.columns]
        return _Chunk(self.first + low, rows, columns, high - low)

    def to_part(self) -> list[Any]:
        return [ROWS, self.rows, self.count] if self.rows is not None else [COLUMNS, self.columns, self.count]


class ExportLog:
    """A bounded log of records with offsets (one per ExportBolt task = partition). Thread-safe.

    Records are kept in chunks: appended rows as they came, and a columnar batch as its columns
    (`extend_columns`), so a batch costs no object per record on the way in, and a fetch as
    columns slices the columns as they are. Appending a record as a row took 260-520 ns against
    about 40 ns as part of a column (measured: the log was where an exporting worker spent most
    of its time). A fetch finds its first chunk by bisection; a commit forgets whole chunks.

    Offsets start at 0 whenever a log starts (a restarted worker starts a new one), so each log
    has an ``epoch``: a reader's offset means something only in the log of its epoch.

    In a checkpointed topology the log is part of the task's state (``hold_back``): a record is
    readable only once a checkpoint that holds it has committed, so a rollback never takes back
    a record a reader may have seen, and a restarted worker restores the log of the checkpoint
    with its epoch and offsets (``restore``): a reader's offsets stay valid and nothing is lost.
    """

    def __init__(self, retention: int, epoch: int = 0) -> None:
        self.retention = retention
        self.epoch = epoch or new_epoch()
        self._chunks: list[_Chunk] = []
        self._written = 0  # the offset after the newest record
        self.start = 0  # offset of the first retained record
        self._cond = threading.Condition()
        self.closed = False
        #: held back: readers see offsets below this only; None: every record as it comes
        self._readable: int | None = None
        self._marks: dict[int, int] = {}  # checkpoint -> the log's end when its part was taken
        #: True from `await_restore` until `restore`: the log is the fresh one of a starting
        #: worker, not yet the checkpoint's; the Gateway answers nothing from it meanwhile
        self.restoring = False

    def __len__(self) -> int:
        return self._written - self.start

    @property
    def end(self) -> int:
        """The end of what readers may fetch."""
        return self._written if self._readable is None else self._readable

    @property
    def stored(self) -> int:
        """Records held in memory: the retained ones and the committed rest of the first chunk."""
        with self._cond:
            return self._written - self._chunks[0].first if self._chunks else 0

    def append(self, values: Sequence[Any]) -> bool:
        """Append one record as `extend` does; False when it was not appended."""
        return self.extend([values]) == 1

    def extend(self, records: Sequence[Sequence[Any]]) -> int:
        """Append ``records`` in order, waiting while the log is full (backpressure upstream)
        until a commit frees room; returns how many were appended.

        Held-back records (not yet in a committed checkpoint: at most one checkpoint interval's
        input) do not count against the retention: waiting for a reader to free room they take
        would stop the checkpoint that makes them readable.

        Fewer than all only when the log is full and closed: its worker stops, and waiting for
        a reader that may never come would hold the shutdown forever.
        """
        return self._add(len(records), lambda low, high: (list(records[low:high]), None))

    def extend_columns(self, columns: Sequence[Sequence[Any]], count: int) -> int:
        """`extend` with ``count`` records given as one sequence per field (none: records of no
        values), kept as columns; ValueError for a column of another length."""
        for column in columns:
            if len(column) != count:
                raise ValueError(f"a column of {len(column)} values for {count} records")
        return self._add(count, lambda low, high: (None, [list(column[low:high]) for column in columns]))

    def _add(self, total: int, part: Any) -> int:
        """Append records ``0..total`` in order, each part that fits as ``part(low, high)``:
        (rows, None) or (None, columns)."""
        done = 0
        with self._cond:
            while done < total:
                room = self.retention - (self.end - self.start)
                if room <= 0:
                    if self.closed:
                        break
                    self._cond.wait()
                    continue
                high = min(total, done + room)
                rows, columns = part(done, high)
                self._join(rows, columns, high - done)
                done = high
        return done

    def _join(self, rows: list[Sequence[Any]] | None, columns: list[list[Any]] | None, count: int) -> None:
        """Add ``count`` records to the newest chunk when it is of the same kind (and width), open,
        and stays within `CHUNK_RECORDS`, else as a chunk of their own (held by ``_cond``)."""
        last = self._chunks[-1] if self._chunks else None
        if last is None or last.sealed or last.count + count > CHUNK_RECORDS:
            self._chunks.append(_Chunk(self._written, rows, columns, count))
        elif rows is not None and last.rows is not None:
            last.rows.extend(rows)
            last.count += count
        elif columns is not None and last.columns is not None and len(columns) == len(last.columns):
            for mine, more in zip(last.columns, columns, strict=True):
                mine.extend(more)
            last.count += count
        else:  # of another kind or width
            self._chunks.append(_Chunk(self._written, rows, columns, count))
        self._written += count

    def _spans(self, start: int, stop: int) -> list[tuple[_Chunk, int, int]]:
        """(chunk, low, high) spans of the records from offset ``start`` to ``stop`` (held by
        ``_cond``); `OffsetCommitted` when ``start`` was committed away."""
        if start < self.start:
            raise OffsetCommitted(f"offset {start} is below the retained start {self.start} (committed)")
        spans: list[tuple[_Chunk, int, int]] = []
        if start >= stop:
            return spans
        chunks = self._chunks
        index = max(0, bisect_right(chunks, start, key=lambda chunk: chunk.first) - 1)
        while index < len(chunks) and chunks[index].first < stop:
            chunk = chunks[index]
            spans.append(
                (
                    chunk,
                    max(start, chunk.first) - chunk.first,
                    min(stop, chunk.first + chunk.count) - chunk.first,
                )
            )
            index += 1
        return spans

    def _readable_spans(self, start: int, limit: int) -> tuple[list[tuple[_Chunk, int, int]], int]:
        """The spans of at most ``limit`` readable records from ``start``, and the end (held by
        ``_cond``)."""
        end = self.end
        return self._spans(start, min(end, start + max(0, limit))), end

    def fetch(self, start: int, limit: int) -> tuple[list[Sequence[Any]], int]:
        """(records from ``start``, end offset); `OffsetCommitted` when ``start`` was committed
        away."""
        with self._cond:
            spans, end = self._readable_spans(start, limit)
        # outside the lock: a chunk's records up to its count never change (appends extend it
        # beyond, a rollback replaces it)
        if len(spans) == 1:
            chunk, low, high = spans[0]
            return chunk.records(low, high), end
        records: list[Sequence[Any]] = []
        for chunk, low, high in spans:
            records.extend(chunk.records(low, high))
        return records, end

    def fetch_columns(self, start: int, limit: int) -> tuple[list[list[Any]], int, int]:
        """(the records from ``start`` as one list per field, how many, end offset), at most
        ``limit``; `OffsetCommitted` when ``start`` was committed away, `RaggedRecords` for
        records of unequal lengths (which make no columns)."""
        with self._cond:
            spans, end = self._readable_spans(start, limit)
        if not spans:
            return [], 0, end
        count = sum(high - low for _, low, high in spans)
        columns = spans[0][0].column_slices(spans[0][1], spans[0][2])
        for chunk, low, high in spans[1:]:
            more = chunk.column_slices(low, high)
            if len(more) != len(columns):
                raise RaggedRecords(f"records of {len(columns)} and {len(more)} values cannot be columns")
            for mine, part in zip(columns, more, strict=True):
                mine.extend(part)
        return columns, count, end

    def commit(self, offset: int) -> int:
        """Forget records below ``offset``; returns the new start."""
        with self._cond:
            self.start = max(self.start, min(offset, self.end))
            chunks = self._chunks
            gone = 0
            while gone < len(chunks) and chunks[gone].first + chunks[gone].count <= self.start:
                gone += 1
            if gone:
                del chunks[:gone]
            self._cond.notify_all()
            return self.start

    def close(self) -> None:
        """Stop waiting for room: appends to a full log fail from now on. Any thread."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    # -- as checkpointed state ---------------------------------------------------------------
    def await_restore(self) -> None:
        """The log is checkpointed state: until `restore` it is not the log readers knew."""
        with self._cond:
            self.restoring = True

    def hold_back(self) -> None:
        """From now on a record is readable only once a checkpoint holding it commits."""
        with self._cond:
            if self._readable is None:
                self._readable = self._written

    def mark(self, checkpoint: int) -> list[Any]:
        """The log as the part of ``checkpoint``: ``[epoch, start, chunks, MARK_FORMAT]``
        (retained records, held-back ones included, in their chunks: sealed, so the part keeps
        them as they are now without a copy); ``checkpoint_committed`` makes them readable."""
        with self._cond:
            self._marks[checkpoint] = self._written
            parts = []
            for chunk, low, high in self._spans(self.start, self._written):  # held back too
                chunk.sealed = True
                # committed records at its head: the part starts at ``start``
                parts.append((chunk.slice(low, high) if low else chunk).to_part())
            return [self.epoch, self.start, parts, MARK_FORMAT]

    def checkpoint_committed(self, checkpoint: int) -> None:
        """Records up to the mark of ``checkpoint`` become readable."""
        with self._cond:
            end = self._marks.pop(checkpoint, None)
            for older in [n for n in self._marks if n < checkpoint]:
                del self._marks[older]  # abandoned checkpoints: their marks never commit
            if end is not None and self._readable is not None and end > self._readable:
                self._readable = end
                self._cond.notify_all()

    def restore(self, part: list[Any] | None) -> None:
        """Go back to the committed checkpoint whose ``mark`` was ``part`` (None: no checkpoint).

        Records it does not hold were never readable and are dropped (the replay writes them
        again). A log of the same epoch keeps its own records up to there (a reader may have
        committed past the checkpoint's start); any other log takes the checkpoint's epoch,
        offsets and records: the log of a restarted worker continues where readers left it.
        """
        with self._cond:
            self._marks.clear()
            if part is None:
                end = self.start if self._readable is None else self._readable
                end = min(end, self._written)
            else:
                epoch, start, end = _extent_of(part)
                if epoch != self.epoch or end < self.start:
                    chunks = _chunks_of(part)
                    self.epoch, self.start, self._chunks, self._written = epoch, start, chunks, end
            self._truncate(end)
            self._readable = end
            self.restoring = False
            self._cond.notify_all()

    def _truncate(self, end: int) -> None:
        """Drop every record from offset ``end`` on (held by ``_cond``)."""
        chunks = self._chunks
        while chunks and chunks[-1].first >= end:
            chunks.pop()
        if chunks and chunks[-1].first + chunks[-1].count > end:
            chunks[-1] = chunks[-1].slice(0, end - chunks[-1].first)
        self._written = min(self._written, end)


def _extent_of(part: list[Any]) -> tuple[int, int, int]:
    """(epoch, start, end) of a ``mark``: this release's, or one of three an older took."""
    if len(part) == 3:  # [epoch, start, records]
        return part[0], part[1], part[1] + len(part[2])
    return part[0], part[1], part[1] + sum(count for _, _, count in part[2])


def _chunks_of(part: list[Any]) -> list[_Chunk]:
    """The chunks of a ``mark``, copied (the part stays the state backend's)."""
    if len(part) == 3:
        _, start, records = part
        return [_Chunk(start, list(records), None, len(records))] if records else []
    _, start, parts, _ = part
    chunks = []
    first = start
    for kind, data, count in parts:
        if kind == ROWS:
            chunks.append(_Chunk(first, list(data), None, count))
        else:
            chunks.append(_Chunk(first, None, [list(column) for column in data], count))
        first += count
    return chunks
