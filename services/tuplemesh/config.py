"""The one validated configuration object: Storm's keys, their defaults, YAML and env loading.

Every key is documented in one place (``KEYS``: the keys below, then those each registered
feature declares in its own package; ``docs/configuration.md`` is generated from the same table
by ``tuplemesh config``). Values are checked when a ``Config`` is built, so a
bad value fails at start-up with the key and value named, never at first use.

Precedence, lowest first: defaults < YAML file < ``TUPLEMESH_*`` environment < explicit overrides.
The environment name of a key is ``TUPLEMESH_`` + the key upper-cased with ``.`` and ``-`` as ``_``
(``topology.producer.batch.size`` -> ``TUPLEMESH_TOPOLOGY_PRODUCER_BATCH_SIZE``).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, ItemsView, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tuplemesh.cpus import parse_cpu_list
from tuplemesh.errors import ConfigError
from tuplemesh.plugin_kinds import TRANSPORTS, store_class, transport_class
from tuplemesh.registry import feature_settings

__all__ = ["KEYS", "Config", "ConfigKey", "as_config", "env_name", "seconds"]

# Namespaces that belong to tuplemesh: an unknown key inside them is a typo, not user config.
_OWN_PREFIXES = (
    "topology.",
    "messaging.",
    "storm.",
    "zmq.",
    "task.",
    "worker.",
    "tuplemesh.",
    "tls.",
    "admin.",
    "metrics.",
    "mesh.",
)


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key: its type, default, meaning, and an optional extra check."""

    name: str
    type: type
    default: Any
    doc: str
    check: Callable[[Any], str | None] | None = None
    #: unit of the value as written: a time unit ("millis", "secs"; ``Config.seconds`` converts
    #: from it) or what the number counts ("bytes", "batches", ...); empty for flags and names
    unit: str = ""
    #: the command-line flag that sets this key (``--workers``); its ``TUPLEMESH_<FLAG>`` env var too
    flag: str = ""
    #: how the value may appear in errors and ``repr`` (secrets: never as written); None: as is
    shown: Callable[[Any], str] | None = None

    def show(self, value: Any) -> Any:
        return value if self.shown is None else self.shown(value)


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be > 0"


def _non_negative(value: Any) -> str | None:
    return None if value >= 0 else "must be >= 0"


def _cpu_list(value: Any) -> str | None:
    if not value:
        return None
    try:
        parse_cpu_list(value)
    except ValueError as exc:
        return str(exc)
    return None


def _power_of_two(value: Any) -> str | None:
    if value < 1 or value & (value - 1):
        return "must be a power of two >= 1 (ring buffers index by mask)"
    return None


def _resolves(build: Callable[[str], Any]) -> Callable[[Any], str | None]:
    """A check that builds the plugin ``value`` names, so a bad name fails at load, not in a worker."""

    def check(value: Any) -> str | None:
        from tuplemesh.errors import TuplemeshError

        try:
            build(value)
        except TuplemeshError as exc:
            return f"does not resolve: {exc}"
        return None

    return check


def _hidden(value: Any) -> str:
    return "***" if value else ""


#: Words in a key name that mark it as holding a secret (also misspelt: "tokn", "passwd", "pwd").
_SECRET_LOOKING = re.compile(r"tok|pass|pwd|secret|cred|auth|key", re.IGNORECASE)


def _shown_unknown(name: str, value: Any) -> Any:
    """An unknown key's value as an error may show it: ``***`` when its name looks like a secret's
    (a misspelt ``admin.tokn`` must not echo the token it was meant to hold)."""
    last = name.rsplit(".", 1)[-1]
    return "***" if _SECRET_LOOKING.search(last) else value


def _redis_url(url: Any) -> str | None:
    from tuplemesh.redis_address import RedisAddress

    try:
        RedisAddress.parse(url)
    except ValueError as exc:
        return str(exc)
    return None


def _redis_url_shown(url: Any) -> str:
    from tuplemesh.redis_address import RedisAddress

    return RedisAddress.without_credentials(url)


def _wait_strategy(name: str) -> Any:
    from tuplemesh.disruptor import make_wait_strategy

    return make_wait_strategy(name)


def _serializer(name: str) -> Any:
    from tuplemesh.serialization import load_serializer

    return load_serializer(name)


