"""A receiving worker in its own process, for the transport tests that kill and restart one.

Usage: python -m tests.transport.peer_process PLUGIN PORT OUTFILE [MESH_SECRET]
With a mesh secret the peer is worker 1 and takes only streams proven with it.
Every batch is appended to OUTFILE (one ``task payload`` line per message) before ``on_batch``
returns, so whatever the sender saw acknowledged is in the file even after a SIGKILL.
"""

from __future__ import annotations

import signal
import sys
import threading
import time

from tuplemesh.config import Config
from tuplemesh.transport import make_context


def main() -> None:
    plugin, port, outfile = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    secret = sys.argv[4] if len(sys.argv) > 4 else ""
    settings = {"mesh.secret": secret, "worker.index": 1, "topology.workers": 2} if secret else {}
    conf = Config({"messaging.transport": plugin, "messaging.window.batches": 8, **settings})
    out = open(outfile, "a", buffering=1 << 20)  # noqa: SIM115 - lives as long as the process
    lock = threading.Lock()

    def on_batch(batch: list[tuple[int, bytes]]) -> list[int]:
        with lock:
            out.write("".join(f"{task} {payload.decode()}\n" for task, payload in batch))
            out.flush()
        return []

    context = make_context(plugin)
    context.prepare(conf)
    binding = context.bind("topo-1", port, on_batch)
    print("ready", flush=True)
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stopping.append(signum))
    # Python runs a signal handler only in the main thread, between bytecodes, so the main thread
    # must keep running some: in one endless Event.wait it never learns of a SIGTERM the kernel
    # handed to another thread (seen after a SIGSTOP/SIGCONT), and the process never exits. The
    # handler only appends: an Event.set there could wait for the lock its own wait holds.
    while not stopping:
        time.sleep(0.05)
    binding.close()
    context.term()


if __name__ == "__main__":
    main()
