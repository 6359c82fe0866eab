"""The gRPC door on the native front end (``grpc_front = "native"``): the proxy's listening socket, its
connections on the proxy's asyncio loop, HTTP/2 and gRPC's framing in C (``_native/h2_conn.c`` through
``_native/h2.py``), and the same servicer methods grpc.aio calls, one table of them
(``method_table``: MessagingService's descriptor, request types and the servicer's bound methods).

Each read of a connection goes to C once and comes back as events; the unary calls it completed
start together, and the answers a loop turn made are framed and written by one C call and one
``send``. Server streaming (ReceiveMessage) and the bidi Telemetry stream run as tasks that write
each response as it comes, or a run of them (a receive's messages, already serialized) by one C call. What grpc.aio would give a handler, ``CallContext`` gives: the metadata
(``x-mq-client-id``, ``authorization``, ...; ``-bin`` values base64-decoded), the peer, the deadline
from ``grpc-timeout``, ``abort``.

Bounds, before anything is authenticated: connections (``max_connections``; more are closed at
once), a connection's time to send HTTP/2's preface (``handshake_timeout_ms``), RPCs in flight over
all connections (``max_concurrent_rpcs``: beyond, RESOURCE_EXHAUSTED), streams open a connection, a
message's size, the unfinished messages' bytes of a connection, a
Telemetry stream's unread commands; a connection whose answers the client does not read is not
read either. Whatever breaks the protocol ends that connection with a GOAWAY and a rate-limited
log line; the door serves the others on. TLS stays on grpc.aio (``server.ProxyServer``).
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import logging
import socket
import time
import traceback
from typing import NamedTuple

from google.protobuf.message import DecodeError

from rocketbox.cluster._native.h2 import (EVENT_END, EVENT_HEADERS, EVENT_MESSAGE, EVENT_RESET, H2Connection,
                                          fields_of)
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.proxy.protos import service

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
READ_BYTES = 256 * 1024
ACCEPTS_A_TURN = 64
# A connection with this many bytes its client has not taken is not read until they go.
UNSENT_PAUSE_BYTES = 4 * 1024 * 1024
STREAM_INBOX_MAX = 64
STOP_POLL_S = 0.01
OK, UNKNOWN, INTERNAL, UNIMPLEMENTED, RESOURCE_EXHAUSTED = 0, 2, 13, 12, 8
# Headers that are HTTP/2's or gRPC's own, not the call's metadata (as grpcio leaves them out).
NOT_METADATA = frozenset({"content-type", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding"})
_TIMEOUT_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


class Method(NamedTuple):
    parse: object               # the request type's FromString
    client_streaming: bool
    server_streaming: bool
    handler: object             # the servicer's method, as grpc.aio calls it
    batch: object = None        # the servicer's handler of a read's calls together (requests, contexts) -> responses


def method_table(servicer) -> dict[str, Method]:
    """``/apache.rocketmq.v2.MessagingService/<Name>`` -> its Method, for every RPC of the service. A
    servicer's ``stream_handlers`` replace grpc.aio's handler of a server-streaming RPC with one whose
    responses may come as runs (``Connection.streaming``)."""
    batch_handlers = servicer.batch_handlers() if hasattr(servicer, "batch_handlers") else {}
    stream_handlers = servicer.stream_handlers() if hasattr(servicer, "stream_handlers") else {}
    table = {}
    for method in service.DESCRIPTOR.services_by_name["MessagingService"].methods:
        table[f"/{SERVICE_NAME}/{method.name}"] = Method(
            getattr(service, method.input_type.name).FromString, method.client_streaming, method.server_streaming,
            stream_handlers.get(method.name) or getattr(servicer, method.name), batch_handlers.get(method.name))
    return table


def timeout_s(value: str) -> float | None:
    """gRPC's ``grpc-timeout`` (at most 8 digits and a unit) in seconds; None when malformed."""
    if 2 <= len(value) <= 9 and value[:-1].isdigit() and value[-1] in _TIMEOUT_UNITS:
        return int(value[:-1]) * _TIMEOUT_UNITS[value[-1]]
    return None


