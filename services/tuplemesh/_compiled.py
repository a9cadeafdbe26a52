"""The modules compiled with mypyc: the one list both the build (setup.py) and the runtime read.

Keep this file free of imports: setup.py loads it before the package's dependencies exist.
"""

#: Compiled together into one shared library (``SHARED_LIBRARY``), from these same .py sources.
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
    "tuplemesh.worker.outbox",
    "tuplemesh.worker.collectors",
    "tuplemesh.acking.collectors",
    "tuplemesh.worker.executor",
)

#: mypyc's group name; the shared library holding the code is ``<GROUP_NAME>__mypyc``.
GROUP_NAME = "tuplemesh._hotpath"

#: Set at build time: build the pure package; at run time: import the .py sources even where
#: compiled extension modules exist.
PURE_PYTHON_ENV = "TUPLEMESH_PURE_PYTHON"
