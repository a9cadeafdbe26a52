"""Guaranteed processing: the acker bolt and the system streams that connect it (Storm's scheme).

A spout tuple emitted with a message id becomes the root of a tuple tree with a random 64-bit
root id. Every delivery of a tuple in the tree gets a random 64-bit edge id. The acker task that
owns the root (``acker_tasks[root % n]``) keeps one 64-bit value per root: the XOR of

- the spout's *init*: the XOR of the edge ids of the root's first deliveries;
- each bolt's *ack* of a tuple: its edge id XOR the edge ids of the tuples emitted anchored to it.

Every edge id enters the value exactly twice (once when created, once when acked), so the value
returns to 0 exactly when every tuple in the tree is acked, whatever order the messages arrive
in (up to a 2^-64 chance of a false zero). A *fail* from any bolt fails the tree at once. The
acker then sends the spout task its verdict. A tree the acker has held longer than
``topology.message.timeout.secs`` is forgotten; the spout fails it on its own timer.

Unlike Storm, messages to and from ackers are batched: each executor collects its inits, acks
and fails per acker task and sends them as one ``__acking`` tuple ``[inits, acks, fails]`` of flat
integer lists whenever it flushes its emit buffers; an acker answers each such tuple with one
``__ack_verdict`` tuple ``[acked roots, failed roots]`` per spout task. A spout also picks root ids
owned by an acker in its own worker when there is one, so inits and verdicts stay local.
Memory per in-flight tree is one small list at its acker, whatever the tree's size.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tuplemesh.core.acking import AckingSettings
from tuplemesh.topology.builder import ComponentSpec, Subscription, Topology
from tuplemesh.topology.components import Bolt, BoltCollector, StreamDef, TaskContext
from tuplemesh.topology.groupings import DirectGrouping
from tuplemesh.topology.tuple import Fields, Tuple

__all__ = [
    "ACKER",
    "ACKING_STREAM",
    "SYSTEM_STREAMS",
    "VERDICT_STREAM",
    "AckerBolt",
    "with_acker",
    "with_ackers",
]

ACKER = "__acker"
#: spout or bolt -> acker: [inits [root, value, spout task]*, acks [root, value]*, fails [root]*]
ACKING_STREAM = "__acking"
#: acker -> spout: [acked roots, failed roots]
VERDICT_STREAM = "__ack_verdict"
SYSTEM_STREAMS = frozenset({ACKING_STREAM, VERDICT_STREAM})

_TO_ACKER = {ACKING_STREAM: StreamDef(Fields(["inits", "acks", "fails"]), direct=True)}
_ACKER_OUT = {VERDICT_STREAM: StreamDef(Fields(["acked", "failed"]), direct=True)}


def with_acker(topology: Topology, executors: int) -> Topology:
    """``topology`` plus ``executors`` acker executors and the system streams; itself when 0.

    Every worker calls this with the same arguments, so all of them derive the same task ids.
    """
    if executors <= 0:
        return topology
    direct = DirectGrouping()
    components: dict[str, ComponentSpec] = {}
    acker_inputs: list[Subscription] = []
    for name, spec in topology.components.items():
        acker_inputs.append(Subscription(name, ACKING_STREAM, direct))
        inputs = spec.inputs
        if spec.is_spout:
            inputs = (*inputs, Subscription(ACKER, VERDICT_STREAM, direct))
        components[name] = replace(spec, streams={**spec.streams, **_TO_ACKER}, inputs=inputs)
    components[ACKER] = ComponentSpec(
        name=ACKER,
        prototype=AckerBolt(),
        parallelism=executors,
        num_tasks=executors,
        streams=dict(_ACKER_OUT),
        inputs=tuple(acker_inputs),
    )
    return replace(topology, components=components)


def with_ackers(topology: Topology, conf: Mapping[str, Any]) -> Topology:
    """``topology`` plus the ackers ``topology.acker.executors`` asks for (the topology part
    of the acking feature, ``tuplemesh.acking.mode.FEATURE``)."""
    return with_acker(topology, AckingSettings.from_config(conf).acker_executors)


class AckerBolt(Bolt):
    """Tracks tuple trees by root id (see the module docstring). One per acker task."""

    def prepare(self, conf: Mapping[str, Any], context: TaskContext, collector: BoltCollector) -> None:
        self._collector = collector
        self._timeout = AckingSettings.from_config(conf).message_timeout_seconds
        # root -> [xor value, spout task or 0 until init arrives, first seen, failed]; dicts keep insertion
        # order, so the oldest entries are first and expiry stops at the first young one.
        self._trees: dict[int, list[Any]] = {}
        self._next_sweep = time.monotonic() + self._timeout
        self.completed = 0
        self.failed = 0
        self.expired = 0

    def execute(self, tup: Tuple) -> None:
        inits, acks, fails = tup.values
        trees = self._trees
        now = time.monotonic()
        touched: list[int] = []
        for i in range(0, len(inits), 3):
            root = inits[i]
            tree = trees.get(root)
            if tree is None:
                tree = trees[root] = [0, 0, now, False]
            tree[0] ^= inits[i + 1]
            tree[1] = inits[i + 2]
            touched.append(root)
        for i in range(0, len(acks), 2):
            root = acks[i]
            tree = trees.get(root)
            if tree is None:  # an ack may overtake its init
                tree = trees[root] = [0, 0, now, False]
            tree[0] ^= acks[i + 1]
            touched.append(root)
        for root in fails:
            tree = trees.get(root)
            if tree is None:
                tree = trees[root] = [0, 0, now, False]
            tree[3] = True
            touched.append(root)
        verdicts: dict[int, tuple[list[int], list[int]]] = {}
        for root in touched:
            tree = trees.get(root)
            if tree is None or not tree[1]:  # decided already, or init not here yet
                continue
            if tree[3]:
                verdict = 1
                self.failed += 1
            elif tree[0] == 0:
                verdict = 0
                self.completed += 1
            else:
                continue
            del trees[root]
            verdicts.setdefault(tree[1], ([], []))[verdict].append(root)
        emit_direct = self._collector.emit_direct
        for spout_task, (acked, failed) in verdicts.items():
            emit_direct(spout_task, [acked, failed], stream=VERDICT_STREAM)
        if trees and now >= self._next_sweep:
            self._expire()

    def _expire(self) -> None:
        now = time.monotonic()
        cutoff = now - self._timeout
        trees = self._trees
        while trees:
            root, tree = next(iter(trees.items()))
            if tree[2] > cutoff:
                break
            del trees[root]
            self.expired += 1
        self._next_sweep = now + min(self._timeout, 1.0)

    def report(self) -> Any:
        return {
            "pending": len(self._trees),
            "completed": self.completed,
            "failed": self.failed,
            "expired": self.expired,
        }
