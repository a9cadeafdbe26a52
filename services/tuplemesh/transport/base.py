"""The transport plugin API: Storm's IContext/IConnection with the two roles split.

The queue layer knows no transport and the transport knows no queues: they meet at
``Connection.send(batch)`` on the sending side and the ``on_batch(batch)`` callback on the receiving
side. A batch is a list of TaskMessages; a TaskMessage is a plain ``(task id, payload bytes)``
tuple (no object per message on the hot path). Two task ids are special, on every transport:
``None`` is a broadcast to every executor of the receiving worker, and -1 (`SHUTDOWN_TASK`) as
the last message of a batch is the shutdown notice: the messages before it are delivered, then
the binding stops receiving (Storm's receive thread ending on ``task == -1``).

Optional abilities are declared in `Capabilities`, so the core asks a plugin instead of testing
its class; every count a plugin keeps is read through ``stats()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

# defined below the configuration, which checks that a transport plugin declares it
from tuplemesh.plugin_kinds import Capabilities
from tuplemesh.transport.stats import BindingStats, ConnectionStats

__all__ = [
    "SHUTDOWN_TASK",
    "Admission",
    "Binding",
    "Capabilities",
    "CongestedTasks",
    "Connection",
    "Context",
    "GrantedBytes",
    "HeldBytes",
    "OnBatch",
    "OnCongestion",
    "SharedServerContext",
    "TaskMessage",
    "split_shutdown",
]

#: (task id, payload). A tuple, not a class: creating millions of objects per second costs.
#: Task None is a broadcast to every executor of the receiving worker.
TaskMessage = tuple[int | None, bytes]

#: Task id of the shutdown notice (Storm's ``task == -1``).
SHUTDOWN_TASK = -1

#: Receiving side callback: called on the transport's receive thread with one batch.
#: It may block (that is backpressure); it returns the task ids it could not deliver.
OnBatch = Callable[[list[TaskMessage]], list[int]]

#: Receiving side: why a batch from sender worker ``n`` cannot be taken now (the sender keeps it
#: and resends it), or None to take it. Asked before every batch, on the receive thread.
Admission = Callable[[int], str | None]

#: Receiving side: the tasks whose inboxes are congested right now (per-task backpressure).
CongestedTasks = Callable[[], list[int]]

#: Receiving side: the unacknowledged bytes each of ``senders`` senders may have in flight to
#: it now (0: no grant): its share of the room under the receiver's ceiling on held bytes.
#: Asked for every acknowledgement, on the receive thread.
GrantedBytes = Callable[[int], int]

#: Sending side: hears (the connection, the peer's congested tasks) from every acknowledgement.
OnCongestion = Callable[[Any, list[int]], None]


class HeldBytes(Protocol):
    """Sending side: the worker's ceiling on bytes held for other workers. A connection's send
    window holds the bytes of each batch it takes (``hold``, never waiting: the batch is already
    in the worker's hands) and gives them back once the peer acknowledges it (``release``), so
    what waits in send windows counts against the same ceiling as what waits to reach them."""

    def hold(self, nbytes: int) -> None: ...

    def release(self, nbytes: int) -> None: ...


def split_shutdown(batch: list[TaskMessage]) -> tuple[list[TaskMessage], bool]:
    """(messages to deliver, whether the batch ends with the shutdown notice). Looks at the
    last message only, so an ordinary batch costs one comparison."""
    if not batch or batch[-1][0] != SHUTDOWN_TASK:
        return batch, False
    return [m for m in batch if m[0] != SHUTDOWN_TASK], True


class Connection(Protocol):
    """Client side of one peer. ``send`` may be called from one thread at a time; the rest any."""

    def send(self, batch: list[TaskMessage]) -> None:
        """Hand over a batch; blocks while the peer's window is full. Never drops."""
        ...

    def retarget(self, host: str, port: int) -> None:
        """The peer moved: send to ``host:port`` from now on, keeping (and resending) what is
        not acknowledged yet."""
        ...

    def abort(self) -> None:
        """Give up on the peer: a ``send`` blocked on a full window raises TransportError now, and
        so does every later one; ``close`` then waits for nothing. Any thread."""
        ...

    def close(self) -> None:
        """Deliver what was accepted if the peer lives, then release resources. What the peer
        never acknowledged is counted in ``stats().lost_on_close``."""
        ...

    def stats(self) -> ConnectionStats:
        """A snapshot of this connection's counts."""
        ...


class Binding(Protocol):
    """Server side of one (topology, port)."""

    def close(self) -> None:
        """Stop receiving; batches already delivered to ``on_batch`` stay delivered."""
        ...

    def admit(self, admission: Admission | None) -> None:
        """Ask ``admission`` about every batch from now on (None: take every batch). Any thread.
        A plugin whose batches carry no sender (in-process) takes every batch."""
        ...

    def stats(self) -> BindingStats:
        """A snapshot of this binding's counts."""
        ...

    def refuse(self, reason: str, where: str, detail: str) -> None:
        """Count (in ``stats().refused``, by ``reason``: one of `REFUSALS`) and log a caller
        refused as no member of the mesh elsewhere than on this binding (a forwarded Rebalance
        without the mesh's proof): one count for every membership refusal. Any thread."""
        ...


class Context(Protocol):
    """A transport plugin instance: one per worker (one shared by all workers in local mode)."""

    #: What this plugin can do beyond the protocol.
    capabilities: Capabilities

    def prepare(self, conf: Mapping[str, Any]) -> None:
        """Configure from the validated topology config; called once before bind/connect."""
        ...

    def bind(
        self,
        topology_id: str,
        port: int,
        on_batch: OnBatch,
        congestion: CongestedTasks | None = None,
        grant: GrantedBytes | None = None,
        epoch: str = "",
    ) -> Binding:
        """Receive batches for ``topology_id`` on ``port``; each is passed to ``on_batch``.
        ``congestion`` is asked for the congested tasks (used when ``reports_congestion``),
        ``grant`` for the bytes each sender may have in flight (network transports).
        ``epoch``: the assignment epoch this worker routes by (``counter/workers/code``); a
        stream or batch naming another is refused (network transports; empty: not checked)."""
        ...

    def connect(
        self,
        topology_id: str,
        host: str,
        port: int,
        on_congestion: OnCongestion | None = None,
        receiver: int = -1,
        epoch: str = "",
        held: HeldBytes | None = None,
    ) -> Connection:
        """A connection to the worker bound at ``host:port``. It need not be up yet.
        ``on_congestion`` hears the peer's congested tasks (used when ``reports_congestion``).
        ``receiver`` is that worker's index: with a mesh secret each stream's proof names it,
        and a worker takes only proofs made for it (-1, unknown: refused by a worker with one).
        ``epoch``: the assignment epoch the sender routes by, named on every stream (empty: none).
        ``held``: the worker's ceiling on outgoing bytes, which holds what the connection has
        not had acknowledged yet (a transport that keeps nothing unacknowledged ignores it)."""
        ...

    def term(self) -> None:
        """Release everything; further use is an error."""
        ...


class SharedServerContext(Context, Protocol):
    """A context with ``capabilities.shares_server``."""

    def use_server(self, server: Any) -> None:
        """Register the transfer service on ``server`` (started by its owner) instead of
        starting a server in ``bind``."""
        ...
