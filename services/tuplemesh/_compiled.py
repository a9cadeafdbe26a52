"""Which modules are compiled with mypyc: the one list the build (setup.py) and the runtime read,
and the import hook that loads their .py sources instead when TUPLEMESH_PURE_PYTHON is set.

Standard library only: setup.py runs this file before the package's dependencies exist.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from types import ModuleType

#: Compiled together into one shared library from these same .py sources, which are the fallback.
COMPILED_MODULES: tuple[str, ...] = (
    "tuplemesh.disruptor.sequence",
    "tuplemesh.disruptor.sequencer",
    "tuplemesh.disruptor.wait_strategies",
    "tuplemesh.disruptor.barrier",
    "tuplemesh.disruptor.ring_buffer",
    "tuplemesh.disruptor.processor",
    "tuplemesh.disruptor.poller",
    "tuplemesh.serialization",
    "tuplemesh.transport.framing",
    "tuplemesh.topology.tuple",
    "tuplemesh.topology.partition",
    "tuplemesh.topology.columns",
    "tuplemesh.core.outbox",
    "tuplemesh.core.collectors",
    "tuplemesh.acking.collectors",
    "tuplemesh.acking.mailbox",
    "tuplemesh.worker.receive",
    "tuplemesh.worker.inbox_reader",
    "tuplemesh.worker.bolt_input",
    "tuplemesh.worker.user_code",
    "tuplemesh.worker.spout_outcomes",
    "tuplemesh.worker.spout_switch",
    "tuplemesh.worker.executor_base",
    "tuplemesh.worker.executor",
)

#: mypyc's group name; the shared library holding the compiled code is ``<GROUP_NAME>__mypyc``.
GROUP_NAME = "tuplemesh._hotpath"

#: At build time: build the pure package. At run time: import the .py sources of the compiled
#: modules even where their extension modules exist (worker processes inherit it).
PURE_PYTHON_ENV = "TUPLEMESH_PURE_PYTHON"


class SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the compiled modules' .py files, ahead of the extension modules beside them."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in COMPILED_MODULES or path is None:
            return None  # every compiled module is in a package, so ``path`` is its __path__
        source_name = fullname.rpartition(".")[2] + ".py"
        for directory in path:
            source = os.path.join(directory, source_name)
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def use_pure_python() -> None:
    """Import the compiled modules from their .py sources from now on (idempotent)."""
    if not any(isinstance(finder, SourceFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, SourceFinder())


def compiled_modules() -> list[str]:
    """The listed modules that are (or, imported now, would be) compiled in this process."""
    compiled = []
    for name in COMPILED_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            origin = getattr(module, "__file__", None)
        else:
            spec = importlib.util.find_spec(name)
            origin = spec.origin if spec is not None else None
        if origin is not None and origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
            compiled.append(name)
    return compiled
