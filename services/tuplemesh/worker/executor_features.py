"""`ExecutorFeatures`: what the worker's features added to one executor, asked once as the
executor is built (each feature's `ExecutorHooks`), and the calls the executor makes on them as
it starts, stops and ends its loop, and as its snapshot is read. Construction and lifecycle only:
what the hooks wrap on the data path is put together by `tuplemesh.worker.input_chain`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tuplemesh.core.feature import ExecutorHooks, ExecutorView, Feature
from tuplemesh.core.stats import EXECUTOR_FEATURE_FIELDS

__all__ = ["ExecutorFeatures"]


class ExecutorFeatures:
    """The hooks ``features`` attach to ``executor``, in the features' order; refused (TypeError,
    naming the executor) when one would fill snapshot fields features may not fill."""

    def __init__(self, executor: ExecutorView, features: Sequence[Feature]) -> None:
        hooks = [h for h in (f.attach(executor) for f in features) if h is not None]
        for h in hooks:
            filled = set(h.snapshot_fields()) if h.snapshot_fields is not None else set()
            if not filled <= EXECUTOR_FEATURE_FIELDS:
                raise TypeError(
                    f"executor {executor.name}: a feature fills snapshot fields {sorted(filled)}; "
                    f"features may fill only {sorted(EXECUTOR_FEATURE_FIELDS)}"
                )
        self.hooks: tuple[ExecutorHooks, ...] = tuple(hooks)

    def start(self) -> None:
        """The executor starts (its threads)."""
        for hooks in self.hooks:
            if hooks.on_start is not None:
                hooks.on_start()

    def stop(self) -> None:
        """The executor stops or halts (any thread)."""
        for hooks in self.hooks:
            if hooks.on_stop is not None:
                hooks.on_stop()

    def exit(self) -> None:
        """The executor thread, as its loop ends: what the features release there."""
        for hooks in self.hooks:
            if hooks.on_exit is not None:
                hooks.on_exit()

    def fields(self) -> dict[str, Any]:
        """The fields of the executor's snapshot its features fill (``ExecutorHooks.snapshot_fields``:
        a checkpointed topology's barrier alignment counts). Any thread."""
        fields: dict[str, Any] = {}
        for hooks in self.hooks:
            if hooks.snapshot_fields is not None:
                fields.update(hooks.snapshot_fields())
        return fields