_CORE_KEYS: dict[str, ConfigKey] = {
    k.name: k
    for k in [
        ConfigKey(
            "topology.workers",
            int,
            1,
            "Number of worker processes (or in-process workers in local mode).",
            _positive,
            flag="workers",
            unit="workers",
        ),
        ConfigKey(
            "topology.executor.receive.buffer.size",
            int,
            1024,
            "Slots in each executor's inbox ring; each slot holds one batch of tuples.",
            _power_of_two,
            unit="batches",
        ),
        ConfigKey(
            "topology.backpressure.enable",
            bool,
            True,
            "Per-task backpressure: a receiver reports tasks whose inbox is above the watermark on "
            "its Transfer acks, and only the executors sending to those tasks wait (every transport). "
            "False: a full inbox blocks the receive thread, holding up every task fed over that "
            "connection, and workers that send to each other (word count with spouts on every "
            "worker) can block one another for good; each worker warns of it as it starts.",
        ),
        ConfigKey(
            "topology.backpressure.watermark",
            float,
            0.5,
            "Fraction of an inbox's slots in use (of the slots its queue time allows) above which "
            "its tasks are reported congested.",
            lambda v: None if 0.0 < v < 1.0 else "must be between 0 and 1 (exclusive)",
            unit="fraction",
        ),
        ConfigKey(
            "topology.backpressure.target.ms",
            int,
            10,
            "The time a batch may wait in an executor's inbox or in the transfer ring: each ring's "
            "consumer measures its time per batch and lets producers fill only the slots it drains "
            "in this time, so spouts are held back after this much queue, not when the ring is "
            "full. 0: rings fill all their slots.",
            lambda v: None if v >= 0 else "must be 0 or more",
            unit="millis",
        ),
        ConfigKey(
            "topology.disable.loadaware.messaging",
            bool,
            False,
            "False (as Storm 2): shuffle grouping (and none, and local-or-shuffle among its local "
            "tasks) sends to the target tasks that can take more now, leaving out one that is "
            "congested (its inbox above topology.backpressure.watermark: in this worker, or in "
            "another that reports it, with backpressure on) until it has room, so a slow task does "
            "not hold its emitters at its rate; below saturation the spread is even. True: every "
            "target task in turn, whatever its load.",
        ),
        ConfigKey(
            "topology.acker.executors",
            int,
            0,
            "Acker executors for guaranteed processing (Storm's acker). 0 turns acking off: spout "
            "message ids are acked at once and nothing is tracked or replayed, at no cost.",
            _non_negative,
            unit="executors",
        ),
        ConfigKey(
            "topology.tick.tuple.freq.secs",
            float,
            0.0,
            "Every bolt task gets a tick tuple (stream __tick, Tuple.is_tick()) this often; 0: no ticks. "
            "A component may set its own (TopologyBuilder: .tick_every(secs)). At most one tick waits "
            "in a task's inbox at a time.",
            _non_negative,
            unit="secs",
        ),
        ConfigKey(
            "topology.message.timeout.secs",
            float,
            30.0,
            "With acking on, a spout tuple whose tree is not fully acked within this time is failed "
            "(and replayed by a spout that re-emits on fail).",
            _positive,
            unit="secs",
        ),
        ConfigKey(
            "topology.max.spout.pending",
            int,
            10000,
            "With acking on, most tuple trees a spout task may have open; next_tuple is not called "
            "while it has this many. 0 means no limit (open trees then grow with rate x latency).",
            _non_negative,
            unit="tuple trees",
        ),
        ConfigKey(
            "topology.executor.send.buffer.size",
            int,
            1024,
            "Most tuples an executor holds in its emit buffers (all destinations) before flushing them all.",
            _positive,
            unit="tuples",
        ),
        ConfigKey(
            "topology.transfer.buffer.size",
            int,
            1024,
            "Slots in the worker's transfer queue ring; each slot holds one batch bound for another worker.",
            _power_of_two,
            unit="batches",
        ),
        ConfigKey(
            "topology.receive.max.bytes",
            int,
            128 * 1024 * 1024,
            "Ceiling on the payload bytes a worker holds for its executors: received from other "
            "workers and not yet taken, in every inbox and overflow together. A batch that would go "
            "past it waits (the transport stops reading, so its sender waits too); nothing is "
            "dropped. A batch is always taken when nothing is held, so no single batch can stall. "
            "0: no ceiling (slots alone bound the inboxes).",
            _non_negative,
            unit="bytes",
        ),
        ConfigKey(
            "topology.transfer.max.bytes",
            int,
            128 * 1024 * 1024,
            "Ceiling on the serialized bytes a worker holds for other workers until they "
            "acknowledge them: queued by its executors, merged by its transfer thread, and in "
            "every connection's send window (each window also has its own bound, "
            "messaging.window.bytes). An executor whose batch would go past it waits; nothing is "
            "dropped. A batch is always queued when nothing is held. Since it also bounds what is "
            "in flight, a value below what the links carry in a round trip limits throughput "
            "between workers. 0: no ceiling (slots and each window's own bounds alone).",
            _non_negative,
            unit="bytes",
        ),
        ConfigKey(
            "topology.receiver.buffer.size",
            int,
            8,
            "Batches a transport holds for a receiving worker before its senders block.",
            _positive,
            unit="batches",
        ),
        ConfigKey(
            "topology.producer.batch.size",
            int,
            100,
            "Tuples an executor buffers per destination before it publishes them as one batch.",
            _positive,
            unit="tuples",
        ),
        ConfigKey(
            "topology.transfer.batch.size",
            int,
            10000,
            "Most tuples in one batch handed to the transport for one peer worker. The transfer "
            "thread merges what is queued for a peer up to this, so it costs no latency when the "
            "mesh is idle; under load, larger batches mean fewer stream messages, and each message "
            "costs thread hand-overs (word count on 2 workers: 1.9x the rate of 1000).",
            _positive,
            unit="tuples",
        ),
        ConfigKey(
            "topology.batch.flush.interval.millis",
            float,
            1.0,
            "Longest time an emitted tuple waits in a partial batch before it is flushed.",
            _positive,
            unit="millis",
        ),
        ConfigKey(
            "topology.disruptor.wait.strategy",
            str,
            "blocking",
            "How executor and transfer threads wait on an empty ring: blocking, sleeping, yielding, "
            "busy-spin, timeout-blocking.",
            _resolves(_wait_strategy),
        ),
        ConfigKey(
            "topology.disruptor.wait.yields",
            int,
            5,
            "Most times a bolt executor or the transfer thread that finds its ring empty gives the "
            "interpreter lock away before it parks (the blocking strategies). It yields only while "
            "its ring is busy: after a wait whose yields saw nothing come it parks at once, until "
            "a batch is already there when it looks. 0 always parks at once.",
            _non_negative,
            unit="yields",
        ),
        ConfigKey(
            "topology.disruptor.wait.timeout.millis",
            float,
            1000.0,
            "Timeout of the timeout-blocking wait strategy.",
            _positive,
            unit="millis",
        ),
        ConfigKey(
            "topology.sleep.spout.wait.strategy.time.ms",
            float,
            1.0,
            "How long a spout executor sleeps when next_tuple emitted nothing.",
            _non_negative,
            unit="millis",
        ),
        ConfigKey(
            "topology.tuple.serializer",
            str,
            "msgpack",
            "Serializer for tuples that cross workers: msgpack, json, or 'module:attr'.",
            _resolves(_serializer),
        ),
        ConfigKey(
            "messaging.transport",
            str,
            "grpc",
            f"Transport plugin between workers: {', '.join(TRANSPORTS)}, or 'module:attr'.",
            _resolves(transport_class),
            flag="transport",
        ),
        ConfigKey(
            "worker.index",
            int,
            0,
            "This worker's index (the StatefulSet ordinal); set by `tuplemesh worker --index`.",
            _non_negative,
            flag="index",
        ),
        ConfigKey(
            "worker.cpus",
            str,
            "",
            "CPUs this worker process runs on, as a Linux CPU list (0, 2-3, 0,2-3; in YAML quote a "
            "single CPU: '3'), every thread of it, from its start. Empty: wherever the OS "
            "schedules it. Workers on one host that "
            "share cores hand batches on late and run slower; `tuplemesh run` gives each of its "
            "workers a share when there are at least as many CPUs as workers and this is not set "
            "(--no-pin-cpus: never). On Kubernetes, a Guaranteed pod with whole CPUs under the "
            "static CPU manager policy gets cores of its own without this.",
            _cpu_list,
            flag="cpus",
        ),
        ConfigKey(
            "topology.errors.tolerated",
            int,
            0,
            "Exceptions raised by user code (bolts and spouts, every method) that `tuplemesh run` "
            "tolerates: one more fails the run (exit 1, naming the first exception). 0: any "
            "exception fails it. A raising prepare() or open() fails the run at once, whatever this says.",
            _non_negative,
            unit="exceptions",
        ),
        ConfigKey(
            "topology.epoch",
            int,
            0,
            "Counter of the assignment epoch the worker starts at; every rescale raises it "
            "(`tuplemesh rebalance` moves the workers to the next one).",
            _non_negative,
            flag="epoch",
            unit="rescales",
        ),
        ConfigKey(
            "worker.bind.host",
            str,
            "127.0.0.1",
            "Address the worker's port binds (0.0.0.0 in a pod; the chart sets it).",
            lambda v: None if v.strip() else "must not be empty",
        ),
        ConfigKey(
            "messaging.max.message.bytes",
            int,
            16 * 1024 * 1024,
            "Largest serialized tuple a transport carries; a larger emit raises MessageTooLargeError.",
            _positive,
            unit="bytes",
        ),
        ConfigKey(
            "messaging.keepalive.millis",
            int,
            10000,
            "gRPC keepalive ping period between workers; a peer silent for two periods is taken as "
            "gone and the stream reconnects (and resends). 0 turns pings off.",
            _non_negative,
            unit="millis",
        ),
        ConfigKey(
            "messaging.window.batches",
            int,
            32,
            "Unacknowledged batches a gRPC sender may have in flight per peer before send() blocks.",
            _positive,
            unit="batches",
        ),
        ConfigKey(
            "messaging.window.bytes",
            int,
            64 * 1024 * 1024,
            "Unacknowledged bytes a gRPC sender may have in flight per peer before send() blocks.",
            _positive,
            unit="bytes",
        ),
        ConfigKey(
            "messaging.window.target.ms",
            int,
            30,
            "Queueing a sender's unacknowledged tuples to one peer may add: the window is sized "
            "to the throughput its acknowledgements show, in tuples and in bytes, times the round "
            "trip plus this (never below 1024 tuples or 1 MiB), within messaging.window.batches "
            "and messaging.window.bytes. "
            "Lower: less latency under load, less throughput. 0: slots and bytes only.",
            _non_negative,
            unit="millis",
        ),
        ConfigKey(
            "messaging.coalesce.ms",
            float,
            2.0,
            "While a link is busy, a gRPC sender writes at most one stream message to a peer per "
            "this many milliseconds; the batches that come meanwhile join the one waiting, up to "
            "10,000 tuples or messaging.max.message.bytes. The first message after a quiet spell "
            "goes at once. A receiver reads fewer, larger messages: at moderate rates a tuple "
            "waits up to this long instead of queueing behind messages. 0: a message per batch.",
            _non_negative,
            unit="millis",
        ),
        ConfigKey(
            "messaging.grpc.sender",
            str,
            "auto",
            "How a worker's gRPC streams to its peers run: 'threads' (three threads per peer, gRPC's "
            "synchronous API: the least CPU per message), 'event-loop' (every peer's stream on one "
            "asyncio thread, grpc.aio: idle links cost next to nothing, so many workers fit on one "
            "host), or 'auto': threads up to 16 workers, the event loop above.",
            lambda v: (
                None
                if v in ("auto", "threads", "event-loop")
                else "must be 'auto', 'threads' or 'event-loop'"
            ),
        ),
        ConfigKey(
            "messaging.grpc.server.threads",
            int,
            32,
            "Threads of a worker's gRPC server at least (one per open stream or running call); it "
            "gets more when the server.* admission limits add up to more.",
            _positive,
            unit="threads",
        ),
        ConfigKey(
            "messaging.grpc.receive.window.bytes",
            int,
            1024 * 1024,
            "HTTP/2 flow-control window a worker's gRPC server grants each stream: the bytes a "
            "client may send ahead of what the worker has read. Fixed (gRPC's automatic window "
            "growth is off): grown automatically, it let a peer that ignores the worker's grants "
            "park hundreds of MiB in the transport's buffers, outside topology.receive.max.bytes. "
            "It bounds every stream into the worker: peers' Transfer and clients' Gateway Publish "
            "alike, which carry at most about this many bytes per round trip: raise it for links "
            "with a long round trip (1 MiB per millisecond is 1 GiB/s).",
            lambda v: None if 65535 <= v <= 2**31 - 1 else "must be between 65535 and 2147483647",
            unit="bytes",
        ),
        ConfigKey(
            "server.peer.streams.max",
            int,
            256,
            "Transfer streams from other workers a worker serves at once (one per peer and topology); "
            "more are refused with RESOURCE_EXHAUSTED. At least the mesh's workers minus one.",
            _positive,
            unit="streams",
        ),
        ConfigKey(
            "server.health.streams.max",
            int,
            16,
            "Health Watch and reflection streams a worker serves at once; health checks (unary) "
            "have a reserve of their own and are answered however many are open.",
            _positive,
            unit="streams",
        ),
        ConfigKey(
            "server.client.calls.max",
            int,
            64,
            "Client calls (Admin, Gateway and the features' own services; streams included) a "
            "worker runs at once; more are refused with RESOURCE_EXHAUSTED.",
            _positive,
            unit="calls",
        ),
        ConfigKey(
            "server.client.calls.per.peer.max",
            int,
            32,
            "Client calls (Admin, Gateway and the features' own services) one client address may "
            "have running at once.",
            _positive,
            unit="calls",
        ),
        ConfigKey(
            "server.stream.idle.timeout.ms",
            int,
            60_000,
            "A Transfer stream that carries no message for this long is ended (DEADLINE_EXCEEDED; the "
            "peer reconnects). Well above the senders' ack probes and keepalive pings. 0: never.",
            _non_negative,
            unit="millis",
        ),
        ConfigKey(
            "gateway.fetch.max.bytes",
            int,
            8 * 1024 * 1024,
            "Default byte budget of a Gateway Fetch answer (a request's max_bytes may ask for less or "
            "more); never above messaging.max.message.bytes. At least one record is always returned.",
            _positive,
            unit="bytes",
        ),
        ConfigKey(
            "messaging.close.timeout.secs",
            float,
            10.0,
            "How long closing a connection waits for its unacknowledged batches to be acknowledged.",
            _non_negative,
            unit="secs",
        ),
        ConfigKey(
            "storm.messaging.netty.min_wait_ms",
            int,
            100,
            "First reconnect backoff to a peer (doubles up to max_wait_ms; never gives up).",
            _positive,
            unit="millis",
        ),
        ConfigKey(
            "storm.messaging.netty.max_wait_ms",
            int,
            1000,
            "Longest reconnect backoff to a peer.",
            _positive,
            unit="millis",
        ),
        ConfigKey(
            "tls.enabled", bool, False, "Serve and dial the worker port with mTLS (certificates below)."
        ),
        ConfigKey(
            "tls.cert.file",
            str,
            "",
            "PEM certificate of this worker (server and client), signed by the mesh CA.",
        ),
        ConfigKey("tls.key.file", str, "", "PEM private key of tls.cert.file."),
        ConfigKey(
            "tls.ca.file", str, "", "PEM of the mesh CA: the only issuer whose certificates are accepted."
        ),
        ConfigKey(
            "tls.server.name",
            str,
            "",
            "Name to verify in peers' certificates instead of the address dialled (empty: the address).",
        ),
        ConfigKey(
            "admin.token",
            str,
            "",
            "Bearer token required by every call but Transfer, health and reflection: Admin, "
            "Gateway and the features' own services (empty: none).",
            shown=_hidden,
        ),
        ConfigKey(
            "mesh.secret.file",
            str,
            "",
            "File holding the mesh secret (as mounted from a Kubernetes Secret): every Transfer "
            "stream must prove it with a fresh HMAC naming its sender, its receiver, a timestamp "
            "and a nonce, taken once, or it is refused UNAUTHENTICATED. Set the same secret on "
            "every worker of the mesh. Empty: see mesh.secret.",
        ),
        ConfigKey(
            "mesh.secret.max.skew.secs",
            float,
            300.0,
            "How far a proof's timestamp may be from the receiving worker's clock, either way (the "
            "pods' clocks differ by this much at most). Older proofs are refused as stale; each "
            "proof's nonce is remembered this long, so the same proof is refused as replayed.",
            _positive,
            unit="secs",
        ),
        ConfigKey(
            "mesh.secret.replay.cache.entries",
            int,
            65_536,
            "Nonces of taken proofs each worker remembers per kind of call (Transfer streams, "
            "forwarded Rebalance calls), each until its proof's window ends. When that many are "
            "remembered, a new stream or call is refused RESOURCE_EXHAUSTED until the oldest "
            "expire (streams already open are not affected); the default takes more than 100 "
            "new streams a second for the whole default window, in about 13 MiB.",
            _positive,
            unit="nonces",
        ),
        ConfigKey(
            "mesh.secret",
            str,
            "",
            "The mesh secret itself, for where a file does not fit (prefer mesh.secret.file: "
            "environment variables leak into process listings and crash reports). Empty, with "
            "mesh.secret.file empty and tls.enabled false: any client that reaches the worker "
            "port can inject tuples (a warning says so at start).",
            shown=_hidden,
        ),
        ConfigKey("admin.emit.enabled", bool, False, "Allow Admin.Emit (tuple injection); off by default."),
        ConfigKey(
            "admin.drain.enabled", bool, False, "Allow Admin.Drain; off by default (SIGTERM always drains)."
        ),
        ConfigKey(
            "admin.rebalance.enabled",
            bool,
            False,
            "Allow Admin.Rebalance (live rescale, `tuplemesh rebalance`); off by default. Every "
            "worker of the mesh needs it: the worker called asks each peer to switch too.",
        ),
        ConfigKey(
            "admin.watch.tuples.enabled",
            bool,
            False,
            "Allow Admin.WatchTuples (sampled tuple values); off by default: values are user data.",
        ),
        ConfigKey(
            "worker.peer.grace.secs",
            float,
            5.0,
            "A serving worker turns NOT_SERVING (readiness) once a peer it sends to has been "
            "unreachable this long, and SERVING again when the peer is back.",
            _positive,
            unit="secs",
        ),
        ConfigKey(
            "worker.epoch.confirm.secs",
            float,
            5.0,
            "A worker that starts while no peer answers (a new mesh starting, or peers between "
            "two epochs of a rescale) holds its spouts until a peer says which assignment epoch "
            "the mesh routes by, or this long: at a newer one it follows first, so nothing is "
            "sent by an epoch its peers refuse.",
            _positive,
            unit="secs",
        ),
        ConfigKey(
            "metrics.enabled",
            bool,
            True,
            "Collect per-batch histograms and serve /metrics (counters are always kept: Admin uses them).",
        ),
        ConfigKey(
            "metrics.port",
            int,
            9100,
            "Port of the worker's Prometheus /metrics endpoint; 0 turns it off. Unless set, it "
            "follows the worker's own port: --port + 2400 (9100 for 6700, 9101 for 6701, ...), so "
            "workers on one host never collide.",
            lambda v: None if 0 <= v <= 65535 else "must be a port in 0..65535 (0: off)",
        ),
        ConfigKey(
            "metrics.bind.host",
            str,
            "127.0.0.1",
            "Address /metrics binds (0.0.0.0 in a pod; the chart sets it).",
            lambda v: None if v.strip() else "must not be empty",
        ),
        ConfigKey(
            "ui.enabled",
            bool,
            True,
            "Serve the web UI under /ui/ on the metrics port (metrics.port; needs metrics.enabled). "
            "It is as exposed as /metrics: with admin.token set it asks for the token.",
        ),
        ConfigKey(
            "ui.events.clients",
            int,
            8,
            "Most browsers following the web UI's live updates at once; more get 503 and retry.",
            _positive,
            unit="clients",
        ),
        ConfigKey(
            "ui.events.timeout.secs",
            float,
            300.0,
            "The web UI's event stream ends after this long (the browser reconnects at once), "
            "so a forgotten tab frees its slot.",
            _positive,
            unit="secs",
        ),
        ConfigKey(
            "zmq.threads",
            int,
            1,
            "I/O threads of the zmq transport's context (Storm's key).",
            _positive,
            unit="threads",
        ),
        ConfigKey(
            "zmq.hwm",
            int,
            32,
            "High-water mark of zmq sockets, in batches; when reached, the batch waits in the sender's "
            "window (Storm's key; Storm dropped there, tuplemesh blocks).",
            _positive,
            unit="batches",
        ),
        ConfigKey(
            "zmq.linger.millis",
            int,
            5000,
            "How long a closing zmq socket may linger (Storm's key).",
            _non_negative,
            unit="millis",
        ),
        ConfigKey(
            "zmq.port.offset",
            int,
            100,
            "The zmq data port is the worker port plus this (the worker port keeps gRPC Admin/health).",
            lambda v: None if 1 <= v <= 10_000 else "must be in 1..10000",
            unit="ports",
        ),
        ConfigKey(
            "task.refresh.poll.secs",
            float,
            10.0,
            "How often a worker re-applies discovery's view of its peers, besides on every change "
            "(Storm's key).",
            _positive,
            unit="secs",
        ),
        ConfigKey(
            "topology.shutdown.timeout.secs",
            float,
            30.0,
            "How long a worker waits for its threads to drain and stop.",
            _positive,
            unit="secs",
        ),
        ConfigKey(
            "tuplemesh.log.rate.limit.secs",
            float,
            10.0,
            "Minimum seconds between two log lines of a per-tuple warning (others are counted).",
            _non_negative,
            unit="secs",
        ),
        # The redis state backend (topology.state.backend: redis).
        ConfigKey(
            "topology.state.redis.url",
            str,
            "redis://127.0.0.1:6379/0",
            "Redis server of the redis state backend: redis://host:port/db (rediss:// for TLS). "
            "A password written here works, but topology.state.redis.password keeps it out of the URL.",
            _redis_url,
            shown=_redis_url_shown,
        ),
        ConfigKey(
            "topology.state.redis.password",
            str,
            "",
            "Password (AUTH) of the redis state backend; empty: none. Set it from a Secret through "
            "the environment; it is never logged or shown in errors.",
            shown=_hidden,
        ),
        ConfigKey(
            "topology.state.redis.timeout.ms",
            float,
            2000.0,
            "Longest wait of the redis state backend for a connection, a reply, or sending one "
            "task's part (allow part size / bandwidth); past it the call fails as 'store "
            "unavailable' (checkpointing pauses, processing goes on).",
            _positive,
            unit="millis",
        ),
        ConfigKey(
            "worker.gc.threshold",
            int,
            50_000,
            "Generation-0 threshold of the garbage collector in worker processes (Python's default is 700; "
            "every in-flight tuple is a tracked container, so a low threshold spends most of the run "
            "collecting). 0 leaves the interpreter's settings alone.",
            _non_negative,
            unit="objects",
        ),
        ConfigKey(
            "worker.gil.switch.interval.ms",
            float,
            2.0,
            "How long a thread of a worker process may hold the GIL while another waits for it "
            "(sys.setswitchinterval; Python's own default is 5 ms). Shorter cuts the cross-worker "
            "latency at full load, longer costs it: at 2 ms against 5 ms the const -> null p99 was "
            "88 against 101 ms at the same rate and word count ran at 1.00x; at 1 ms the p99 fell "
            "to 62 ms, but word count ran at 0.79-0.88x. 0 leaves the interpreter's setting.",
            _non_negative,
            unit="millis",
        ),
        # -- state and checkpoints (tuplemesh.state) ------------------------------------------------
        ConfigKey(
            "topology.state.backend",
            str,
            "auto",
            "Where stateful topologies keep their checkpoints: sqlite (one file shared by the "
            "workers of one machine), redis, memory (one process only), or module:attr. auto is "
            "memory with the local transport and sqlite otherwise.",
            _resolves(store_class),
        ),
        ConfigKey(
            "topology.state.checkpoint.interval.ms",
            int,
            1000,
            "A checkpoint of every task's state and every spout's position is started this long "
            "after the previous one ended (topologies with a StatefulBolt only).",
            _positive,
            unit="millis",
        ),
        ConfigKey(
            "topology.state.checkpoint.timeout.ms",
            int,
            60_000,
            "A checkpoint not stored by every task within this time is abandoned (never restored).",
            _positive,
            unit="millis",
        ),
        ConfigKey(
            "topology.state.alignment.buffer.size",
            int,
            100_000,
            "Tuples a bolt task may hold back while it waits for a checkpoint's barriers from its "
            "other inputs; past it the task gives that checkpoint up and processes on.",
            _positive,
            unit="tuples",
        ),
        ConfigKey(
            "topology.state.sqlite.path",
            str,
            "",
            "The sqlite backend's file, shared by the workers of one machine. Empty: a worker "
            "keeps $XDG_STATE_HOME/tuplemesh/state.sqlite (~/.local/state/tuplemesh/state.sqlite) "
            "and resumes from it when restarted; tuplemesh run uses a fresh file per run, removed "
            "at its end.",
        ),
    ]
}


