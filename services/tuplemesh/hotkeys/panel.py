"""The hot keys on the web UI of a mesh (`tuplemesh.core.panel.MeshPanel`): every worker's
``Admin/HotKeys`` answer (the serving worker's own read from its feature), merged into one entry per
component (its streams and their top keys across the mesh), drawn by ``static/panel.js``: a
section with one table per stream and a badge under each keyed component's node naming its top
key."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

import grpc

from tuplemesh.core.admin_calls import admin_call
from tuplemesh.core.feature import Feature
from tuplemesh.hotkeys.service import HOT_KEYS, hot_keys_message
from tuplemesh.hotkeys.settings import ADMIN_KEY, ENABLED_KEY
from tuplemesh.hotkeys.v1 import hotkeys_pb2

__all__ = ["KEY_TEXT_LIMIT", "PANEL", "HotKeysPanel", "key_text", "merge_hot_keys"]

#: Characters of a key's text the view carries: keys are user data of any size, and the view is
#: sent to every browser each second (the page shortens them further for display).
KEY_TEXT_LIMIT = 200


def key_text(key_json: str) -> str:
    """A hot key as people read it: a string key is its text, any other key its JSON."""
    try:
        value = json.loads(key_json)
    except ValueError:
        return key_json
    return value if isinstance(value, str) else key_json


def merge_hot_keys(answers: Sequence[hotkeys_pb2.HotKeysResponse]) -> dict[str, dict[str, Any]]:
    """Several workers' Admin/HotKeys answers as one entry per component: its fields-grouped
    streams, most tuples first, each with the top keys of the whole mesh and their shares of it.

    A fields grouping sends a key to one task, so a key is on one worker and the merge adds
    disjoint counts (after a rescale a key may have run on two: its counts add up). The error
    bound of a merged count is the sum of the workers' (each is at most its own below). The skew
    is the hottest key's share of the stream over one task's fair share (1 / the tasks of the
    workers answering): the ``tuplemesh_key_skew`` gauge's figure, for the workers shown."""
    merged: dict[tuple[str, str, str], dict[str, Any]] = {}
    for answer in answers:
        for s in answer.streams:
            into = merged.setdefault(
                (s.component, s.source_component, s.stream),
                {"tuples": 0, "execute_seconds": 0.0, "tasks": 0, "error_bound": 0, "workers": [],
                 "top_k": 0, "sample_every": 1, "keys": {}},
            )  # fmt: skip
            into["tuples"] += s.tuples
            into["execute_seconds"] += s.execute_seconds
            into["tasks"] += s.tasks
            into["error_bound"] += s.error_bound
            into["workers"].append(answer.worker)
            into["top_k"] = max(into["top_k"], answer.top_k)
            into["sample_every"] = max(into["sample_every"], answer.sample_every)
            for k in s.keys:
                tuples, seconds = into["keys"].get(k.key_json, (0, 0.0))
                into["keys"][k.key_json] = (tuples + k.tuples, seconds + k.execute_seconds)
    components: dict[str, dict[str, Any]] = {}
    for (component, source, stream), m in sorted(merged.items()):
        total, seconds = m["tuples"], m["execute_seconds"]
        ranked = sorted(m["keys"].items(), key=lambda kv: (-kv[1][0], kv[0]))[: m["top_k"] or None]
        keys = []
        for key_json, (tuples, spent) in ranked:
            text = key_text(key_json)
            keys.append(
                {
                    "key": text[:KEY_TEXT_LIMIT],
                    "key_truncated": len(text) > KEY_TEXT_LIMIT,
                    "tuples": tuples,
                    "tuple_share": tuples / total if total else 0.0,
                    "execute_seconds": spent,
                    "execute_share": spent / seconds if seconds else 0.0,
                }
            )
        row = {
            "source_component": source,
            "stream": stream,
            "tuples": total,
            "execute_seconds": seconds,
            "tasks": m["tasks"],
            "workers": sorted(m["workers"]),
            # 0: every count listed is exact; else the most one is below the truth
            "error_bound": m["error_bound"],
            # above 1: counts are of one inbox batch in this many (topology.hotkeys.sample.every)
            "sample_every": m["sample_every"],
            "skew": keys[0]["tuple_share"] * m["tasks"] if keys else 0.0,
            "keys": keys,
        }
        components.setdefault(component, {"streams": []})["streams"].append(row)
    for entry in components.values():
        entry["streams"].sort(key=lambda r: -r["tuples"])  # stable: the sorted order among ties
        entry["skew"] = max(r["skew"] for r in entry["streams"])
    return components


class HotKeysPanel:
    """The hot keys' `MeshPanel`: shown where keys are counted and allowed out."""

    name = "hot_keys"

    def shown(self, conf: Mapping[str, Any]) -> bool:
        return bool(conf[ENABLED_KEY] and conf[ADMIN_KEY])

    def local(self, worker: int, feature: Feature | None) -> hotkeys_pb2.HotKeysResponse | None:
        return None if feature is None else hot_keys_message(worker, feature.section())

    def ask(self, channel: grpc.Channel, timeout: float) -> grpc.Future:
        return admin_call(channel, HOT_KEYS).future(hotkeys_pb2.HotKeysRequest(), timeout=timeout)

    def merge(self, answers: Sequence[Any]) -> Mapping[str, Mapping[str, Any]]:
        return merge_hot_keys(answers)

    def script(self) -> bytes:
        return (resources.files("tuplemesh.hotkeys") / "static" / "panel.js").read_bytes()

    def style(self) -> bytes:
        return (resources.files("tuplemesh.hotkeys") / "static" / "panel.css").read_bytes()


PANEL = HotKeysPanel()
