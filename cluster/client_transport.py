"""What both clients' transports share (ZeroMQ in zmq_transport.py, remoting TCP in
remoting_client.py): sync calls on the calling thread's own connections, one I/O thread for
asynchronous requests, and the handlers of requests a server sends to the client."""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from concurrent.futures import Future
from typing import Callable

from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.request_dispatch import PendingCalls
from rocketbox.cluster.spin_wait import SpinWait
from rocketbox.cluster.wire_format import Command, FrameError, from_frames, next_opaque

log = logging.getLogger(__name__)


class TransportError(Exception):
    """The peer could not be reached or did not answer in time."""


class RequestTimeout(TransportError):
    pass


class AccessRefused(TransportError):
    """A door refused this client for access control before any request could be answered (the
    native door's CURVE handshake: no keys, keys of another cluster, or keys where it takes none).
    A TransportError, so callers that try the next NameServer or broker still do; the reason says
    what to give instead."""


class ClientTransport:
    """The base of both clients' transports: the calling thread's own connections for sync calls,
    one I/O thread for the rest, made on first use and again in a forked child, and the handlers of
    requests a server sends."""

    def __init__(self, default_timeout_ms: int = 3000, spin_max_s: float = 0.0):
        self.default_timeout_ms = default_timeout_ms
        self.spin = SpinWait(spin_max_s)
        self._local = threading.local()
        self._io = None
        self._io_lock = threading.Lock()
        self._closed = False
        # request code -> callback(Command), for requests a server sends on our connections.
        self.server_request_handlers: dict[int, Callable[[Command], None]] = {}

    def _new_io_thread(self):
        raise NotImplementedError

    def _io_thread(self):
        if self._closed:
            raise TransportError("client is closed")
        io = self._io
        if io is None or io.pid != os.getpid():
            with self._io_lock:
                if self._io is None or self._io.pid != os.getpid():
                    self._io = self._new_io_thread()
                io = self._io
        return io

    def _thread_connections(self) -> dict:
        """The calling thread's connections in this process, by endpoint (a forked child starts afresh)."""
        return self._thread_table("connections")

    def _thread_table(self, name: str) -> dict:
        """The calling thread's table ``name`` in this process (empty again in a forked child)."""
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            local.pid = os.getpid()
            local.tables = {}
        return local.tables.setdefault(name, {})

    def _begin_call(self, request: Command, timeout_ms: int | None) -> tuple[int, float]:
        """A sync call's time-out and deadline; the request gets its opaque."""
        if self._closed:
            raise TransportError("client is closed")
        timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        request.opaque = next_opaque()
        return timeout_ms, time.monotonic() + timeout_ms / 1000

    def call_async(self, endpoint: str, request: Command, timeout_ms: int | None = None,
                   on_done: Callable[[Future], None] | None = None) -> Future:
        """A future resolved with the response Command, or with a TransportError. ``on_done(future)``
        is attached before the request goes out, so the I/O thread that resolves the future runs it
        (attached afterwards, a quick answer would run it at once on the calling thread)."""
        future: Future = Future()
        if on_done is not None:
            future.add_done_callback(on_done)
        self.call_into(endpoint, request, future, timeout_ms)
        return future

    def call_into(self, endpoint: str, request: Command, outcome, timeout_ms: int | None = None) -> None:
        """``request`` sent; the I/O thread settles ``outcome`` (anything with ``done()``,
        ``set_result(response)`` and ``set_exception(error)``, which it calls once, on its own thread):
        a caller with its own hand-off spares a concurrent Future's lock and condition a call."""
        timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        request.opaque = next_opaque()
        self._io_thread().submit(endpoint, request, outcome, time.monotonic() + timeout_ms / 1000)

    def _stop_io_thread(self) -> None:
        self._closed = True
        if self._io is not None and self._io.pid == os.getpid():
            self._io.stop()


# A server's "are you still connected?" to a client (zmq_transport.RpcServer.reachable): one empty
# frame, which the client drops unread.
PROBE_FRAMES = [b""]


