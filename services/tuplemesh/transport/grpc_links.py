"""The grpc transport's senders on one event loop: every peer's Transfer stream of a worker on one
asyncio thread (grpc.aio), instead of three threads per peer.

A thread sender (`GrpcConnection`) keeps, for each peer, a thread reading the acknowledgements,
a thread gRPC runs the request iterator on, and the channel's completion-queue thread, which
wakes five times a second to look for signals (a constant of gRPC's compiled module), taking
the worker's GIL each time. On one host those wake-ups grow with the square of the mesh: 64
workers make about 40,000 a second. Here one thread runs every link of the worker: grpc.aio's
poller waits without a timeout, and a link's coroutine wakes only when its window has something
to send (`SendWindow.on_change`), an acknowledgement comes, or its heartbeat is due.

What goes out and when is the thread sender's (`StreamRequests`): the same messages, ack
requests, probes, heartbeats and coalescing pace, the same reconnects with Storm's bounded
backoff, resending from the oldest unacknowledged batch. ``send`` still blocks the transfer
thread while the window is full: backpressure, never a drop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import grpc
import grpc.aio

from tuplemesh.client.channel import peer_aio_channel
from tuplemesh.transport.base import HeldBytes, OnCongestion
from tuplemesh.transport.grpc_sender import TRANSFER_STREAM, StreamAttempt, StreamRequests, TransferSender
from tuplemesh.transport.settings import TransportSettings
from tuplemesh.v1 import messages_pb2

__all__ = ["LinkLoop", "LoopConnection"]

log = logging.getLogger(__name__)


class LinkLoop:
    """One asyncio event loop on a thread of its own (``grpc-links``), started by the first
    connection and stopped by ``stop``. Any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=self._run, args=(loop,), name="grpc-links", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:
            loop.close()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the loop once every link on it has closed (``LoopConnection.close``)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout)


