"""The tests `make test-pure` runs again with TUPLEMESH_PURE_PYTHON=1, by the compiled module they cover.

`make test` runs every test once with the hot path compiled; the pure-Python pass repeats only the
tests of the modules that have a compiled twin, since nothing else differs between the two builds
(tests/test_compiled.py checks every compiled module has its tests here). Standard library only:
the Makefile reads this file before the test dependencies exist.
"""

from __future__ import annotations

_DISRUPTOR = (
    "tests/disruptor/test_ring_buffer.py",
    "tests/disruptor/test_processor.py",
    "tests/disruptor/test_multi_producer_stress.py",
)
_EXECUTOR = (
    "tests/worker/test_executor.py",
    "tests/worker/test_batch_execute.py",
    "tests/worker/test_queue_time.py",
    "tests/worker/test_columns.py",
)
#: a topology end to end: in one process, and on worker processes (which inherit the pure setting)
_END_TO_END = ("tests/worker/test_local_cluster.py", "tests/transport/test_conformance.py")

PURE_PASS: dict[str, tuple[str, ...]] = {
    "tuplemesh.disruptor.sequence": _DISRUPTOR,
    "tuplemesh.disruptor.sequencer": (*_DISRUPTOR, "tests/worker/test_queue_time.py"),
    "tuplemesh.disruptor.wait_strategies": _DISRUPTOR,
    "tuplemesh.disruptor.barrier": _DISRUPTOR,
    "tuplemesh.disruptor.ring_buffer": _DISRUPTOR,
    "tuplemesh.disruptor.processor": _DISRUPTOR,
    "tuplemesh.disruptor.poller": (
        "tests/disruptor/test_ring_buffer.py",
        "tests/worker/test_backpressure.py",
    ),
    "tuplemesh.serialization": ("tests/test_serialization.py",),
    "tuplemesh.transport.framing": ("tests/transport/test_framing.py", "tests/transport/test_grpc_wire.py"),
    "tuplemesh.topology.tuple": ("tests/windowing/test_windows.py", *_END_TO_END),
    "tuplemesh.topology.partition": ("tests/worker/test_columns.py", "tests/topology/test_groupings.py"),
    "tuplemesh.topology.columns": ("tests/worker/test_columns.py",),
    "tuplemesh.core.outbox": ("tests/core/test_outbox.py", *_END_TO_END),
    "tuplemesh.core.collectors": (*_EXECUTOR, "tests/worker/test_load_aware_shuffle.py"),
    "tuplemesh.acking.collectors": ("tests/worker/test_executor.py", "tests/worker/test_acking.py"),
    "tuplemesh.acking.mailbox": ("tests/acking/test_mailbox.py",),
    "tuplemesh.worker.receive": (
        "tests/worker/test_receive_and_transfer_stats.py",
        "tests/worker/test_backpressure.py",
    ),
    "tuplemesh.worker.inbox_reader": ("tests/worker/test_inbox_reader.py", *_EXECUTOR),
    "tuplemesh.worker.bolt_input": (
        "tests/worker/test_bolt_input.py",
        "tests/worker/test_halt.py",
        *_EXECUTOR,
    ),
    "tuplemesh.worker.user_code": ("tests/worker/test_user_errors.py", *_EXECUTOR),
    "tuplemesh.worker.spout_outcomes": ("tests/worker/test_acking.py", *_EXECUTOR),
    "tuplemesh.worker.spout_switch": ("tests/worker/test_spout_switch.py", *_EXECUTOR),
    "tuplemesh.worker.executor_base": _EXECUTOR,
    "tuplemesh.worker.executor": _EXECUTOR,
}


def pure_test_files() -> list[str]:
    """Every test file of the pure pass, once each, in a stable order."""
    return sorted({path for paths in PURE_PASS.values() for path in paths})


if __name__ == "__main__":
    print(*pure_test_files())
