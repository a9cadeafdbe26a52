"""`PeerAdmins.rebalance`: who a rescale waits for."""

from __future__ import annotations

import time

import pytest

from tuplemesh.config import Config
from tuplemesh.errors import TransportError
from tuplemesh.netutil import free_ports
from tuplemesh.server.peer_admin import PeerAdmins
from tuplemesh.topology.assignment import Epoch


def test_a_worker_the_new_epoch_leaves_out_that_cannot_be_reached_is_not_waited_for():
    """A scale-down removed its pod: nothing listens at its address any more."""
    [closed] = free_ports(1)
    admins = PeerAdmins(Config({}), 0, lambda: {1: ("127.0.0.1", closed)})
    try:
        started = time.monotonic()
        admins.rebalance(range(2), Epoch(1, "c0de", 1), timeout=0.5)  # 2 -> 1: worker 1 is left out
        assert time.monotonic() - started < 5
    finally:
        admins.close()


def test_a_worker_the_new_epoch_keeps_must_accept():
    [closed] = free_ports(1)
    admins = PeerAdmins(Config({}), 0, lambda: {1: ("127.0.0.1", closed)})
    try:
        with pytest.raises(TransportError, match="worker 1 did not accept the rescale to 1/2/c0de"):
            admins.rebalance(range(2), Epoch(2, "c0de", 1), timeout=0.5)
        with pytest.raises(TransportError, match="worker 2 has no known address"):
            admins.rebalance(range(3), Epoch(3, "c0de", 1), timeout=0.5)
    finally:
        admins.close()
