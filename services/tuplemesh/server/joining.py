"""Which assignment epoch a starting worker takes: its own, or the one its running peers agree on.

A worker's command line (or pod template) says how many workers the mesh has, but the mesh may
have been rescaled since: a pod restarted from an old template, or started for a scale-up before
the mesh grew. So before its executors start, a worker asks its peers' Admin for their epoch.
The newest epoch among the answering peers (same topology code; the highest counter) wins over
its own when it is newer (a higher counter, or the same counter with another worker count);
when the epoch it takes has no place for its index it waits until the mesh grows to include it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tuplemesh.topology.assignment import Epoch

__all__ = ["choose_epoch"]

log = logging.getLogger(__name__)

#: Between two asks while a worker waits for the mesh to grow to include it.
WAIT_SECS = 0.25


def choose_epoch(
    index: int,
    own: Epoch,
    peer_epochs: Callable[[], list[Epoch]],
    stop: threading.Event,
    *,
    start_alone: bool = True,
) -> Epoch | None:
    """The epoch worker ``index`` starts at; None when ``stop`` was set while it waited.

    ``start_alone=False``: while no peer answers at all, wait (a pod of a StatefulSet the mesh
    follows, other than ordinal 0: its peers may be restarting at a rescale, and ordinal 0
    starts a new mesh)."""
    waited = False
    while True:
        answers = peer_epochs()
        epochs = [e for e in answers if e.code == own.code]
        if not epochs and (waited or (not answers and not start_alone)):
            # the mesh it waits for is restarting at its next epoch: wait for it, not for no one
            if stop.wait(WAIT_SECS):
                return None
            continue
        newest = max(epochs, key=lambda e: e.counter, default=own)
        chosen = newest if newest.counter >= own.counter else own
        if index < chosen.workers:
            if chosen != own:
                log.warning(
                    "worker %d: started for epoch %s, its peers route by %s: taking theirs",
                    index,
                    own,
                    chosen,
                )
            return chosen
        log.log(
            logging.DEBUG if waited else logging.INFO,
            "worker %d: the mesh runs %d worker(s) (epoch %s); waiting to be included",
            index,
            chosen.workers,
            chosen,
        )
        waited = True
        if stop.wait(WAIT_SECS):
            return None
