"""The proxy's requests to NameServers and brokers made on its asyncio loop's own ZMTP connections
(ZMTP 3.1 NULL, ``zmtp_format.py``: the native doors' protocol), without the RpcClient's I/O thread.

Through the RpcClient every request went from the loop to the I/O thread (a pipe write that wakes it)
and every batch of answers came back (a write to the loop's self-pipe): a GIL hand-off each way. Under
grpc-java's sends a quarter of the loop thread's time was that pipe write (perf/RESULTS.md, "The gRPC
door under a lean client"). Here the loop writes a request's frames to the door's socket itself and
its selector reads the answers, settled by opaque.

Used where the process has no CURVE keys (no access control: the doors speak NULL); a door that turns
out not to (it closes at our greeting, or names another mechanism) and any endpoint that is not
``tcp://host:port`` are served by the RpcClient (``fallback``) from then on. A door's PING is answered,
its requests (CHECK_TRANSACTION_STATE) go to the RpcClient's handlers, a refused connect is tried again
every ``CONNECT_RETRY_S`` until the earliest waiting call's deadline (as libzmq reconnects), a lost
connection fails its calls at once, and calls past their deadline end in RequestTimeout.
"""

from __future__ import annotations

import asyncio
import logging
import time

from rocketbox.cluster import zmtp_format as zf
from rocketbox.cluster.client_transport import RequestTimeout, TransportError, decode_response, serve_server_request
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.wire_format import Command, next_opaque, to_frames
from rocketbox.cluster.zmtp_calls import ANSWER_FRAME_BYTES_MAX
from rocketbox.cluster.zmtp_client import CONNECT_RETRY_S, tcp_address

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

SWEEP_INTERVAL_S = 0.05   # how often calls past their deadline are looked for (while any wait)


class _DoorConnection(asyncio.Protocol):
    """One connection to one door; the loop's only. The protocol is ``zf.ClientSession``'s; this
    writes what it owes the door and settles the answers it reads."""

    def __init__(self, calls: "LoopCalls", endpoint: str):
        self.calls, self.endpoint = calls, endpoint
        self.transport: asyncio.Transport | None = None
        self.session = zf.ClientSession(ANSWER_FRAME_BYTES_MAX)   # holds requests until the door's READY
        self.closed = False
        self.pending: dict[int, tuple[Command, asyncio.Future, float]] = {}   # opaque -> (request, waiter, deadline)

    def send(self, request: Command, waiter: asyncio.Future, deadline: float) -> None:
        request.opaque = next_opaque()   # as the RpcClient gives each call its own
        self.pending[request.opaque] = (request, waiter, deadline)
        data = self.session.request(to_frames(request))
        if data:
            self.transport.write(data)

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.write(self.session.opening())

    def data_received(self, data: bytes) -> None:
        session = self.session
        session.reader.feed(data)
        try:
            # One message at a time: the answers before a fault in the same read are still settled.
            while not self.closed:
                parts = session.next_message()
                if session.outgoing:   # READY, held requests, PONGs: before any answer of ours
                    self.transport.write(session.take_outgoing())
                if parts is None:
                    return
                self._message(parts)
        except zf.MechanismRefused:
            self.calls.not_null(self)
        except zf.ZmtpError as exc:
            self.fail(TransportError(f"connection to {self.endpoint} lost: {exc}"))

    def _message(self, parts: list[bytes]) -> None:
        message = decode_response(parts)
        if message is None:
            return
        if not message.is_response:   # the door's own request (CHECK_TRANSACTION_STATE)
            answer = serve_server_request(self.calls.handlers, message)
            if answer is not None:
                self.transport.write(self.session.request(to_frames(answer)))
            return
        entry = self.pending.pop(message.opaque, None)
        if entry is not None and not entry[1].done():
            entry[1].set_result(message)

    def connection_lost(self, exc) -> None:
        if not self.closed:
            if self.session.close_refusal() is None:
                self.fail(TransportError(f"connection to {self.endpoint} lost: {exc or 'closed by the door'}"))
            else:   # a CURVE door closes at our greeting
                self.calls.not_null(self)

    def fail(self, error: BaseException) -> None:
        """Every waiting call ends with ``error``; the connection is closed and forgotten."""
        self.close()
        pending, self.pending = self.pending, {}
        for _request, waiter, _deadline in pending.values():
            if not waiter.done():
                waiter.set_exception(error)

    def close(self) -> None:
        self.closed = True
        self.calls.forget(self)
        if self.transport is not None:
            self.transport.close()


