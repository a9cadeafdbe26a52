"""The stateful component API: bolts whose state is checkpointed, spouts that can be rewound."""

from __future__ import annotations

from typing import Any

from tuplemesh.state.base import KeyValueState
from tuplemesh.topology.components import Bolt, Spout

__all__ = ["ReplayableSpout", "StatefulBolt"]


class StatefulBolt(Bolt):
    """A bolt whose state the runtime keeps (Storm 2's IStatefulBolt).

    ``init_state`` is called after ``prepare`` and before the first ``execute``, and again after
    every rollback, each time with the state of the checkpoint the mesh resumes from (empty on a
    first run). Keep every piece of state that must survive a failure in it: changes made since
    the last checkpoint are discarded by a rollback and made again by the replay.
    """

    #: Whether having this bolt makes a topology checkpointed. A bolt that only keeps state when
    #: its topology is checkpointed anyway (the Gateway's ExportBolt) says False.
    checkpoints_topology = True

    def init_state(self, state: KeyValueState) -> None:
        raise NotImplementedError

    def pre_checkpoint(self, checkpoint: int) -> None:
        """Called just before the state is stored as this task's part of ``checkpoint``: put
        anything kept outside the state into it now (Storm 2's ``preCommit``)."""

    def checkpoint_committed(self, checkpoint: int) -> None:
        """``checkpoint`` (one this task stored a part of) is committed: what it holds can no
        longer be rolled back, so its effects may be released to the outside world."""


class ReplayableSpout(Spout):
    """A spout that can say where it is and go back there (an offset in a log, a file position).

    The position is stored with every checkpoint, and a rollback rewinds the spout to the
    position of the checkpoint the mesh resumes from, so the tuples emitted after it are emitted
    again. Emits need no message ids: the rewind is the replay.
    """

    def position(self) -> Any:
        """Where the next emit will come from; msgpack-encodable (int, str, list, dict ...)."""
        raise NotImplementedError

    def rewind(self, position: Any) -> None:
        """Continue from ``position`` (one ``position`` returned); None: from the very beginning."""
        raise NotImplementedError

    def committed(self, position: Any) -> None:
        """The checkpoint that stored ``position`` is committed: nothing emitted before it will
        be asked for again (a source may release it, as a Kafka consumer commits its offset)."""