def env_name(key: str) -> str:
    """Environment variable that sets ``key``."""
    return "TUPLEMESH_" + key.upper().replace(".", "_").replace("-", "_")


@dataclass(frozen=True)
class _Merged:
    """The merged table and what is derived from it once: environment variable -> key, and
    command-line flag -> key."""

    keys: dict[str, ConfigKey]
    env: dict[str, str]
    flags: dict[str, str]


class _KeyTable(Mapping[str, ConfigKey]):
    """Every configuration key: tuplemesh's own (``_CORE_KEYS``), then those the registered
    features declare (each `tuplemesh.registry.FeatureLine`'s ``settings``, in the registry's
    order), merged the first time
    the table is read. A feature's key is refused when it repeats a key (or its environment
    variable), or lies outside tuplemesh's namespaces; a refused table stays unmerged, so every
    read raises the same error. Read-only once merged.

    The merge imports the features' settings modules (never their running code), outside any
    lock of this table (two threads that read first may both merge; the first to finish
    publishes), so an import it waits for can never wait on the table in turn; a settings module
    that reads the table while it is imported for the merge is refused, naming why."""

    def __init__(self, core: Mapping[str, ConfigKey], features: Sequence[str] | None = None) -> None:
        self._core = dict(core)
        self._features = features  # settings names ("module:attribute"); None: the registry's
        self._merged: _Merged | None = None
        self._merging = threading.local()  # set on the thread merging, while it merges
        self._lock = threading.Lock()  # publishes the first merge

    def merged(self) -> _Merged:
        merged = self._merged
        return merged if merged is not None else self._merge()

    def _merge(self) -> _Merged:
        if getattr(self._merging, "on", False):
            # a feature module (or one it imports) read the table while being imported
            raise RuntimeError(
                "configuration keys read while the features that declare some are imported: "
                "a feature's modules must not read configuration at import time"
            )
        self._merging.on = True
        try:
            declared = feature_settings(self._features)
        finally:
            self._merging.on = False
        table = dict(self._core)
        env = {env_name(name): name for name in table}
        for line, settings in declared:
            for key in settings:
                if not isinstance(key, ConfigKey):
                    raise TypeError(
                        f"feature settings {line!r} declare a {type(key).__name__}, not a ConfigKey"
                    )
                if key.name in table or env_name(key.name) in env:
                    raise ValueError(
                        f"feature settings {line!r} declare {key.name}, already a configuration key (or its "
                        f"environment variable {env_name(key.name)})"
                    )
                if not key.name.startswith(_OWN_PREFIXES):
                    raise ValueError(
                        f"feature settings {line!r} declare {key.name}, outside tuplemesh's namespaces "
                        f"({', '.join(p.rstrip('.') for p in _OWN_PREFIXES)})"
                    )
                if key.flag and key.flag in {k.flag for k in table.values()}:
                    raise ValueError(
                        f"feature settings {line!r} declare {key.name} with flag --{key.flag}, already taken"
                    )
                table[key.name] = key
                env[env_name(key.name)] = key.name
        flags = {key.flag: name for name, key in table.items() if key.flag}
        # a flag's own variable (TUPLEMESH_WORKERS) is the same level as the key's: the key's
        # name wins a tie
        env = {**{env_name(flag): name for flag, name in flags.items()}, **env}
        with self._lock:
            if self._merged is None:
                self._merged = _Merged(table, env, flags)
            return self._merged

    def __getitem__(self, name: str) -> ConfigKey:
        return self.merged().keys[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.merged().keys)

    def __len__(self) -> int:
        return len(self.merged().keys)

    def __contains__(self, name: object) -> bool:
        return name in self.merged().keys

    def get(self, name: str, default: Any = None) -> Any:
        return self.merged().keys.get(name, default)

    def items(self) -> ItemsView[str, ConfigKey]:
        return self.merged().keys.items()

    def values(self) -> ValuesView[ConfigKey]:
        return self.merged().keys.values()