def headers_of(fields: list[tuple[str, str]]) -> tuple[str, str | None, tuple[tuple[str, str | bytes], ...]]:
    """A call's ``:path`` ("" when none), its ``grpc-timeout`` text (None) and its metadata, in one pass
    over its fields (the first of a repeated pseudo-header or timeout counts)."""
    path, timeout, metadata = None, None, []
    for name, value in fields:
        if name.startswith(":"):
            if name == ":path" and path is None:
                path = value
            continue
        if name in NOT_METADATA:
            if name == "grpc-timeout" and timeout is None:
                timeout = value
            continue
        if name.endswith("-bin"):
            try:
                metadata.append((name, base64.b64decode(value + "=" * (-len(value) % 4))))
            except ValueError:
                continue
        else:
            metadata.append((name, value))
    return path or "", timeout, tuple(metadata)


class Aborted(Exception):
    def __init__(self, code: int, details: str):
        super().__init__(details)
        self.code, self.details = code, details


def split_fields(payload: bytes) -> tuple[list[bytes], list[bytes]]:
    """A HEADERS event's payload (``name NUL value NUL`` ...) split: its parts, and its names alone
    (a name's value is ``parts[2 * names.index(name) + 1]``)."""
    parts = payload.split(b"\0")
    return parts, parts[0:-1:2]


def first_value(parts: list[bytes], names: list[bytes], name: bytes) -> str | None:
    """The first value of field ``name`` (latin-1, as ``fields_of`` reads it), None without one."""
    try:
        return parts[2 * names.index(name) + 1].decode("latin-1")
    except ValueError:
        return None


class CallContext:
    """The part of grpc's ServicerContext the proxy's handlers read (calls.py, access.py, server.py).
    The metadata (``headers_of``) is made from the call's fields when a handler first asks for all of
    it; ``metadata_value`` reads one key without it (``calls.call_of``: every call's x-mq-client-id)."""

    __slots__ = ("_payload", "_parts", "_names", "_metadata", "_peer", "_deadline")

    def __init__(self, payload: bytes, parts: list[bytes], names: list[bytes], peer: str, deadline: float | None):
        self._payload, self._parts, self._names = payload, parts, names
        self._metadata = None
        self._peer, self._deadline = peer, deadline

    def invocation_metadata(self):
        if self._metadata is None:
            self._metadata = headers_of(fields_of(self._payload))[2]
        return self._metadata

    def metadata_value(self, key: str) -> str | None:
        """The first value of a metadata key that is no ``-bin`` one, no pseudo-header and none of
        NOT_METADATA (those are not metadata: None), as ``invocation_metadata`` would give it."""
        if key.startswith(":") or key in NOT_METADATA or key.endswith("-bin"):
            return None
        return first_value(self._parts, self._names, key.encode("latin-1"))

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    async def abort(self, code, details: str = ""):
        raise Aborted(code.value[0], details)


class Call:
    __slots__ = ("stream", "method", "context", "request", "inbox", "task")

    def __init__(self, stream: int, method: Method, context: CallContext):
        self.stream, self.method, self.context = stream, method, context
        self.request: bytes | None = None
        self.inbox: asyncio.Queue | None = None
        self.task: asyncio.Task | None = None