def decode_response(frames) -> Command | None:
    """A native door's message to a client as a Command; None for a probe or a malformed one (logged)."""
    if frames == PROBE_FRAMES:
        return None
    try:
        return from_frames(frames)
    except FrameError as exc:
        log.warning("dropped a malformed response: %s", exc)
        return None


def serve_server_request(handlers: dict, request: Command) -> Command | None:
    """A request a server sent to this client (NOTIFY_CONSUMER_IDS_CHANGED, ...) to its handler, if
    any; the answer to send back when the server waits for one (a handler's Command, or an error)."""
    handler = handlers.get(request.code)
    answer = None
    if handler is None:
        log.debug("ignored request code %d from a server", request.code)
        answer = request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                  remark=f"request code {request.code} is not supported by this client")
    else:
        try:
            answer = handler(request)
        except Exception as exc:
            log.exception("handler of server request %d failed", request.code)
            answer = request.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")
    return answer if isinstance(answer, Command) and not request.is_oneway else None


# An I/O thread with calls in flight looks at its queue and their deadlines at least this often.
IO_WAIT_S_MAX = 0.2
# An idle one (nothing in flight, nothing submitted: a submit wakes it through its pipe) sleeps this
# long at most. Every wake takes the GIL: a broker's NameServer client thread woken 5 times a second
# for nothing took it from the broker's loop, and on a loaded machine (load 17 on 2 cores) the loop
# then waited 60-160 ms for the thread to be scheduled and hand it back (sends were refused
# TIMEOUT_CLEAN_QUEUE at 2,000 msg/s).
IO_IDLE_WAIT_S = 5.0


class IoThreadBase:
    """One thread owning the connections of a client's asynchronous requests: a queue of submitted
    ``(endpoint, request, future, deadline)`` and a pipe that wakes it. Subclasses poll in ``_run``
    and clear ``_wake_pending`` before they drain ``_submitted``."""

    THREAD_NAME = "rpc-io"

    def __init__(self, server_request_handlers: dict | None = None):
        self.pid = os.getpid()
        self._server_request_handlers = server_request_handlers if server_request_handlers is not None else {}
        self._submitted: collections.deque = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        self._stopping = False
        # The calls sent and not yet answered (only this thread touches it).
        self._pending = PendingCalls()
        # Set by submitters when they wake the thread, cleared by the thread before it drains
        # the queue: requests submitted after the clear write the pipe again, none is stranded.
        self._wake_pending = False
        self._thread = threading.Thread(target=self._run, name=self.THREAD_NAME, daemon=True)
        self._thread.start()

    def submit(self, endpoint, request, future, deadline) -> None:
        self._submitted.append((endpoint, request, future, deadline))
        if self._wake_pending or threading.get_ident() == self._thread.ident:
            # The thread drains the queue before it sleeps again (``_wait_s``): no syscall needed.
            # From the thread itself (a push consumer's next pull, issued in the answer's callback)
            # the pipe would only have woken it for nothing once more.
            return
        self._wake_pending = True
        try:
            os.write(self._wake_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def stop(self) -> None:
        self._stopping = True
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass
        if threading.current_thread() is not self._thread:
            # From the thread itself (a listener run on it, consume_threads=0, shutting its consumer
            # down) the loop ends once the callback returns.
            self._thread.join(timeout=2)

    def _drain_wake_pipe(self) -> None:
        try:
            os.read(self._wake_r, 4096)
        except BlockingIOError:
            pass

    def _wait_s(self) -> float:
        """How long the thread may wait for events: not at all while submitted requests wait."""
        if self._submitted:
            return 0.0
        if not len(self._pending):
            return IO_IDLE_WAIT_S
        return self._pending.seconds_to_next(time.monotonic(), IO_WAIT_S_MAX)

    def _expire_due(self) -> None:
        self._pending.expire(time.monotonic(), lambda _endpoint: RequestTimeout("no answer within the time-out"))

    def _serve_request(self, request: Command) -> Command | None:
        return serve_server_request(self._server_request_handlers, request)

    def _run(self) -> None:
        raise NotImplementedError
