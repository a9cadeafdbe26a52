"""Where a streaming read stands: Spark offsets of the form ``{"<partition>": {"epoch": E,
"offset": N}}``, checked against the export logs as they are now (a log that restarted, or that
let records go before they were read, is data loss: an error, or a logged jump forward).

Pure functions, no Spark and no I/O, so every case is tested directly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuplemesh.client import ExportOffsets
from tuplemesh.errors import TuplemeshError

__all__ = ["DataLossError", "Position", "cap_rows", "from_spark", "reconcile", "to_spark"]

log = logging.getLogger(__name__)


class DataLossError(TuplemeshError):
    """Records a streaming query had not read are gone (option ``failOnDataLoss`` is true)."""


@dataclass(frozen=True)
class Position:
    """The next offset to read in one partition's log of ``epoch`` (0: epoch not known)."""

    epoch: int
    offset: int


def to_spark(positions: Mapping[int, Position]) -> dict[str, dict[str, int]]:
    return {str(p): {"epoch": pos.epoch, "offset": pos.offset} for p, pos in sorted(positions.items())}


def from_spark(offsets: Mapping[str, Any] | None) -> dict[int, Position]:
    """Spark's offsets back to positions; a bare number (a checkpoint written before offsets had
    epochs) is an offset of unknown epoch."""
    out = {}
    for p, value in (offsets or {}).items():
        if isinstance(value, Mapping):
            out[int(p)] = Position(int(value["epoch"]), int(value["offset"]))
        else:
            out[int(p)] = Position(0, int(value))
    return out


def reconcile(
    export: str, start: Mapping[int, Position], now: ExportOffsets, fail_on_data_loss: bool
) -> dict[int, Position]:
    """Where each partition's next read starts, given the query's ``start`` and the logs ``now``.

    A partition whose log has another epoch restarted (its worker did, and the new log counts
    from 0 again); one whose log starts above the position let records go unread. Either way
    the records between are lost: DataLossError naming the partition and both epochs (or
    offsets), or, with ``fail_on_data_loss`` off, a warning and the log's first record. A
    partition the query has not seen starts at its log's first record.
    """
    out = {}
    for p, info in sorted(now.partitions.items()):
        pos = start.get(p)
        if pos is None:
            out[p] = Position(info.epoch, info.start)
            continue
        if pos.epoch and pos.epoch != info.epoch:
            problem = (
                f"tuplemesh: partition {p} of export {export!r} restarted: the query's offset {pos.offset} "
                f"belongs to log epoch {pos.epoch}, the log now has epoch {info.epoch} and holds "
                f"offsets [{info.start}, {info.end}); the old log's records from {pos.offset} on are lost"
            )
        elif pos.offset < info.start:
            problem = (
                f"tuplemesh: partition {p} of export {export!r} (log epoch {info.epoch}) starts at "
                f"offset {info.start}, above the query's offset {pos.offset}: records "
                f"[{pos.offset}, {info.start}) were committed away before the query read them"
            )
        else:
            out[p] = Position(info.epoch, pos.offset)
            continue
        if fail_on_data_loss:
            raise DataLossError(
                f"{problem}. Set option 'failOnDataLoss' to false to go on from the log's first record."
            )
        log.warning("%s; going on from offset %d (failOnDataLoss is false)", problem, info.start)
        out[p] = Position(info.epoch, info.start)
    return out


def cap_rows(start: Mapping[int, int], end: Mapping[int, int], budget: int) -> dict[int, int]:
    """``end`` lowered so that at most ``budget`` records lie between ``start`` and it, shared
    fairly: each partition gets an equal share, and shares a partition cannot use go to others."""
    available = {p: max(0, end[p] - start.get(p, end[p])) for p in end}
    taken = dict.fromkeys(end, 0)
    left = budget
    hungry = [p for p in sorted(available) if available[p]]
    while left > 0 and hungry:
        share = max(1, left // len(hungry))
        for p in list(hungry):
            grant = min(share, available[p] - taken[p], left)
            taken[p] += grant
            left -= grant
            if taken[p] == available[p]:
                hungry.remove(p)
            if left == 0:
                break
    return {p: start.get(p, end[p]) + taken[p] if available[p] else end[p] for p in end}
