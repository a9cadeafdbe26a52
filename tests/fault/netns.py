"""A veth link between the root network namespace and one we create, which a test can cut.

The root side gets ``10.77.<n>.1``, the namespace side ``10.77.<n>.2``. ``cut`` installs
blackhole routes to the other side in both namespaces, so packets are silently dropped in both
directions while the interfaces stay up, like a partitioned network; ``heal`` removes them. The
test process (root namespace) can always reach its own side. Needs root and iproute2.
"""

from __future__ import annotations

import os
import subprocess
from types import TracebackType


def _ip(*args: str, netns: str | None = None) -> None:
    cmd = ["ip", *args] if netns is None else ["ip", "netns", "exec", netns, "ip", *args]
    subprocess.run(cmd, check=True, capture_output=True, text=True)


class VethLink:
    def __init__(self) -> None:
        n = os.getpid() % 200 + 20
        self.netns = f"tm-fault-{os.getpid()}"
        self.root_dev, self.ns_dev = f"tmr{n}", f"tmn{n}"
        self.root_ip, self.ns_ip = f"10.77.{n}.1", f"10.77.{n}.2"
        self.is_cut = False

    def __enter__(self) -> VethLink:
        _ip("netns", "add", self.netns)
        try:
            _ip("link", "add", self.root_dev, "type", "veth", "peer", "name", self.ns_dev)
            _ip("link", "set", self.ns_dev, "netns", self.netns)
            _ip("addr", "add", f"{self.root_ip}/24", "dev", self.root_dev)
            _ip("link", "set", self.root_dev, "up")
            _ip("addr", "add", f"{self.ns_ip}/24", "dev", self.ns_dev, netns=self.netns)
            _ip("link", "set", self.ns_dev, "up", netns=self.netns)
            _ip("link", "set", "lo", "up", netns=self.netns)
        except BaseException:
            self._remove()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._remove()

    def _remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.root_dev], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.netns], capture_output=True)

    def exec_prefix(self) -> list[str]:
        """Prefix a command with this to run it inside the namespace."""
        return ["ip", "netns", "exec", self.netns]

    def cut(self) -> None:
        _ip("route", "add", "blackhole", f"{self.ns_ip}/32")
        _ip("route", "add", "blackhole", f"{self.root_ip}/32", netns=self.netns)
        self.is_cut = True

    def heal(self) -> None:
        _ip("route", "del", "blackhole", f"{self.ns_ip}/32")
        _ip("route", "del", "blackhole", f"{self.root_ip}/32", netns=self.netns)
        self.is_cut = False
