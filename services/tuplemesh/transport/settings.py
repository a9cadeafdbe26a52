"""`TransportSettings`: the config of the network transports, typed and in the units they use."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tuplemesh.config import as_config
from tuplemesh.security import mesh_secret

#: ``messaging.grpc.sender``: every link of a worker on one asyncio thread
EVENT_LOOP_SENDER = "event-loop"
#: ``messaging.grpc.sender``: three threads per link (grpc's synchronous API)
THREAD_SENDER = "threads"

#: ``messaging.grpc.sender``: every link of a worker on one asyncio thread
EVENT_LOOP_SENDER = "event-loop"
#: ``messaging.grpc.sender``: three threads per link (grpc's synchronous API)
THREAD_SENDER = "threads"
#: ``messaging.grpc.sender`` ``auto``: meshes of more workers than this run their links on the
#: event loop. Per message the threads cost less (flat out, word count ran at 0.87-0.98x on the
#: event loop, const -> null at 0.93x); per idle peer they cost three threads and, on a 2-core
#: host, a mesh of 64 formed only on the event loop.
THREADS_UP_TO_WORKERS = 16

__all__ = ["EVENT_LOOP_SENDER", "THREADS_UP_TO_WORKERS", "THREAD_SENDER", "TransportSettings", "grpc_sender"]


def grpc_sender(configured: str, workers: int) -> str:
    """The sender ``messaging.grpc.sender`` picks for a mesh of ``workers``."""
    if configured != "auto":
        return configured
    return THREAD_SENDER if workers <= THREADS_UP_TO_WORKERS else EVENT_LOOP_SENDER


@dataclass(frozen=True)
class TransportSettings:
    """Read once per context from the worker's Config (``Context.prepare``). Immutable.

    Backoffs appear twice, because gRPC and zmq options take integer milliseconds while the
    Python loops sleep in seconds; both are read from the one key.
    """

    worker_index: int  # the sender named on every batch
    bind_host: str
    max_message_bytes: int
    window_batches: int
    window_bytes: int
    #: unacknowledged tuples per peer are held to what it takes in this time (0: not by time)
    window_target_seconds: float
    #: a busy link's sender writes one stream message per this long at most (0: one per batch)
    coalesce_seconds: float
    close_timeout_seconds: float
    keepalive_millis: int  # 0: no keepalive pings
    reconnect_min_wait_millis: int
    reconnect_max_wait_millis: int
    reconnect_min_wait_seconds: float
    reconnect_max_wait_seconds: float
    grpc_server_threads: int
    #: the HTTP/2 stream window the worker's gRPC server grants (fixed: no automatic growth)
    grpc_receive_window_bytes: int
    #: how a worker's grpc streams to its peers run: ``threads`` or one ``event-loop``
    grpc_sender: str
    admin_token: str  # empty: calls need no token
    mesh_secret: bytes  # b"": Transfer streams need no proof of membership (plaintext dev mode)
    #: how far a proof's timestamp may be from the receiver's clock (mesh.secret.max.skew.secs)
    mesh_max_skew_seconds: float
    #: nonces of taken proofs a receiver remembers (mesh.secret.replay.cache.entries)
    mesh_replay_cache_entries: int
    tls_enabled: bool  # Transfer streams need a worker certificate
    workers: int  # sender ids of this mesh are 0 .. workers - 1
    zmq_io_threads: int
    zmq_hwm_batches: int
    #: the receiver's high-water mark: zmq.hwm, lowered so that a full pipe holds no more than the
    #: worker's ceiling on received bytes (topology.receive.max.bytes) in largest messages
    zmq_receive_hwm_batches: int
    #: the sender's high-water mark: zmq.hwm, lowered so that its pipe holds no more than the send
    #: window's bytes (messaging.window.bytes) in largest messages (the pipe holds copies)
    zmq_send_hwm_batches: int
    zmq_linger_millis: int
    zmq_port_offset: int
    log_interval_seconds: float
    #: a receiver ends a Transfer stream silent for this long; a sender's idle stream sends an
    #: empty heartbeat every quarter of it (0: neither)
    stream_idle_timeout_seconds: float

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> TransportSettings:
        conf = as_config(conf)
        return cls(
            worker_index=conf["worker.index"],
            bind_host=conf["worker.bind.host"],
            max_message_bytes=conf["messaging.max.message.bytes"],
            window_batches=conf["messaging.window.batches"],
            window_bytes=conf["messaging.window.bytes"],
            window_target_seconds=conf.seconds("messaging.window.target.ms"),
            coalesce_seconds=conf.seconds("messaging.coalesce.ms"),
            close_timeout_seconds=conf.seconds("messaging.close.timeout.secs"),
            keepalive_millis=conf["messaging.keepalive.millis"],
            reconnect_min_wait_millis=conf["storm.messaging.netty.min_wait_ms"],
            reconnect_max_wait_millis=conf["storm.messaging.netty.max_wait_ms"],
            reconnect_min_wait_seconds=conf.seconds("storm.messaging.netty.min_wait_ms"),
            reconnect_max_wait_seconds=conf.seconds("storm.messaging.netty.max_wait_ms"),
            grpc_server_threads=conf["messaging.grpc.server.threads"],
            grpc_receive_window_bytes=conf["messaging.grpc.receive.window.bytes"],
            grpc_sender=grpc_sender(conf["messaging.grpc.sender"], conf["topology.workers"]),
            admin_token=conf["admin.token"],
            mesh_secret=mesh_secret(conf),
            mesh_max_skew_seconds=conf.seconds("mesh.secret.max.skew.secs"),
            mesh_replay_cache_entries=conf["mesh.secret.replay.cache.entries"],
            tls_enabled=conf["tls.enabled"],
            workers=conf["topology.workers"],
            zmq_io_threads=conf["zmq.threads"],
            zmq_hwm_batches=conf["zmq.hwm"],
            zmq_receive_hwm_batches=_bytes_hwm(
                conf["zmq.hwm"], conf["topology.receive.max.bytes"], conf["messaging.max.message.bytes"]
            ),
            zmq_send_hwm_batches=_bytes_hwm(
                conf["zmq.hwm"], conf["messaging.window.bytes"], conf["messaging.max.message.bytes"]
            ),
            zmq_linger_millis=conf["zmq.linger.millis"],
            zmq_port_offset=conf["zmq.port.offset"],
            log_interval_seconds=conf.seconds("tuplemesh.log.rate.limit.secs"),
            stream_idle_timeout_seconds=conf.seconds("server.stream.idle.timeout.ms"),
        )


def _bytes_hwm(hwm: int, ceiling: int, largest: int) -> int:
    """libzmq keeps a pipe of up to ``hwm`` messages per peer outside what Python bounds (read
    ahead on a receiver, copies on a sender): bound that pipe by ``ceiling`` bytes of the largest
    messages too (0: no ceiling)."""
    return hwm if not ceiling else max(1, min(hwm, ceiling // largest))
