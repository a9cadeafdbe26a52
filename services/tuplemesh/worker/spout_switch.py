"""`SpoutSwitch`: whether a spout executor's loop may call ``next_tuple``, as the worker decides.

Two reasons keep a spout from emitting, and they are not the same. A *hold* lasts until the
worker's assignment epoch is confirmed: the spouts are open and active, but nothing is emitted
by an epoch its peers may refuse. A *deactivation* is a drain (a rescale, a stop): spouts stop
emitting except what their ``pending()`` input still owes, and whoever deactivated them waits
until the loop has seen it, so no next_tuple call begun before is still under way. The worker's
threads throw the switch; the executor's loop reads it on every turn.
"""

from __future__ import annotations

import threading

__all__ = ["SpoutSwitch"]


class SpoutSwitch:
    """Set from any thread; ``active`` and ``held`` are read lock-free by the loop (a stale value
    lasts one turn)."""

    def __init__(self) -> None:
        #: Cleared by `deactivate`: next_tuple only for spouts still holding accepted input.
        self.active = True
        #: Set by `hold` until `release`: next_tuple is not called at all.
        self.held = False
        #: Set by the loop once it saw ``active`` cleared (`seen_inactive`).
        self._quiet = threading.Event()
        #: The loop runs: set as it starts, cleared as it ends (`looping`).
        self._looping = False

    def hold(self) -> None:
        """Before the loop starts: do not call next_tuple (not even for accepted input) until
        `release`. A hold is not a deactivation: a drain that deactivates a held spout finds it
        quiet."""
        self.held = True

    def release(self) -> None:
        """End a `hold`: next_tuple is called from the loop's next turn on. Any thread."""
        self.held = False

    def deactivate(self) -> None:
        """Stop calling next_tuple, except on spouts whose ``pending()`` input must go out. Any
        thread."""
        self.active = False

    def looping(self, running: bool) -> None:
        """The loop starts (True) or has ended (False): a loop not running emits nothing."""
        self._looping = running

    def seen_inactive(self) -> None:
        """The loop, on a turn that found ``active`` cleared: every next_tuple call begun before
        `deactivate` has returned."""
        if not self._quiet.is_set():
            self._quiet.set()

    def wait_deactivated(self, timeout: float) -> bool:
        """After `deactivate`: wait until the loop has seen it, so every next_tuple call begun
        before it has returned and its emits are counted; True unless ``timeout`` passed first
        (a next_tuple that blocks). A loop not running emits nothing: True at once."""
        if not self._looping:
            return True
        return self._quiet.wait(timeout) or not self._looping

    @property
    def quiet(self) -> bool:
        """No next_tuple call of an active spout can still be under way: the loop has seen
        `deactivate` (or its spouts finished), or it does not run. Any thread: a snapshot."""
        return self.wait_deactivated(0.0)
