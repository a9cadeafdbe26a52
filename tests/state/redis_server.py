"""A real redis-server for tests: loopback only, a password, its files in a temporary directory."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import redis

from tests.helpers import eventually, freeze
from tuplemesh.netutil import free_ports


class RedisServer:
    """One redis-server process on 127.0.0.1 that a test can stop, restart, pause and resume.

    It keeps its port and password across restarts, so a client made before a restart reaches the
    restarted server. ``durable`` turns on the append-only file (in ``directory``): what was
    written before a stop is there again after the restart, as on a production server.
    """

    def __init__(self, directory: Path, password: str, *, durable: bool = False) -> None:
        self.directory = directory
        self.password = password
        self.durable = durable
        [self.port] = free_ports(1)
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def conf(self, timeout_ms: float = 2000.0) -> dict[str, Any]:
        """The topology conf of a redis state store on this server."""
        return {
            "topology.state.redis.url": self.url,
            "topology.state.redis.password": self.password,
            "topology.state.redis.timeout.ms": timeout_ms,
        }

    def start(self) -> None:
        assert self.process is None, "already running"
        config = self.directory / "redis.conf"
        # the password sits in a file, not on the command line where `ps` shows it
        config.write_text(
            "\n".join(
                [
                    "bind 127.0.0.1",
                    f"port {self.port}",
                    f"requirepass {self.password}",
                    f"dir {self.directory}",
                    'save ""',
                    f"appendonly {'yes' if self.durable else 'no'}",
                    f"logfile {self.directory / 'redis.log'}",
                    "daemonize no",
                ]
            )
            + "\n"
        )
        self.process = subprocess.Popen(["redis-server", str(config)], stdin=subprocess.DEVNULL)
        eventually(self._ready, timeout=15.0, interval=0.02, message=self._log_tail)

    def stop(self) -> None:
        """Shut the server down (SIGTERM: it writes its append-only file first) and wait for it."""
        if self.process is None:
            return
        self.resume()  # a paused server would never see the SIGTERM
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def pause(self) -> None:
        """Freeze the server (SIGSTOP): connections still open, nothing answers, as on a hung host."""
        assert self.process is not None
        freeze(self.process.pid)

    def resume(self) -> None:
        if self.process is not None:
            os.kill(self.process.pid, signal.SIGCONT)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, password=self.password, socket_timeout=5.0)

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"redis-server exited with {self.process.returncode}: {self._log_tail()}")
        try:
            with self.client() as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    def _log_tail(self) -> str:
        log = self.directory / "redis.log"
        return log.read_text()[-2000:] if log.exists() else "(no log)"
