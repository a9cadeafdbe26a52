"""Guaranteed processing: the acker bolt and the system streams that connect it (Storm's scheme).

A spout tuple emitted with a message id becomes the root of a tuple tree with a random 64-bit
root id. Every delivery of a tuple in the tree gets a random 64-bit edge id. The acker task that
owns the root (``acker_tasks[root % n]``) keeps one 64-bit value per root: the XOR of

- ``__ack_init`` from the spout: the XOR of the edge ids of the root's deliveries;
- ``__ack_ack`` from each bolt acking a tuple: its edge id XOR the edge ids of the tuples it
  emitted anchored to it.

Every edge id enters the value exactly twice (once when created, once when acked), so the value
returns to 0 exactly when every tuple in the tree is acked, whatever the order the messages
arrive in (up to a 2^-64 chance of a false zero). The acker then tells the spout task on
``__ack_ack``; a ``__ack_fail`` from any bolt fails the tree at once. A tree the acker has held
longer than ``topology.message.timeout.secs`` is forgotten; the spout fails it on its own timer.

Memory per in-flight tree is one small list at its acker, whatever the tree's size.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tuplemesh.topology.builder import ComponentSpec, Subscription, Topology
from tuplemesh.topology.components import Bolt, BoltCollector, StreamDef, TopologyContext
from tuplemesh.topology.groupings import DirectGrouping
from tuplemesh.topology.tuple import Fields, Tuple

__all__ = ["ACKER", "ACK_STREAM", "FAIL_STREAM", "INIT_STREAM", "SYSTEM_STREAMS", "AckerBolt", "with_acker"]

ACKER = "__acker"
INIT_STREAM = "__ack_init"  # spout -> acker: [root, xor of the first edges, spout task]
ACK_STREAM = "__ack_ack"  # bolt -> acker: [root, edge ^ ack_val]; acker -> spout: [root]
FAIL_STREAM = "__ack_fail"  # bolt -> acker: [root]; acker -> spout: [root]
SYSTEM_STREAMS = frozenset({INIT_STREAM, ACK_STREAM, FAIL_STREAM})

_SPOUT_OUT = {INIT_STREAM: StreamDef(Fields(["root", "value", "task"]), direct=True)}
_BOLT_OUT = {
    ACK_STREAM: StreamDef(Fields(["root", "value"]), direct=True),
    FAIL_STREAM: StreamDef(Fields(["root"]), direct=True),
}
_ACKER_OUT = {
    ACK_STREAM: StreamDef(Fields(["root"]), direct=True),
    FAIL_STREAM: StreamDef(Fields(["root"]), direct=True),
}


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
        if spec.is_spout:
            extra = _SPOUT_OUT
            acker_inputs.append(Subscription(name, INIT_STREAM, direct))
            verdicts = (Subscription(ACKER, ACK_STREAM, direct), Subscription(ACKER, FAIL_STREAM, direct))
            inputs = (*spec.inputs, *verdicts)
        else:
            extra = _BOLT_OUT
            acker_inputs += [Subscription(name, ACK_STREAM, direct), Subscription(name, FAIL_STREAM, direct)]
            inputs = spec.inputs
        components[name] = replace(spec, streams={**spec.streams, **extra}, inputs=inputs)
    components[ACKER] = ComponentSpec(
        name=ACKER,
        prototype=AckerBolt(),
        parallelism=executors,
        num_tasks=executors,
        streams=dict(_ACKER_OUT),
        inputs=tuple(acker_inputs),
    )
    return replace(topology, components=components)


class AckerBolt(Bolt):
    """Tracks tuple trees by root id (see the module docstring). One per acker task."""

    def prepare(self, conf: Mapping[str, Any], context: TopologyContext, collector: BoltCollector) -> None:
        self._collector = collector
        self._timeout = float(conf["topology.message.timeout.secs"])
        # root -> [xor value, spout task or 0 until init arrives, first seen, failed]; dicts keep insertion
        # order, so the oldest entries are first and expiry stops at the first young one.
        self._trees: dict[int, list[Any]] = {}
        self._next_sweep = time.monotonic() + self._timeout
        self.completed = 0
        self.failed = 0
        self.expired = 0

    def execute(self, tup: Tuple) -> None:
        values = tup.values
        root = values[0]
        tree = self._trees.get(root)
        if tree is None:
            tree = self._trees[root] = [0, 0, time.monotonic(), False]
        stream = tup.source_stream
        if stream == ACK_STREAM:
            tree[0] ^= values[1]
        elif stream == INIT_STREAM:
            tree[0] ^= values[1]
            tree[1] = values[2]
        elif stream == FAIL_STREAM:
            tree[3] = True
        if tree[1]:  # the spout task is known once init arrived; acks may overtake it
            if tree[3]:
                del self._trees[root]
                self.failed += 1
                self._collector.emit_direct(tree[1], [root], stream=FAIL_STREAM)
            elif tree[0] == 0:
                del self._trees[root]
                self.completed += 1
                self._collector.emit_direct(tree[1], [root], stream=ACK_STREAM)
        if self._trees and time.monotonic() >= self._next_sweep:
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
