"""What an executor asks of guaranteed processing (Storm's acking), which plugs in from its own
package (``tuplemesh.acking``, named in ``tuplemesh.registry``): the config it reads
(`AckingSettings`), the per-executor port (`ExecutorAcking`) and its null object for acking off
(`NoAcking`).

The choice is made once per executor, when it is built: no per-tuple code asks whether acking is
on. The executor loop names only the types here; the tracked collectors, the acker mailbox and
the acker bolt are the acking package's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tuplemesh.config import as_config
from tuplemesh.core.collectors import BoltOutputCollector, SpoutOutputCollector, StreamRoute
from tuplemesh.core.outbox import Outbox
from tuplemesh.core.tracker import SpoutTracker
from tuplemesh.topology import BatchBolt, Bolt, ColumnarBolt, Columns, Tuple

__all__ = [
    "AckingFactory",
    "AckingSettings",
    "ExecutorAcking",
    "NoAcking",
    "Verdict",
]

#: An acker's verdict on tuple trees a spout executor started: (the roots acked, the roots failed).
Verdict = tuple[Sequence[Any], Sequence[Any]]


@dataclass(frozen=True)
class AckingSettings:
    """How many ackers, and how long and how many tuple trees a spout may keep open. Immutable."""

    acker_executors: int  # 0: acking off
    message_timeout_seconds: float  # a tree not fully acked by then is failed
    max_spout_pending: int  # open trees per spout task; 0: no limit

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> AckingSettings:
        conf = as_config(conf)
        return cls(
            acker_executors=conf["topology.acker.executors"],
            message_timeout_seconds=conf.seconds("topology.message.timeout.secs"),
            max_spout_pending=conf["topology.max.spout.pending"],
        )


class ExecutorAcking(Protocol):
    """How one executor's tasks take part in guaranteed processing: the collectors they emit
    through, and the calls that hand a bolt its input (each acks what it was given once the
    bolt returns, for a BasicBolt with acking on; otherwise the bolt's own method)."""

    def spout_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any, tracker: SpoutTracker
    ) -> SpoutOutputCollector: ...

    def bolt_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any
    ) -> BoltOutputCollector: ...

    def bolt_call(self, bolt: Bolt, collector: BoltOutputCollector) -> Callable[[Tuple], None]:
        """The per-tuple call (``execute``)."""
        ...

    def batch_call(self, bolt: BatchBolt, collector: BoltOutputCollector) -> Callable[[list[Tuple]], None]:
        """The per-batch call (``execute_batch``)."""
        ...

    def process_call(self, bolt: ColumnarBolt, collector: BoltOutputCollector) -> Callable[[Columns], None]:
        """The columnar call (``process``)."""
        ...

    def verdict(self, tup: Tuple) -> Verdict | None:
        """What ``tup``, taken from a spout executor's inbox, tells of its trees: an acker's
        verdict, or None for a tuple that is not one (a checkpoint coordinator's). Raises
        ValueError for a verdict that is not well formed."""
        ...


#: Builds one executor's acking: (its outbox, its component, its first task, that task's routes,
#: the worker's local tasks). One per executor: its tasks share the outbox and the trees' ids.
AckingFactory = Callable[[Outbox, str, int, Mapping[str, StreamRoute], frozenset[int]], ExecutorAcking]


class NoAcking:
    """Acking off: plain collectors, the bolt's own methods called as they are."""

    def __init__(self, outbox: Outbox, component: str) -> None:
        self._outbox = outbox
        self._component = component

    def spout_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any, tracker: SpoutTracker
    ) -> SpoutOutputCollector:
        return SpoutOutputCollector(task, self._component, routes, self._outbox, counters, tracker)

    def bolt_collector(
        self, task: int, routes: Mapping[str, StreamRoute], counters: Any
    ) -> BoltOutputCollector:
        return BoltOutputCollector(task, self._component, routes, self._outbox, counters)

    def bolt_call(self, bolt: Bolt, collector: BoltOutputCollector) -> Callable[[Tuple], None]:
        return bolt.execute

    def batch_call(self, bolt: BatchBolt, collector: BoltOutputCollector) -> Callable[[list[Tuple]], None]:
        return bolt.execute_batch

    def process_call(self, bolt: ColumnarBolt, collector: BoltOutputCollector) -> Callable[[Columns], None]:
        return bolt.process

    def verdict(self, tup: Tuple) -> Verdict | None:
        return None  # no ackers: no verdicts
