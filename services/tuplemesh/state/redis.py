"""`StateStore` on a redis server (redis-py): checkpoints shared by every worker of a cluster.

Keys of one topology share the hash tag ``{topology}`` (one cluster slot) under
``tuplemesh:state:{<topology>}:``::

    committed        string   the newest committed checkpoint (only ever raised, by a Lua script)
    checkpoints      zset     the checkpoint numbers that have parts (score = number), for prune
    parts:<n>        hash     ``<task>:<component>`` -> that task's blob for checkpoint n
    counters         hash     counter name -> value (HINCRBY)

Every redis failure (refused, timed out, wrong password, an error reply) becomes `StoreUnavailable`
naming the address and the operation, never the password. A call makes one attempt, and each of
its network steps (connect, send, each reply) takes at most the configured timeout; connections the
server dropped are replaced, so the same store object works again as soon as the server does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self, cast

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:
    raise ImportError(
        "the redis state backend needs the redis-py client: pip install tuplemesh[redis]"
    ) from exc

from tuplemesh.redis_address import RedisAddress
from tuplemesh.state.base import PartKey, StoreUnavailable
from tuplemesh.state.settings import RedisSettings

__all__ = ["RedisStore"]

# Raise the marker only: two committers racing (or a late one) can never move it backwards.
_COMMIT = """
local current = tonumber(redis.call('GET', KEYS[1]))
local proposed = tonumber(ARGV[1])
if current == nil or proposed > current then
    redis.call('SET', KEYS[1], ARGV[1])
    return proposed
end
return current
"""


class RedisStore:
    """`StateStore` on one redis server. Thread-safe: redis-py's client keeps a pool of
    connections; each process opens its own store."""

    def __init__(self, url: str, *, password: str = "", timeout: float = 2.0) -> None:
        """``password`` (when not empty) wins over one written in ``url``; ``timeout`` in seconds."""
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        try:
            address = RedisAddress.parse(url)
        except ValueError as exc:
            raise ValueError(f"redis URL {RedisAddress.without_credentials(url)!r} {exc}") from None
        self.address = address
        self.timeout = timeout
        self._password = password or address.password
        self._client = redis.Redis(
            host=address.host,
            port=address.port,
            db=address.db,
            ssl=address.tls,
            username=address.username or None,
            password=self._password or None,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            # No retries: redis-py's default (three, with backoff) would keep a call going far past
            # ``timeout``; the caller decides when to try again. A pooled connection the server
            # closed (a restart) is noticed and reconnected by the pool before it is used.
            retry=Retry(NoBackoff(), 0),
            client_name="tuplemesh-state",
        )
        self._commit = self._client.register_script(_COMMIT)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> Self:
        """The store the topology conf's ``topology.state.redis.*`` keys describe."""
        settings = RedisSettings.from_config(conf)
        return cls(settings.url, password=settings.password, timeout=settings.timeout_seconds)

    def put_part(self, key: PartKey, checkpoint: int, blob: bytes) -> None:
        with self._translated("put_part", key):
            pipe = self._client.pipeline(transaction=True)
            pipe.zadd(self._key(key.topology, "checkpoints"), {str(checkpoint): checkpoint})
            pipe.hset(self._parts(key.topology, checkpoint), _field(key), bytes(blob))
            pipe.execute()

    def get_part(self, key: PartKey, checkpoint: int) -> bytes | None:
        with self._translated("get_part", key):
            # bytes: the client is made without decode_responses
            blob = cast("bytes | None", self._client.hget(self._parts(key.topology, checkpoint), _field(key)))
        return blob

    def commit(self, topology: str, checkpoint: int) -> None:
        with self._translated("commit", topology):
            self._commit(keys=[self._key(topology, "committed")], args=[checkpoint])

    def last_committed(self, topology: str) -> int | None:
        with self._translated("last_committed", topology):
            value = self._client.get(self._key(topology, "committed"))
        return None if value is None else int(value)

    def prune(self, topology: str, below: int) -> None:
        index = self._key(topology, "checkpoints")
        with self._translated("prune", topology):
            old = cast("list[bytes]", self._client.zrangebyscore(index, "-inf", f"({below}"))
            if not old:
                return
            pipe = self._client.pipeline(transaction=True)
            # UNLINK frees the (possibly large) hashes in the background instead of blocking redis
            pipe.unlink(*(self._parts(topology, int(n)) for n in old))
            pipe.zrem(index, *old)
            pipe.execute()

    def increment(self, topology: str, counter: str) -> int:
        with self._translated("increment", topology):
            return int(self._client.hincrby(self._key(topology, "counters"), counter, 1))

    def counter(self, topology: str, counter: str) -> int:
        with self._translated("counter", topology):
            value = self._client.hget(self._key(topology, "counters"), counter)
        return 0 if value is None else int(value)

    def close(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        return f"RedisStore({str(self.address)!r}, timeout={self.timeout:g})"

    @staticmethod
    def _key(topology: str, name: str) -> str:
        return f"tuplemesh:state:{{{topology}}}:{name}"

    def _parts(self, topology: str, checkpoint: int) -> str:
        return self._key(topology, f"parts:{checkpoint}")

    @contextmanager
    def _translated(self, operation: str, subject: PartKey | str) -> Iterator[None]:
        """Turn any redis-py error inside the block into StoreUnavailable (never showing the password)."""
        try:
            yield
        except redis.exceptions.RedisError as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            leaked = bool(self._password) and self._password in reason
            if leaked:
                reason = reason.replace(self._password, "***")
            if isinstance(exc, redis.exceptions.AuthenticationError | redis.exceptions.NoPermissionError) or (
                "NOAUTH" in reason
            ):
                reason += " (check topology.state.redis.password)"
            what = f"topology {subject!r}" if isinstance(subject, str) else str(subject)
            message = (
                f"redis state store at {self.address}: {operation} for {what} failed: {reason} "
                f"(timeout {self.timeout:g} s)"
            )
            # the chained redis-py error would print the password again when it held it
            raise StoreUnavailable(message) from (None if leaked else exc)


def _field(key: PartKey) -> str:
    # the task number first: it never contains ':', so any component name parses back unambiguously
    return f"{key.task}:{key.component}"
