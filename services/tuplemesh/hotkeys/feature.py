"""Per-key observability: which keys of each fields-grouped stream take a component's tuples and
its execute time, and how skewed that makes the component.

Written only against the feature interface (tuplemesh.core.feature): it wraps each task's call
of every bolt executor with a fields-grouped input, keeps one `KeySketch` per (executor, stream),
and merges them per (component, stream) when read (its section, the tuplemesh_key_skew gauge and
the Admin/HotKeys answer). Each worker sees the keys its own tasks
execute (a fields grouping sends every key to one task, so a key shows up on one worker).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from operator import itemgetter
from typing import Any

from tuplemesh.config import as_config
from tuplemesh.core.feature import (
    ExecuteBatchFn,
    ExecuteFn,
    ExecutorHooks,
    ExecutorView,
    FeatureContext,
    FeatureMetric,
    FeatureServer,
    ProcessFn,
    fields_keys,
)
from tuplemesh.core.feature_spec import FeatureSpec
from tuplemesh.hotkeys.panel import PANEL
from tuplemesh.hotkeys.service import DECLARED, HotKeysService
from tuplemesh.hotkeys.settings import ADMIN_KEY, ENABLED_KEY, SAMPLE_KEY, TOP_K_KEY
from tuplemesh.hotkeys.sketch import KeySketch
from tuplemesh.topology import Columns, Tuple

__all__ = ["FEATURE", "HotKeys", "feature"]

#: Keys kept per sketch for each key listed: more than listed, so the listed counts stay exact
#: while the stream has fewer distinct keys than this and near-exact beyond.
CAPACITY_PER_KEY = 32

StreamKey = tuple[str, str]  # (source component, stream)


class _ExecutorKeys:
    """One executor's sketches, by input stream; written by its thread only."""

    def __init__(self, executor: ExecutorView, keyed: Mapping[StreamKey, tuple[int, ...]], capacity: int):
        self.component = executor.component
        self.tasks = len(executor.task_ids)
        self.sketches = {stream: KeySketch(capacity) for stream in keyed}
        # what the wrappers look up per tuple, by stream then source component (no key tuple to
        # build per tuple): the key's getter and the stream's sketch
        self.lookup: dict[str, dict[str, tuple[Callable[[Sequence[Any]], Hashable], KeySketch]]] = {}
        for (source, stream), indices in keyed.items():
            self.lookup.setdefault(stream, {})[source] = (
                itemgetter(*indices),
                self.sketches[(source, stream)],
            )
        # the same for a batch of columns: the key columns' positions and the stream's sketch
        self.keyed = {stream: (indices, self.sketches[stream]) for stream, indices in keyed.items()}

    def wrap_execute(self, task: int, fn: ExecuteFn) -> ExecuteFn:
        lookup = self.lookup
        clock = time.perf_counter

        def observed(tup: Tuple) -> None:
            sources = lookup.get(tup.source_stream)
            found = None if sources is None else sources.get(tup.source_component)
            if found is None:  # an input that is not fields-grouped
                fn(tup)
                return
            start = clock()
            try:
                fn(tup)
            finally:
                key_of, sketch = found
                sketch.add(key_of(tup.values), clock() - start)

        return observed

    def wrap_execute_batch(self, task: int, fn: ExecuteBatchFn) -> ExecuteBatchFn:
        lookup = self.lookup
        clock = time.perf_counter

        def observed(tuples: list[Tuple]) -> None:
            start = clock()
            try:
                fn(tuples)
            finally:
                if tuples:
                    # one time for the call: each tuple gets an equal part of it
                    each = (clock() - start) / len(tuples)
                    for tup in tuples:
                        sources = lookup.get(tup.source_stream)
                        found = None if sources is None else sources.get(tup.source_component)
                        if found is not None:
                            found[1].add(found[0](tup.values), each)

        return observed

    def wrap_process(self, task: int, fn: ProcessFn) -> ProcessFn:
        keyed = self.keyed
        clock = time.perf_counter

        def observed(batch: Columns) -> None:
            start = clock()
            try:
                fn(batch)
            finally:
                found = keyed.get((batch.source_component, batch.source_stream))
                if found is not None and len(batch):
                    indices, sketch = found
                    # one time for the call: each row gets an equal part of it
                    each = (clock() - start) / len(batch)
                    columns = batch.columns
                    keys = (
                        columns[indices[0]]
                        if len(indices) == 1
                        else zip(*(columns[i] for i in indices), strict=True)
                    )
                    add = sketch.add
                    for key in keys:
                        add(key, each)

        return observed


