"""`CheckpointRequest`: a checkpoint asked for now (a stopping or rescaling mesh), and its commit."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuplemesh.state.coordinator import CHECKPOINT_COUNTER
from tuplemesh.state.stores import open_store
from tuplemesh.state.ticker import CheckpointTicker

__all__ = ["CheckpointRequest"]


class CheckpointRequest:
    """Asks the coordinator (through its worker's ticker) for a checkpoint and tells when one that
    began after the request is committed: everything the tasks processed before the request is
    then in the store. Made on the coordinator's worker; one thread."""

    def __init__(self, conf: Mapping[str, Any], topology: str, ticker: CheckpointTicker) -> None:
        self._topology = topology
        self._store = open_store(conf)
        # checkpoint numbers come from this counter: any number above it began after the request
        self._before = self._store.counter(topology, CHECKPOINT_COUNTER)
        ticker.checkpoint_now()

    def committed(self) -> bool:
        last = self._store.last_committed(self._topology)
        return last is not None and last > self._before

    def close(self) -> None:
        self._store.close()


class StopCheckpoint:
    """The final checkpoint of a whole-mesh stop (a `tuplemesh.core.feature.DrainWait`).

    On the coordinator's worker the first idle wave asks for a checkpoint (the mesh is idle, so
    it holds everything processed) and the drain ends once it is committed; on every other worker
    the drain ends once the coordinator's worker has stopped (it stops only after that commit).
    """

    def __init__(
        self,
        conf: Mapping[str, Any],
        topology: str,
        coordinator_worker: int,
        ticker: CheckpointTicker | None,
    ) -> None:
        self._conf = conf
        self._topology = topology
        self._coordinator_worker = coordinator_worker
        self._ticker = ticker  # set on the coordinator's worker only
        self._request: CheckpointRequest | None = None
        self.checkpointed = False

    def settled(self, gone: set[int]) -> bool:
        if self._ticker is None:
            return self._coordinator_worker in gone
        if self._request is None:
            self._request = CheckpointRequest(self._conf, self._topology, self._ticker)
            return False
        if self._request.committed():
            self.checkpointed = True
            self._request.close()
            return True
        return False