# Every key (see `_KeyTable`): ``tuplemesh config`` and docs/configuration.md list these.
_TABLE = _KeyTable(_CORE_KEYS)
KEYS: Mapping[str, ConfigKey] = _TABLE


# Divisors, not factors: ``250 / 1000.0`` is the exact float the modules computed before.
_PER_SECOND = {"millis": 1000.0, "secs": 1.0}


def _coerce(key: ConfigKey, value: Any, from_text: bool) -> Any:
    """Convert ``value`` to the key's type; text (env vars) is parsed, YAML values must match."""
    if key.type is bool:
        if isinstance(value, bool):
            return value
        if from_text and isinstance(value, str):
            lowered = value.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
        raise ConfigError(key.name, value, "must be a boolean (true/false)")
    if key.type is int:
        if isinstance(value, bool):
            raise ConfigError(key.name, value, "must be an integer")
        if isinstance(value, int):
            return value
        if from_text and isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ConfigError(key.name, value, "must be an integer")
    if key.type is float:
        if isinstance(value, bool):
            raise ConfigError(key.name, value, "must be a number")
        if isinstance(value, int | float):
            return float(value)
        if from_text and isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ConfigError(key.name, value, "must be a number")
    if not isinstance(value, str):
        raise ConfigError(key.name, value, "must be a string")
    return value


