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

    def init_state(self, state: KeyValueState) -> None:
        raise NotImplementedError


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