class LoopCalls:
    """``await calls.call(endpoint, request, timeout_ms)`` on the running loop (``BatchedCalls``'s)."""

    def __init__(self, fallback, handlers: dict, default_timeout_ms: int):
        self.fallback = fallback   # BatchedCalls over the RpcClient
        self.handlers = handlers
        self.default_timeout_ms = default_timeout_ms
        self._connections: dict[str, _DoorConnection] = {}
        self._via_fallback: set[str] = set()
        self._sweeping = False
        self.calls_made = 0   # through the loop's own connections (tests, stats)

    def call(self, endpoint: str, request: Command, timeout_ms: int | None = None) -> asyncio.Future:
        address = None if endpoint in self._via_fallback else tcp_address(endpoint)
        if address is None:
            return self.fallback.call(endpoint, request, timeout_ms)
        loop = asyncio.get_running_loop()
        conn = self._connections.get(endpoint)
        if conn is None:
            conn = self._connections[endpoint] = _DoorConnection(self, endpoint)
            loop.create_task(self._connect(conn, address))
        waiter = loop.create_future()
        deadline = time.monotonic() + (timeout_ms or self.default_timeout_ms) / 1000
        conn.send(request, waiter, deadline)
        self.calls_made += 1
        if not self._sweeping:
            self._sweeping = True
            loop.call_later(SWEEP_INTERVAL_S, self._sweep)
        return waiter

    async def _connect(self, conn: _DoorConnection, address: tuple[str, int]) -> None:
        loop = asyncio.get_running_loop()
        while not conn.closed:
            try:
                await loop.create_connection(lambda: conn, *address)
                return
            except OSError as exc:
                deadlines = [deadline for _r, _w, deadline in conn.pending.values()]
                if not deadlines or time.monotonic() + CONNECT_RETRY_S >= min(deadlines):
                    conn.fail(TransportError(f"{conn.endpoint} is not reachable: {exc}"))
                    return
                await asyncio.sleep(CONNECT_RETRY_S)

    def not_null(self, conn: _DoorConnection) -> None:
        """``conn``'s door does not speak NULL: its calls, and every later one, go through the RpcClient."""
        _limited.info(f"not-null:{conn.endpoint}", "%s does not take NULL connections: its requests go through "
                      "the RpcClient", conn.endpoint)
        self._via_fallback.add(conn.endpoint)
        conn.close()
        pending, conn.pending = conn.pending, {}
        for request, waiter, deadline in pending.values():
            if waiter.done():
                continue
            left_ms = max(1, int((deadline - time.monotonic()) * 1000))
            asyncio.ensure_future(self.fallback.call(conn.endpoint, request, left_ms)).add_done_callback(
                lambda done, waiter=waiter: _settle(waiter, done))

    def forget(self, conn: _DoorConnection) -> None:
        if self._connections.get(conn.endpoint) is conn:
            del self._connections[conn.endpoint]

    def _sweep(self) -> None:
        now = time.monotonic()
        waiting = False
        for conn in list(self._connections.values()):
            expired = [opaque for opaque, (_r, _w, deadline) in conn.pending.items() if deadline <= now]
            for opaque in expired:
                request, waiter, _deadline = conn.pending.pop(opaque)
                if not waiter.done():
                    waiter.set_exception(RequestTimeout(f"no answer from {conn.endpoint} to request code "
                                                        f"{request.code} in time"))
            waiting = waiting or bool(conn.pending)
        self._sweeping = waiting
        if waiting:
            asyncio.get_running_loop().call_later(SWEEP_INTERVAL_S, self._sweep)

    def close(self) -> None:
        for conn in list(self._connections.values()):
            conn.fail(TransportError("the proxy is stopping"))


def _settle(waiter: asyncio.Future, done: asyncio.Future) -> None:
    if waiter.done():
        return
    if done.cancelled():
        waiter.cancel()
    elif done.exception() is not None:
        waiter.set_exception(done.exception())
    else:
        waiter.set_result(done.result())
