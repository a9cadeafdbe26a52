"""Keys to tasks, a whole column at a time: the fields grouping's hash and its one-pass partition.

Compiled (mypyc): ``partition_by_key`` is the loop a columnar emit runs instead of one grouping
call per row, and ``take`` builds each task's part of every column.

The hash is CRC-32, not Python's ``hash()``: ``hash(str)`` differs between processes and every
worker must route the same key to the same task. ``stable_hash`` and the per-row chooser in
`tuplemesh.topology.groupings` use the same function, so a key goes to the same task whether it
was emitted alone or in a column.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Any

import msgpack

__all__ = ["MEMO_LIMIT", "partition_by_key", "stable_hash", "take"]

#: Keys remembered per chooser (vocabularies repeat: a dict hit costs a fraction of hashing the
#: key again); the memo is cleared when it reaches this size, so it stays bounded.
MEMO_LIMIT = 65_536


def stable_hash(values: Sequence[Any]) -> int:
    """Process-independent hash of ``values`` (str/bytes/int fast paths, msgpack otherwise)."""
    if len(values) == 1:
        value = values[0]
        kind = type(value)
        if kind is str:
            return zlib.crc32(value.encode())
        if kind is int:
            return int(value) & 0xFFFFFFFF
        if kind is bytes:
            return zlib.crc32(value)
    return zlib.crc32(msgpack.packb(list(values), use_bin_type=True, default=repr))


def partition_by_key(keys: Sequence[Any], count: int, memo: dict[Any, int]) -> list[list[int]]:
    """For each of ``count`` tasks, the indices of ``keys`` whose hash picks it, in order.

    ``memo`` (key -> task position) is read and filled for keys of exact type str, bytes or int,
    whose equality agrees with the hash (True == 1 but hashes differently: bools are left out)."""
    parts: list[list[int]] = [[] for _ in range(count)]
    for i in range(len(keys)):
        key = keys[i]
        kind = type(key)
        if kind is str or kind is int or kind is bytes:
            position = memo.get(key, -1)
            if position < 0:
                position = stable_hash((key,)) % count
                if len(memo) >= MEMO_LIMIT:
                    memo.clear()
                memo[key] = position
        else:
            position = stable_hash((key,)) % count
        parts[position].append(i)
    return parts


def take(columns: Sequence[Sequence[Any]], indices: list[int]) -> list[list[Any]]:
    """Each column's values at ``indices``, in that order."""
    taken: list[list[Any]] = []
    for column in columns:
        taken.append([column[i] for i in indices])
    return taken