class LoopConnection(TransferSender):
    """Client side to one peer, run by a coroutine on the worker's `LinkLoop`."""

    def __init__(
        self,
        settings: TransportSettings,
        conf: Mapping[str, Any],
        links: LinkLoop,
        topology_id: str,
        host: str,
        port: int,
        on_congestion: OnCongestion | None = None,
        receiver: int = -1,
        epoch: str = "",
        held: HeldBytes | None = None,
    ) -> None:
        super().__init__(settings, conf, topology_id, host, port, on_congestion, receiver, epoch, held)
        self._loop = links.loop()
        self._channel: grpc.aio.Channel | None = None
        self._stream: Any = None
        self._more = asyncio.Event()  # the window changed, or the attempt ended
        self._redial = asyncio.Event()  # a retarget or close: end the backoff at once
        self._waiting = False  # the writer waits on ``_more``: the window must tell it
        self._closing: set[asyncio.Future[None]] = set()  # channels a retarget left, closing
        self.window.on_change = self._window_changed
        self._done = asyncio.run_coroutine_threadsafe(self._run(), self._loop)

    # -- any thread -----------------------------------------------------------------------------
    def _window_changed(self) -> None:
        """A batch was added (or the window woken): wake the writer if it waits. Only then is
        the loop woken (a write to its self-pipe): a busy writer finds the batch by itself."""
        if self._waiting:
            self._waiting = False
            self._loop.call_soon_threadsafe(self._more.set)

    def link_state(self) -> str:
        channel = self._channel
        if channel is None:
            return "CONNECTING"
        try:
            return channel.get_state(False).name
        except Exception:  # closed under us (a retarget): the next read sees the new channel
            return "SHUTDOWN"

    def retarget(self, host: str, port: int) -> None:
        """The peer moved: stream to ``host:port`` from now on, resending what is unacknowledged."""
        self.retargets += 1
        self.address = self.window.address = f"{host}:{port}"
        self._loop.call_soon_threadsafe(self._dial_again)

    def close(self) -> None:
        """Wait (up to messaging.close.timeout.secs) for every batch to be acknowledged, then close."""
        self._drain_window()
        self._closed = True
        self._loop.call_soon_threadsafe(self._dial_again)
        try:
            self._done.result(5.0)
        except Exception as exc:  # a stuck loop: the worker stops anyway
            log.warning("link to %s did not close in time: %r", self.address, exc)

    # -- the loop -------------------------------------------------------------------------------
    def _open_channel(self) -> None:
        self._channel = peer_aio_channel(self.address, self._conf, self._options)
        self._stream = self._channel.stream_stream(
            TRANSFER_STREAM,
            request_serializer=None,
            response_deserializer=messages_pb2.TransferAck.FromString,
        )

    def _dial_again(self) -> None:
        """End the stream of the moment (a retarget: on a new channel; a close: for good)."""
        if not self._closed:
            old = self._channel
            self._open_channel()
            if old is not None:  # closed in the background; kept referenced until it is
                closing = asyncio.ensure_future(old.close())
                self._closing.add(closing)
                closing.add_done_callback(self._closing.discard)
        if self._call is not None:
            self._call.cancel()
        self._redial.set()
        self._more.set()

    async def _run(self) -> None:
        self._open_channel()
        delay = self.min_wait
        while not self._closed:
            attempt = StreamAttempt()
            writer: asyncio.Task[None] | None = None
            try:
                call = self._call = self._stream(metadata=self._handshake(), wait_for_ready=True)
                writer = asyncio.ensure_future(self._write(call, attempt))
                while True:
                    ack = await call.read()
                    if ack is grpc.aio.EOF:
                        break
                    self.state = "READY"
                    delay = self.min_wait
                    self._on_ack(ack)
            except grpc.aio.AioRpcError as exc:
                self._stream_failed(exc.code(), str(exc.details()))
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # the loop itself is going away
                # else: the call was cancelled (a retarget or close): dial again or stop
            finally:
                attempt.alive = False
                self._more.set()
                if writer is not None:
                    writer.cancel()
                    await asyncio.gather(writer, return_exceptions=True)
            if self._closed:
                break
            self.state = "RECONNECTING"
            self.reconnects += 1
            try:
                await asyncio.wait_for(self._redial.wait(), delay)
            except TimeoutError:
                pass
            self._redial.clear()
            delay = min(delay * 2, self.max_wait)
        self.state = "CLOSED"
        if self._channel is not None:
            await self._channel.close()

    async def _write(self, call: Any, attempt: StreamAttempt) -> None:
        """Write the window to ``call`` as `StreamRequests` says, until the attempt ends."""
        requests = StreamRequests(self)
        try:
            while attempt.alive:
                found = await self._next(requests, attempt)
                if found is None:
                    if not attempt.alive:
                        return
                    idle = requests.idle()
                    if idle is not None:
                        await call.write(idle)
                    continue
                await call.write(requests.message(found))
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError, grpc.aio.UsageError):
            return  # the call ended: its reader sees why and dials again

    async def _next(self, requests: StreamRequests, attempt: StreamAttempt) -> tuple[int, Any] | None:
        """``SendWindow.next_to_send`` on the loop: the batch at the requests' position, held
        back while it is the open one and its pace has not passed; None after ``wait()``
        seconds with nothing to send, or once the attempt ended."""
        window = self.window
        wait = requests.wait()
        deadline = None if wait is None else time.monotonic() + wait
        position = requests.position
        while attempt.alive:
            self._more.clear()
            self._waiting = True
            if requests.hold_until and window.held_open(position):
                held = requests.hold_until - time.monotonic()
                if held > 0:
                    await self._sleep(held)  # a batch behind it ends the hold at once
                    continue
            found = window.get(position)
            if found is not None:
                self._waiting = False
                return found
            if deadline is None:
                await self._more.wait()
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            await self._sleep(remaining)
        self._waiting = False
        return None

    async def _sleep(self, seconds: float) -> None:
        """Up to ``seconds``, or until the window changes."""
        try:
            await asyncio.wait_for(self._more.wait(), seconds)
        except TimeoutError:
            pass
