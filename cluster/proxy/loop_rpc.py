"""Requests from the proxy's asyncio loop to brokers, on ZeroMQ sockets that loop polls itself.

The client library's RpcClient answers an async call through its own I/O thread: the request
crosses from the proxy's loop to that thread and the answer back, two hand-offs under the GIL per
message (perf/RESULTS.md, "The gRPC door": 350 us of proxy CPU a message above a bare grpc.aio
servicer). Here a DEALER socket per endpoint lives on the loop; one reader task per socket settles
the waiting futures by opaque. The bytes are the same frames (``wire_format``). Requests a broker
makes of the proxy (transaction checks) still come over RpcClient's connection, the one the proxy
registered with its heartbeat.
"""

from __future__ import annotations

import asyncio
import logging

import zmq
import zmq.asyncio

from rocketbox.cluster.wire_format import Command, FrameError, from_frames, next_opaque, to_frames
from rocketbox.cluster.zmq_transport import CONTEXT, RequestTimeout, TransportError, tune_socket

log = logging.getLogger(__name__)


class _Link:
    """One endpoint: its socket, the calls waiting on it, the task reading its answers."""

    def __init__(self, context: zmq.asyncio.Context, endpoint: str):
        self.socket = context.socket(zmq.DEALER)
        tune_socket(self.socket)
        self.socket.setsockopt(zmq.IMMEDIATE, 1)
        self.socket.connect(endpoint)
        self.waiting: dict[int, asyncio.Future] = {}
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        while True:
            frames = await self.socket.recv_multipart()
            if not frames or frames == [b""]:
                continue   # a server's liveness probe
            try:
                answer = from_frames(frames)
            except FrameError as exc:
                log.warning("undecodable answer dropped: %s", exc)
                continue
            waiter = self.waiting.pop(answer.opaque, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(answer)

    def close(self) -> None:
        self.reader.cancel()
        for waiter in self.waiting.values():
            if not waiter.done():
                waiter.set_exception(TransportError("closed"))
        self.socket.close(0)


class LoopRpc:
    def __init__(self, default_timeout_ms: int):
        self.default_timeout_ms = default_timeout_ms
        self._context = zmq.asyncio.Context.shadow(CONTEXT.get())
        self._links: dict[str, _Link] = {}

    async def call(self, endpoint: str, request: Command, timeout_ms: int | None = None) -> Command:
        """The answer; RequestTimeout when none comes within ``timeout_ms`` (the connection's
        making included), TransportError when the endpoint is not one ZeroMQ can connect to."""
        timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        link = self._links.get(endpoint)
        if link is None:
            try:
                link = self._links[endpoint] = _Link(self._context, endpoint)
            except zmq.ZMQError as exc:
                raise TransportError(f"cannot connect to {endpoint!r}: {exc}") from None
        request.opaque = next_opaque()
        waiter = asyncio.get_running_loop().create_future()
        link.waiting[request.opaque] = waiter

        async def exchange() -> Command:
            # Waits for the connection (IMMEDIATE: nothing is queued for a peer not connected).
            await link.socket.send_multipart(to_frames(request))
            return await waiter

        try:
            return await asyncio.wait_for(exchange(), timeout_ms / 1000)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"no answer from {endpoint} to request code {request.code} "
                                 f"within {timeout_ms} ms") from None
        finally:
            link.waiting.pop(request.opaque, None)

    def close(self) -> None:
        for link in self._links.values():
            link.close()
        self._links.clear()
