"""`ExportLog`: one ExportBolt task's bounded log of records, read by offset through the Gateway."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["ExportLog", "new_epoch"]


def new_epoch() -> int:
    """A random log epoch in [1, 2**53): 0 means "any epoch" on the wire, and staying below 2**53
    keeps it exact in every JSON reader (Spark checkpoints its offsets as JSON)."""
    return 1 + secrets.randbelow(2**53 - 1)


class ExportLog:
    """A bounded log of records with offsets (one per ExportBolt task = partition). Thread-safe.

    A list with a head index, not a deque: fetches slice from the middle of the log, and
    indexing into a deque there costs O(n) per record (measured: it capped reads near 80k rows/s).

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
        self._records: list[Sequence[Any]] = []
        self._head = 0  # index in _records of the first retained record
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
        return len(self._records) - self._head

    @property
    def end(self) -> int:
        """The end of what readers may fetch."""
        written = self.start + len(self)
        return written if self._readable is None else self._readable

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
        done, total = 0, len(records)
        with self._cond:
            while done < total:
                room = self.retention - (self.end - self.start)
                if room <= 0:
                    if self.closed:
                        break
                    self._cond.wait()
                    continue
                part = records[done : done + room]
                self._records.extend(part)
                done += len(part)
        return done

    def fetch(self, start: int, limit: int) -> tuple[list[Sequence[Any]], int]:
        """(records from ``start``, end offset); ValueError when ``start`` was committed away."""
        with self._cond:
            if start < self.start:
                raise ValueError(f"offset {start} is below the retained start {self.start} (committed)")
            end = self.end
            first = self._head + (start - self.start)
            return self._records[first : first + max(0, min(limit, end - start))], end

    def commit(self, offset: int) -> int:
        """Forget records below ``offset``; returns the new start."""
        with self._cond:
            drop = max(0, min(offset, self.end) - self.start)
            self._head += drop
            self.start += drop
            if self._head > len(self._records) // 2:  # compact now and then: amortised O(1)
                del self._records[: self._head]
                self._head = 0
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
                self._readable = self.start + len(self)

    def mark(self, checkpoint: int) -> list[Any]:
        """The log as the part of ``checkpoint``: ``[epoch, start, records]`` (retained records,
        held-back ones included); ``checkpoint_committed`` makes them readable."""
        with self._cond:
            self._marks[checkpoint] = self.start + len(self)
            return [self.epoch, self.start, self._records[self._head :]]

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
                end = min(end, self.start + len(self))
            else:
                epoch, start, records = part
                end = start + len(records)
                if epoch != self.epoch or end < self.start:
                    self.epoch, self.start, self._records, self._head = epoch, start, list(records), 0
            del self._records[self._head + (end - self.start) :]
            self._readable = end
            self.restoring = False
            self._cond.notify_all()