class Connection:
    def __init__(self, door: "NativeDoor", sock: socket.socket, peer: tuple):
        self.door, self.sock, self.fd = door, sock, sock.fileno()
        self.peer = f"ipv4:{peer[0]}:{peer[1]}"
        settings = door.settings
        self.h2 = H2Connection(door.streams_a_connection, settings.max_request_bytes, settings.max_request_bytes * 2)
        self.calls: dict[int, Call] = {}
        self.answers: list[tuple[int, bytes]] = []
        self.flush_scheduled = self.writing = self.paused = False
        self.drained = asyncio.Event()
        self.drained.set()
        door.loop.add_reader(self.fd, self.readable)
        door.loop.call_later(settings.handshake_timeout_ms / 1000, self.check_preface)
        self.flush()   # our SETTINGS and connection window

    def check_preface(self) -> None:
        if self.sock is not None and not self.h2.state()["preface"]:
            self.door.turned_away += 1
            _limited.warning("grpc-native:handshake", "gRPC connection from %s closed: no HTTP/2 preface in %d ms",
                             self.peer, self.door.settings.handshake_timeout_ms)
            self.close()

    # ------------------------------------------------------------ reading

    def readable(self) -> None:
        try:
            data = self.sock.recv(READ_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        if not data:
            self.close()
            return
        events = self.h2.feed(data)
        if events is None:
            self.door.protocol_errors += 1
            _limited.warning("grpc-native:protocol", "gRPC connection from %s closed: %s", self.peer, self.h2.reason)
            self.close()
            return
        unary = []
        try:
            for kind, stream, payload in events:
                if kind == EVENT_MESSAGE:
                    self.on_message(stream, payload)
                elif kind == EVENT_HEADERS:
                    self.on_headers(stream, payload)
                elif kind == EVENT_END:
                    call = self.calls.get(stream)
                    if call is not None:
                        self.on_end(call, unary)
                elif kind == EVENT_RESET:
                    self.on_reset(stream)
        except Exception:   # a bug of ours, not the peer's: that connection ends, the door serves on
            _limited.warning("grpc-native:read", "gRPC connection from %s closed: %s", self.peer,
                             traceback.format_exc(limit=8))
            self.close(error=2)   # INTERNAL_ERROR
            return
        self.start_unary(unary)
        self.flush()

    def on_headers(self, stream: int, payload: bytes) -> None:
        # Only :path and grpc-timeout are read here (the metadata when a handler asks: CallContext).
        parts, names = split_fields(payload)
        path = first_value(parts, names, b":path") or ""
        timeout_text = first_value(parts, names, b"grpc-timeout")
        method = self.door.methods.get(path)
        if method is None:
            self.h2.trailers(stream, UNIMPLEMENTED, f"Method not found: {path[1:]}")
            return
        if self.door.in_flight >= self.door.settings.max_concurrent_rpcs:
            self.h2.trailers(stream, RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded!")
            return
        timeout = None if timeout_text is None else timeout_s(timeout_text)
        deadline = None if timeout is None else time.monotonic() + timeout
        call = Call(stream, method, CallContext(payload, parts, names, self.peer, deadline))
        self.calls[stream] = call
        self.door.in_flight += 1
        if method.client_streaming:
            call.inbox = asyncio.Queue(STREAM_INBOX_MAX + 1)
            call.task = self.door.loop.create_task(self.streaming(call, self.requests(call)))

    def on_message(self, stream: int, payload: bytes) -> None:
        call = self.calls.get(stream)
        if call is None:
            return
        if call.inbox is not None:
            if call.inbox.qsize() >= STREAM_INBOX_MAX:
                self.end(call, RESOURCE_EXHAUSTED, f"more than {STREAM_INBOX_MAX} messages unread on the stream")
            else:
                call.inbox.put_nowait(payload)
        elif call.request is None:
            call.request = payload
        else:
            self.end(call, UNIMPLEMENTED, "a unary call takes one request message")

    def on_end(self, call: Call, unary: list) -> None:
        if call.inbox is not None:
            call.inbox.put_nowait(None)
            return
        if call.request is None:
            self.end(call, INTERNAL, "the request has no message")
            return
        try:
            request = call.method.parse(call.request)
        except DecodeError:
            self.end(call, INTERNAL, "Exception deserializing request!")
            return
        call.request = None
        if call.method.server_streaming:
            call.task = self.door.loop.create_task(self.streaming(call, request))
        else:
            unary.append((call, request))

    def on_reset(self, stream: int) -> None:
        call = self.calls.pop(stream, None)
        if call is not None:
            self.door.in_flight -= 1
            if call.task is not None:
                call.task.cancel()

    async def requests(self, call: Call):
        while True:
            payload = await call.inbox.get()
            if payload is None:
                return
            try:
                yield call.method.parse(payload)
            except DecodeError:
                raise Aborted(INTERNAL, "Exception deserializing request!") from None

    # ------------------------------------------------------------ running the handlers

    def start_unary(self, unary: list) -> None:
        """The read's unary calls, started together: those of an RPC with a batch handler (SendMessage)
        as one task for them all when the read has more than one, the rest a task each."""
        loop = self.door.loop
        batches: dict | None = None
        for call, request in unary:
            if call.method.batch is None:
                call.task = loop.create_task(self.unary(call, request))
            else:
                if batches is None:
                    batches = {}
                batches.setdefault(call.method.batch, []).append((call, request))
        if batches:
            for handler, calls in batches.items():
                if len(calls) == 1:
                    call, request = calls[0]
                    call.task = loop.create_task(self.unary(call, request))
                else:   # no call.task: a client's reset of one call drops its answer, not the batch
                    loop.create_task(self.unary_batch(handler, calls))

    async def unary_batch(self, handler, calls: list) -> None:
        try:
            responses = await handler([request for _, request in calls], [call.context for call, _ in calls])
        except Exception as exc:
            for call, _ in calls:
                self.ended_by(call, exc)
            return
        for (call, _), response in zip(calls, responses):
            if self.calls.pop(call.stream, None) is not None:
                self.door.in_flight -= 1
                # a batch handler may answer with the response's bytes already (proxy/response_wire.py)
                self.answers.append((call.stream, response if type(response) is bytes else
                                     response.SerializeToString()))
        self.flush_soon()

    async def unary(self, call: Call, request) -> None:
        try:
            response = await call.method.handler(request, call.context)
        except Exception as exc:
            self.ended_by(call, exc)
            return
        if self.calls.pop(call.stream, None) is not None:
            self.door.in_flight -= 1
            self.answers.append((call.stream, response.SerializeToString()))
            self.flush_soon()

    async def streaming(self, call: Call, argument) -> None:
        try:
            responses = call.method.handler(argument, call.context)
            if inspect.iscoroutine(responses):   # a handler that only refuses (server.unserved_rpc)
                await responses
            else:
                async for response in responses:
                    if call.stream not in self.calls:
                        return
                    if type(response) is list:   # a run of responses' bytes (stream_handlers): one C call
                        self.h2.messages(call.stream, response)
                    else:
                        self.h2.message(call.stream, response.SerializeToString())
                    self.flush_soon()
                    if self.h2.unsent() > UNSENT_PAUSE_BYTES:
                        self.drained.clear()
                        await self.drained.wait()
        except Exception as exc:
            self.ended_by(call, exc)
            return
        self.end(call, OK, "")

    def ended_by(self, call: Call, exc: Exception) -> None:
        """A handler's refusal (``Aborted``) ends its call with that status; anything else is our bug."""
        if isinstance(exc, Aborted):
            self.end(call, exc.code, exc.details)
        else:
            self.failed(call)

    def failed(self, call: Call) -> None:
        self.door.failed += 1
        _limited.warning("grpc-native:handler", "gRPC call %s failed: %s", call.stream, traceback.format_exc(limit=8))
        self.end(call, UNKNOWN, "Unexpected error")

    def end(self, call: Call, code: int, details: str) -> None:
        if self.calls.pop(call.stream, None) is None:
            return
        self.door.in_flight -= 1
        if call.task is not None and call.task is not asyncio.current_task():
            call.task.cancel()
        self.h2.trailers(call.stream, code, details)
        self.flush_soon()

    # ------------------------------------------------------------ writing

    def flush_soon(self) -> None:
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.door.loop.call_soon(self.flush)

    def flush(self) -> None:
        """The turn's unary answers framed by one C call, and everything pending sent by one ``send``."""
        self.flush_scheduled = False
        if self.sock is None:
            return
        if self.answers:
            self.h2.answers(self.answers)
            self.answers.clear()
        out = self.h2.output()
        size = len(out)
        if not size:
            return
        try:
            sent = self.sock.send(out)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:
            self.close()
            return
        self.h2.sent(sent)
        loop = self.door.loop
        if sent < size:
            if not self.writing:
                self.writing = True
                loop.add_writer(self.fd, self.flush)
            if size - sent > UNSENT_PAUSE_BYTES and not self.paused:
                self.paused = True
                loop.remove_reader(self.fd)
        else:
            if self.writing:
                self.writing = False
                loop.remove_writer(self.fd)
            if self.paused:
                self.paused = False
                loop.add_reader(self.fd, self.readable)
            self.drained.set()

    def close(self, error: int | None = None) -> None:
        if self.sock is None:
            return
        if error is not None:   # our GOAWAY: the client retries what it had in flight elsewhere
            self.h2.goaway(error)
        try:
            out = self.h2.output()
            if len(out):
                self.sock.send(out)
        except OSError:
            pass
        loop = self.door.loop
        loop.remove_reader(self.fd)
        if self.writing:
            loop.remove_writer(self.fd)
        for call in self.calls.values():
            if call.task is not None:
                call.task.cancel()
        self.door.in_flight -= len(self.calls)
        self.calls.clear()
        self.drained.set()
        self.sock.close()
        self.sock = None
        self.door.connections.discard(self)


class NativeDoor:
    """The listening socket, bound to exactly the configured host and port, and its connections."""

    def __init__(self, settings, servicer, loop: asyncio.AbstractEventLoop):
        self.settings, self.loop = settings, loop
        self.methods = method_table(servicer)
        # grpc C-core clients share one connection among their channels to an address: one connection
        # may carry every stream the door takes.
        self.streams_a_connection = settings.max_concurrent_rpcs
        self.connections: set[Connection] = set()
        self.in_flight = self.failed = self.protocol_errors = self.turned_away = 0
        self.listener: socket.socket | None = None

    def start(self) -> str:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((self.settings.host, self.settings.port))
            listener.listen(512)
        except OSError as exc:
            listener.close()
            raise OSError(f"cannot listen on {self.settings.address}: {exc.strerror}") from None
        listener.setblocking(False)
        self.listener = listener
        self.loop.add_reader(listener.fileno(), self.accept)
        return self.settings.address

    def accept(self) -> None:
        for _ in range(ACCEPTS_A_TURN):
            try:
                sock, peer = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:   # EMFILE and the like: the next turn tries again
                _limited.warning("grpc-native:accept", "accept failed: %s", exc)
                return
            if len(self.connections) >= self.settings.max_connections:
                self.turned_away += 1
                _limited.warning("grpc-native:connections", "gRPC connection from %s closed: %d connections open",
                                 peer[0], len(self.connections))
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.connections.add(Connection(self, sock, peer))

    async def stop(self, grace: float | None = None) -> None:
        """Stops taking connections. As grpc.aio's ``stop(grace)``: every connection is told GOAWAY at once
        (RFC 9113's graceful first step: clients open no more streams here), calls in flight get
        ``grace`` seconds to finish; a connection is closed (its final GOAWAY) when its last call ends, or
        when the grace is over."""
        if self.listener is not None:
            self.loop.remove_reader(self.listener.fileno())
            self.listener.close()
            self.listener = None
        for connection in list(self.connections):
            connection.h2.drain()
            connection.flush()
        deadline = time.monotonic() + (grace or 0.0)
        while True:
            for connection in list(self.connections):
                if not connection.calls or time.monotonic() >= deadline:
                    connection.close(error=0)
            if not self.connections:
                return
            # The calls end on this loop; a stop is rare enough to look again every STOP_POLL_S.
            await asyncio.sleep(STOP_POLL_S)
