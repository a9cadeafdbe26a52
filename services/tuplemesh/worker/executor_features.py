"""`ExecutorFeatures`: what the worker's features added to one executor, asked once as the
executor is built (each feature's `ExecutorHooks`), and the calls the executor makes on them as
it starts, stops and ends its loop, and as its snapshot is read. Construction and lifecycle only:
what the hooks wrap on the data path is put together by `tuplemesh.worker.input_chain`.

A hook that raises as the executor stops or ends its loop is logged, and the others still run:
the executor's way out (its final flush, its components' ``close`` or ``cleanup``, their
reports) must not be cut short by a feature's failure."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from tuplemesh.core.feature import ExecutorHooks, ExecutorView, Feature
from tuplemesh.core.stats import EXECUTOR_FEATURE_FIELDS

__all__ = ["ExecutorFeatures"]

log = logging.getLogger(__name__)


class ExecutorFeatures:
    """The hooks ``features`` attach to ``executor``, in the features' order; refused (TypeError,
    naming the executor) when one would fill snapshot fields features may not fill."""

    def __init__(self, executor: ExecutorView, features: Sequence[Feature]) -> None:
        self.executor = executor.name
        attached = [(f.name, f.attach(executor)) for f in features]
        #: (feature name, its hooks) of each feature that added some here
        self._named = tuple((name, h) for name, h in attached if h is not None)
        for _, h in self._named:
            filled = set(h.snapshot_fields()) if h.snapshot_fields is not None else set()
            if not filled <= EXECUTOR_FEATURE_FIELDS:
                raise TypeError(
                    f"executor {executor.name}: a feature fills snapshot fields {sorted(filled)}; "
                    f"features may fill only {sorted(EXECUTOR_FEATURE_FIELDS)}"
                )
        self.hooks: tuple[ExecutorHooks, ...] = tuple(h for _, h in self._named)

    def start(self) -> None:
        """The executor starts (its threads). A hook that raises fails the start."""
        for hooks in self.hooks:
            if hooks.on_start is not None:
                hooks.on_start()

    def stop(self) -> None:
        """The executor stops or halts (any thread)."""
        self._each("on_stop", lambda hooks: hooks.on_stop)

    def exit(self) -> None:
        """The executor thread, as its loop ends: what the features release there."""
        self._each("on_exit", lambda hooks: hooks.on_exit)

    def _each(self, what: str, hook: Callable[[ExecutorHooks], Callable[[], None] | None]) -> None:
        """Call each feature's ``what`` hook; one that raises is logged, and the rest run."""
        for name, hooks in self._named:
            call = hook(hooks)
            if call is None:
                continue
            try:
                call()
            except Exception:
                log.exception("executor %s: feature %s raised in its %s hook", self.executor, name, what)

    def fields(self) -> dict[str, Any]:
        """The fields of the executor's snapshot its features fill (``ExecutorHooks.snapshot_fields``:
        a checkpointed topology's barrier alignment counts). Any thread."""
        fields: dict[str, Any] = {}
        for hooks in self.hooks:
            if hooks.snapshot_fields is not None:
                fields.update(hooks.snapshot_fields())
        return fields
