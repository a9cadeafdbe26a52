"""The configuration keys of hot keys, declared here and added to tuplemesh's table through the
feature's registry line: validated, documented and listed by ``tuplemesh config`` as every other
key. The configuration imports this module on its first read, so it imports nothing but
``tuplemesh.config``."""

from __future__ import annotations

from typing import Any

from tuplemesh.config import ConfigKey

__all__ = ["ADMIN_KEY", "ENABLED_KEY", "SAMPLE_KEY", "SETTINGS", "TOP_K_KEY"]

#: Whether keys are counted at all.
ENABLED_KEY = "topology.hotkeys.enabled"
#: How many keys each stream lists.
TOP_K_KEY = "topology.hotkeys.top.k"
#: Keys are counted in one inbox batch of this many (1: every tuple).
SAMPLE_KEY = "topology.hotkeys.sample.every"
#: Whether Admin/HotKeys answers (keys are user data).
ADMIN_KEY = "admin.hotkeys.enabled"


def _at_least_one(value: Any) -> str | None:
    return None if value >= 1 else "must be 1 or more"


SETTINGS: tuple[ConfigKey, ...] = (
    ConfigKey(
        ENABLED_KEY,
        bool,
        False,
        "Count the keys of every fields-grouped stream into a bolt (Admin/HotKeys, the web "
        "UI's hot keys, the tuplemesh_key_skew gauge). Off by default: at the default sampling "
        "it costs the cheapest bolt's loop about 2-3 % of its throughput (see Hot keys in the "
        "operations guide).",
    ),
    ConfigKey(
        TOP_K_KEY,
        int,
        10,
        "Keys listed per fields-grouped stream by Admin/HotKeys, each with its share of tuples "
        "and of execute time, counted in a sketch of 32 entries per key listed (exact while a "
        "stream has fewer distinct keys than that).",
        _at_least_one,
        unit="keys",
    ),
    ConfigKey(
        SAMPLE_KEY,
        int,
        128,
        "Hot keys are counted (and timed) in one inbox batch of this many, the others run "
        "untouched: their cost is divided by it. 1 counts every tuple (exact counts).",
        _at_least_one,
        unit="batches",
    ),
    ConfigKey(
        ADMIN_KEY,
        bool,
        False,
        "Allow Admin/HotKeys (the hottest keys of fields-grouped streams), and the web UI to "
        "show them; off by default: keys are user data. The tuplemesh_key_skew gauge names no "
        "key and is always exported.",
    ),
)