class HotKeys:
    """The hot keys of one worker's fields-grouped inputs. Not ``counting``: it wraps no executor
    and exports nothing, and its service refuses to list keys (FAILED_PRECONDITION, naming the
    key that turns counting on); not ``allowed``: its service refuses (PERMISSION_DENIED)."""

    name = "hotkeys"

    def __init__(
        self,
        context: FeatureContext,
        top_k: int,
        sample_every: int = 1,
        *,
        counting: bool = True,
        allowed: bool = False,
    ) -> None:
        self.worker = context.worker
        self.counting, self.allowed = counting, allowed
        self.top_k = top_k
        self.sample_every = sample_every
        self.capacity = max(2, top_k * CAPACITY_PER_KEY)
        self._topology = context.topology
        self._executors: list[_ExecutorKeys] = []

    def attach(self, executor: ExecutorView) -> ExecutorHooks | None:
        if not self.counting or not executor.is_bolt:
            return None
        keyed = fields_keys(self._topology, executor.component)
        if not keyed:
            return None
        keys = _ExecutorKeys(executor, keyed, self.capacity)
        self._executors.append(keys)
        return ExecutorHooks(
            wrap_execute=keys.wrap_execute,
            wrap_execute_batch=keys.wrap_execute_batch,
            wrap_process=keys.wrap_process,
            every_batches=self.sample_every,
        )

    def start(self) -> None:
        pass  # no thread: the executors' own threads count

    def stopping(self) -> None:
        pass  # nothing waits on callers from outside

    def stop(self) -> None:
        pass

    def streams(self) -> list[dict[str, Any]]:
        """Every watched (component, stream): its totals on this worker and its top keys."""
        merged: dict[tuple[str, str, str], dict[str, Any]] = {}
        for keys in self._executors:
            for (source, stream), sketch in keys.sketches.items():
                into = merged.setdefault(
                    (keys.component, source, stream),
                    {"tuples": 0, "seconds": 0.0, "offset": 0, "tasks": 0, "keys": {}},
                )
                into["tasks"] += keys.tasks
                into["offset"] += sketch.offset
                into["tuples"] += sketch.tuples
                into["seconds"] += sketch.seconds
                for key, tuples, seconds in sketch.entries():
                    have = into["keys"].get(key, (0, 0.0))
                    into["keys"][key] = (have[0] + tuples, have[1] + seconds)
        out = []
        for (component, source, stream), totals in sorted(merged.items()):
            total, seconds = totals["tuples"], totals["seconds"]
            ranked = sorted(totals["keys"].items(), key=lambda kv: (-kv[1][0], repr(kv[0])))
            top = [
                {
                    "key_json": json.dumps(key, default=repr),
                    "tuples": count,
                    "tuple_share": count / total if total else 0.0,
                    "execute_seconds": spent,
                    "execute_share": spent / seconds if seconds else 0.0,
                }
                for key, (count, spent) in ranked[: self.top_k]
            ]
            share = top[0]["tuple_share"] if top else 0.0
            out.append(
                {
                    "component": component,
                    "source_component": source,
                    "stream": stream,
                    "tuples": total,
                    "execute_seconds": seconds,
                    "tasks": totals["tasks"],
                    "error_bound": totals["offset"],
                    # the hottest key's share over one task's fair share: above 1, that key alone
                    # gives its task more than an even split of this worker's tuples would
                    "skew": share * totals["tasks"],
                    "keys": top,
                }
            )
        return out

    def serve(self, where: FeatureServer) -> None:
        service = HotKeysService(self.worker, self.section, allowed=self.allowed, counting=self.counting)
        where.admin_calls.add(DECLARED, {"HotKeys": service.HotKeys})

    def section(self) -> Mapping[str, Any]:
        """Its settings and streams; the keys themselves (user data) only where Admin/HotKeys
        may hand them out (``admin.hotkeys.enabled``): the section is in every worker status."""
        streams = self.streams()
        if not self.allowed:
            streams = [{k: v for k, v in stream.items() if k != "keys"} for stream in streams]
        return {"top_k": self.top_k, "sample_every": self.sample_every, "streams": streams}

    def metrics(self) -> Sequence[FeatureMetric]:
        if not self.counting:
            return ()
        skew: dict[str, float] = {}
        for stream in self.streams():
            skew[stream["component"]] = max(skew.get(stream["component"], 0.0), stream["skew"])
        return (
            FeatureMetric(
                "tuplemesh_key_skew",
                "The hottest key's share of a component's fields-grouped tuples on this worker, "
                "over one task's fair share (1 / its tasks here); above 1 that key alone overloads "
                "its task. Admin/HotKeys names the keys.",
                "gauge",
                ("component",),
                [((component,), value) for component, value in sorted(skew.items())],
            ),
        )

    def snapshot_fields(self) -> Mapping[str, Any]:
        return {}


def feature(context: FeatureContext) -> HotKeys:
    """The running part's factory (``FEATURE.build``): counting unless ``topology.hotkeys.enabled``
    is off, when it wraps no executor (no cost) and only answers Admin/HotKeys with its refusal. The
    keys' defaults and bounds are the configuration's (a value out of bounds was refused when the
    conf was built)."""
    conf = as_config(context.conf)
    return HotKeys(
        context, conf[TOP_K_KEY], conf[SAMPLE_KEY], counting=conf[ENABLED_KEY], allowed=conf[ADMIN_KEY]
    )


#: The registry's entry: its running part and its panel on the web UI (its keys are on its
#: registry line).
FEATURE = FeatureSpec("hotkeys", build=feature, panel=PANEL)
