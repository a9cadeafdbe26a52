"""`PeerAdmins`: this worker's Admin clients to its peers, for what the mesh decides together
without a coordinator (a whole-mesh stop, a rescale)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from tuplemesh.client.channel import open_channel_from_config
from tuplemesh.v1 import admin_pb2, admin_pb2_grpc

__all__ = ["PeerAdmins"]

log = logging.getLogger(__name__)


class PeerAdmins:
    """One Admin stub per peer worker, opened on first use at the address discovery gives.
    Thread-safe for one caller at a time (the worker process's shutdown or rescale thread)."""

    def __init__(
        self, conf: Mapping[str, Any], own_index: int, addresses: Callable[[], Mapping[int, tuple[str, int]]]
    ) -> None:
        self._conf = conf
        self._own = own_index
        self._addresses = addresses
        self._stubs: dict[int, tuple[str, grpc.Channel, admin_pb2_grpc.AdminStub]] = {}

    def _stub(self, worker: int, address: tuple[str, int]) -> admin_pb2_grpc.AdminStub:
        target = f"{address[0]}:{address[1]}"
        known = self._stubs.get(worker)
        if known is not None and known[0] == target:
            return known[2]
        if known is not None:
            known[1].close()  # the peer moved (a restarted pod)
        channel = open_channel_from_config(target, self._conf)
        stub = admin_pb2_grpc.AdminStub(channel)
        self._stubs[worker] = (target, channel, stub)
        return stub

    def statuses(self, timeout: float) -> dict[int, admin_pb2.WorkerStatus | None]:
        """Every peer's status, asked in parallel; None for a peer that did not answer in ``timeout``."""
        request = admin_pb2.GetStatusRequest()
        calls = {
            worker: self._stub(worker, address).GetStatus.future(request, timeout=timeout)
            for worker, address in sorted(self._addresses().items())
            if worker != self._own
        }
        out: dict[int, admin_pb2.WorkerStatus | None] = {}
        for worker, call in calls.items():
            try:
                out[worker] = call.result()
            except grpc.RpcError as exc:
                log.debug("worker %d: no status from peer %d: %s", self._own, worker, exc.code())
                out[worker] = None
        return out

    def close(self) -> None:
        for _, channel, _ in self._stubs.values():
            channel.close()
        self._stubs.clear()