class Config(Mapping[str, Any]):
    """Immutable, validated configuration. Thread-safe (read-only after construction)."""

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        *,
        _from_text: frozenset[str] = frozenset(),
        _sources: Mapping[str, str] | None = None,
        _given: frozenset[str] | None = None,
    ):
        sources = _sources or {}
        self._given = frozenset(values or {}) if _given is None else _given
        table = _TABLE.merged().keys
        merged: dict[str, Any] = {name: key.default for name, key in table.items()}
        for name, value in (values or {}).items():
            if not isinstance(name, str):
                raise ConfigError(str(name), value, "config keys must be strings")
            source = sources.get(name, "")
            key = table.get(name)
            if key is None:
                if name.startswith(_OWN_PREFIXES):
                    raise ConfigError(
                        name,
                        _shown_unknown(name, value),
                        "unknown key (see `tuplemesh config` for the known ones)",
                        source,
                    )
                merged[name] = value  # user keys for components pass through untouched
                continue
            try:
                typed = _coerce(key, value, name in _from_text)
            except ConfigError as exc:
                raise ConfigError(name, key.show(value), exc.reason, source) from None
            problem = None if key.check is None else key.check(typed)
            if problem:
                # the value as the user wrote it ('-3' from an env var), so they can find it
                raise ConfigError(name, key.show(value), problem, source)
            merged[name] = typed
        self._values = merged

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        overrides: Mapping[str, Any] | None = None,
        flags: Mapping[str, str] | None = None,
    ) -> Config:
        """Defaults, then the YAML file at ``path``, then ``TUPLEMESH_*`` env vars, then ``flags``
        (flag name -> the text given on the command line), then ``overrides``.

        A bad value raises ConfigError naming the key, the value, what is allowed and where the
        value was set (the file, the env var or the flag)."""
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        if path is not None:
            for name, value in _read_yaml(Path(path)).items():
                values[name] = value
                sources[name] = str(path)
        from_text: set[str] = set()
        environ = os.environ if env is None else env
        for var, key in _TABLE.merged().env.items():
            if var in environ:
                values[key] = environ[var]
                sources[key] = var
                from_text.add(key)
        flag_keys = _TABLE.merged().flags
        for flag, text in (flags or {}).items():
            if flag not in flag_keys:
                raise KeyError(f"--{flag} sets no config key")
            values[flag_keys[flag]] = text
            sources[flag_keys[flag]] = f"--{flag}"
            from_text.add(flag_keys[flag])
        for name, value in (overrides or {}).items():
            values[name] = value
            sources.pop(name, None)
            from_text.discard(name)
        return cls(values, _from_text=frozenset(from_text), _sources=sources)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        """A new Config with ``overrides`` applied (validated)."""
        return Config({**self._values, **overrides}, _given=self._given | frozenset(overrides))

    def with_topology(self, topology_conf: Mapping[str, Any]) -> Config:
        """The conf a topology runs with: its own conf (``Topology.conf``) over this one's file,
        environment and flags, as Storm's topology conf wins over the cluster's. Every place that
        starts or inspects a topology (worker processes, a joining worker, local runs, the
        launcher, the CLI) goes through here, so that rule is written once."""
        return self.with_overrides(topology_conf) if topology_conf else self

    def given(self, key: str) -> bool:
        """True when ``key`` was set (by the file, the environment, a flag or in code), False
        when it holds its default."""
        return key in self._given

    def seconds(self, key: str) -> float:
        """The value of a time key in seconds, whatever unit its row declares (millis or secs)."""
        return seconds(self, key)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        changed = {
            k: v if k not in KEYS else KEYS[k].show(v)
            for k, v in self._values.items()
            if k not in KEYS or KEYS[k].default != v
        }
        return f"Config({changed!r})"


