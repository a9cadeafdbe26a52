"""Small components shared by runtime tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from tuplemesh.core.outbox import Outbox
from tuplemesh.disruptor import RingBuffer
from tuplemesh.serialization import load_serializer
from tuplemesh.topology import Bolt, OutputFieldsDeclarer, Spout, Tuple

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[1]


def child_pythonpath() -> str:
    """PYTHONPATH for the processes a test starts: this checkout's sources (``services/``, and the
    root for ``examples`` and ``tests``) first, so a child runs the code under test, not an installed
    copy; then whatever the test itself inherited."""
    inherited = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in (str(ROOT / "services"), str(ROOT), inherited) if p)


def run_cli(
    *args: str, cwd: Path = ROOT, env: Mapping[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``tuplemesh ARGS`` as a user runs it (this interpreter, this checkout's sources first on
    PYTHONPATH unless ``env`` names its own), to its end; ``timeout`` only guards the test."""
    return subprocess.run(
        [sys.executable, "-m", "tuplemesh.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": child_pythonpath(), **(env or {})},
    )


def eventually(
    condition: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.01,
    message: str | Callable[[], str] = "",
) -> T:
    """Poll ``condition`` until it returns something truthy and return that value.

    Raises AssertionError naming ``message`` (or the condition) and the last value seen when
    ``timeout`` seconds pass first. The one way tests wait for a state: no bare sleeps, no
    hand-rolled deadline loops.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            name = getattr(condition, "__name__", repr(condition))
            raise AssertionError(f"not true within {timeout:g} s: {text or name} (last value {value!r})")
        time.sleep(interval)


def freeze(pid: int, timeout: float = 30.0) -> None:
    """SIGSTOP ``pid`` and return once every thread of it has stopped. The signal is delivered
    to each thread as it is next scheduled, so on a loaded host a thread can still run for a
    moment after ``kill`` returns (and answer a batch sent meanwhile): a test that freezes a peer
    to see what an unanswering peer does must not start before the freeze has."""
    os.kill(pid, signal.SIGSTOP)

    def every_thread_stopped() -> bool:
        states = []
        for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
            try:
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):  # a thread that ended meanwhile
                continue
        return bool(states) and all(state in "tT" for state in states)

    try:
        eventually(every_thread_stopped, timeout=timeout, message=f"every thread of process {pid} stopped")
    except BaseException:
        os.kill(pid, signal.SIGCONT)  # the caller's own SIGCONT is not reached: leave none stopped
        raise


class ListSpout(Spout):
    """Emits ``items`` (split across its tasks by index) on the declared fields, then finishes."""

    def __init__(self, items: list[list[Any]], fields: list[str], stream: str = "default") -> None:
        self.items = items
        self.fields = fields
        self.stream = stream

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(self.stream, self.fields)

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        n = len(context.component_tasks)
        self.mine = iter(self.items[context.task_index :: n])
        self.done = False

    def next_tuple(self) -> None:
        item = next(self.mine, None)
        if item is None:
            self.done = True
        else:
            self.collector.emit(item, stream=self.stream)

    def is_finished(self) -> bool:
        return self.done


class RecordingBolt(Bolt):
    """Records (task, values, source component, stream) of every tuple it executes."""

    def __init__(self, fields: list[str] | None = None) -> None:
        self.out_fields = fields

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        if self.out_fields:
            declarer.declare(self.out_fields)

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.task = context.task_id
        self.collector = collector
        self.seen: list[Any] = []

    def execute(self, tup: Tuple) -> None:
        self.seen.append([list(tup.values), tup.source_component, tup.source_stream, tup.source_task])
        if self.out_fields:
            self.collector.emit(list(tup.values))

    def report(self) -> Any:
        return {"task": self.task, "seen": self.seen}


class GateBolt(Bolt):
    """Blocks in execute until the shared event is set (class attribute: deepcopy keeps it shared)."""

    gate = threading.Event()

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.count = 0

    def execute(self, tup: Tuple) -> None:
        type(self).gate.wait(30)
        self.count += 1

    def report(self) -> Any:
        return self.count


def local_and_remote_outbox(
    batch_size: int, send_capacity: int, max_payload: int = 16 * 1024 * 1024
) -> tuple[Outbox, RingBuffer[Any], RingBuffer[Any]]:
    """An Outbox (msgpack) for task 1 in this worker and task 2 on worker 5; with task 1's inbox
    and the transfer ring, to read what it delivered."""
    inbox: RingBuffer[Any] = RingBuffer.multi_producer(16)
    transfer: RingBuffer[Any] = RingBuffer.multi_producer(16)
    outbox = Outbox(
        local_inboxes={1: inbox},
        remote_workers={2: 5},
        transfer_ring=transfer,
        serializer=load_serializer("msgpack"),
        batch_size=batch_size,
        send_capacity=send_capacity,
        max_payload=max_payload,
    )
    return outbox, inbox, transfer
