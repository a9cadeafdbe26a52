"""Where a redis state store lives: the ``redis://`` URL parsed, and shown without its credentials.

Standard library only and outside ``tuplemesh.state``: the config check validates a URL without
redis-py installed and without importing the state package (which imports the config).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

__all__ = ["RedisAddress"]

_DEFAULT_PORT = 6379


@dataclass(frozen=True)
class RedisAddress:
    """A parsed ``redis://[[user][:password]@]host[:port][/db]`` (``rediss://`` for TLS).

    ``str()`` gives the address without user or password: the form every message shows.
    """

    host: str
    port: int = _DEFAULT_PORT
    db: int = 0
    tls: bool = False
    username: str = ""
    password: str = field(default="", repr=False)

    @classmethod
    def parse(cls, url: str) -> RedisAddress:
        """Parse ``url``; ValueError says what is wrong (and never repeats a password)."""
        try:
            parts = urlsplit(url.strip())
            port = parts.port
        except ValueError:
            raise ValueError("is not a URL of the form redis://host:port/db") from None
        if parts.scheme not in ("redis", "rediss"):
            raise ValueError("must start with redis:// (or rediss:// for TLS)")
        if not parts.hostname:
            raise ValueError("names no host (redis://host:port/db)")
        if parts.query or parts.fragment:
            raise ValueError("takes no query or fragment (timeouts and passwords have their own keys)")
        path = parts.path.strip("/")
        if path and not path.isdigit():
            raise ValueError("the path must be a database number (redis://host:port/0)")
        return cls(
            host=parts.hostname,
            port=_DEFAULT_PORT if port is None else port,
            db=int(path) if path else 0,
            tls=parts.scheme == "rediss",
            username=unquote(parts.username or ""),
            password=unquote(parts.password or ""),
        )

    @staticmethod
    def without_credentials(url: str) -> str:
        """``url`` as written but with any user and password cut out (for messages about a bad URL)."""
        scheme, sep, rest = str(url).partition("://")
        if not sep:
            return str(url)
        authority, slash, tail = rest.partition("/")
        return f"{scheme}://{authority.rpartition('@')[2]}{slash}{tail}"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'rediss' if self.tls else 'redis'}://{host}:{self.port}/{self.db}"