def seconds(conf: Mapping[str, Any], key: str) -> float:
    """The value of time ``key`` in ``conf`` in seconds, converted by the unit its row declares.

    What `Config.seconds` does, for any mapping holding the key; the settings views call that."""
    row = KEYS.get(key)
    if row is None or row.unit not in _PER_SECOND:
        raise KeyError(f"{key} is not a time key (declared in millis or secs)")
    return float(conf[key]) / _PER_SECOND[row.unit]


def as_config(conf: Mapping[str, Any]) -> Config:
    """``conf`` itself when it is a Config, else a Config validated from it (components may be
    handed a plain mapping, as Storm's ``prepare(conf)`` is in tests)."""
    return conf if isinstance(conf, Config) else Config(conf)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("config file", str(path), f"cannot be read: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        # one line: the CLI prints config errors as a single line
        raise ConfigError(
            "config file", str(path), f"is not valid YAML: {' '.join(str(exc).split())}"
        ) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("config file", str(path), "must hold a mapping of key: value")
    return data


def describe_keys() -> str:
    """Markdown table of every key, its default, unit and meaning (source of docs/configuration.md)."""
    lines = ["| key | env var | default | unit | meaning |", "|---|---|---|---|---|"]
    for key in KEYS.values():
        env = f"`{env_name(key.name)}`"
        if key.flag:
            env += f", `{env_name(key.flag)}`, flag `--{key.flag}`"
        unit = key.unit or "-"
        lines.append(f"| `{key.name}` | {env} | `{key.default!r}` | {unit} | {key.doc} |")
    return "\n".join(lines) + "\n"
