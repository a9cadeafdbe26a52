"""SIGTERM reaches a worker's stop event however busy its main thread is with that event."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.helpers import child_pythonpath
from tests.worker.conftest import ROOT

# The main thread waits on the stop event the handler sets, with no timeout between looks, so it
# holds the event's own lock most of the time: where a handler that set the event itself hung.
_CHILD = textwrap.dedent(
    """
    import os, signal, threading, time
    from tuplemesh.server.signals import TerminationSignals

    signals = TerminationSignals()
    stop = threading.Event()
    signals.also_set(stop)
    signals.install()
    rounds = int(os.environ["ROUNDS"])
    for round in range(rounds):
        stop.clear()
        signals._count = 0  # each round is a first signal
        signals.requested.clear()
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM)).start()
        while not stop.wait(0):
            pass
        assert signals.requested.is_set()
    print("stopped", rounds, flush=True)
    """
)


def test_a_signal_caught_inside_the_wait_on_the_stop_event_still_sets_it():
    out = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": child_pythonpath(), "ROUNDS": "40"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["stopped", "40"]
