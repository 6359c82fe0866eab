"""Moves commands over ZeroMQ. Knows frames, peers and time-outs; nothing of topics.

Server side: ``EventLoop`` (``event_loop.py``: one thread: sockets, timers, a stop flag) and
``RpcServer`` (a ROUTER socket; each request becomes a ``Command`` plus a ``Reply``
that may be used at once or later, which is how long polling and group commit park a
request). Client side: ``RpcClient`` with ``call`` (blocking, on a socket owned by the
calling thread, the lowest-latency path), ``call_async`` (a future, served by one I/O
thread) and ``oneway``; what it shares with the remoting client is in ``client_transport.py``.

Fork safety: every object remembers the pid that made its context; after ``fork`` the
child builds a fresh context and sockets on first use and never touches the parent's.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Callable

import zmq

from rocketbox.cluster.acl.curve import (ClientKeys, KeyPair, effective_client_keys, handshake_refusal, secure_client,
                                         secure_server)
from rocketbox.cluster.client_transport import (PROBE_FRAMES, AccessRefused, ClientTransport, IoThreadBase,
                                                RequestTimeout, TransportError, decode_response)
from rocketbox.cluster.event_loop import EventLoop
from rocketbox.cluster.fast_failure import DoorBacklog
from rocketbox.cluster.loop_stalls import empty_as_of
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.request_dispatch import Handler, PendingCalls, dispatch, settle
from rocketbox.cluster.zmq_frames import NOBLOCK, readable, recv_parts, send_parts
from rocketbox.cluster.zmtp_calls import DirectCalls
from rocketbox.cluster.zmtp_client import tcp_address
from rocketbox.cluster.zmtp_io import DirectIoThread
from rocketbox.cluster.wire_format import (FLAG_ONEWAY, FLAG_RESPONSE, Command, FrameError, from_frames,
                                           next_opaque, to_frames)

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# Requests a door with fast failure reads ahead of serving them (RocketMQ's send queue capacity).
READ_AHEAD_MAX = 10_000
# Zero-copy sends cost more than a memcpy below this size (pyzmq's own measurements).
ZERO_COPY_BYTES_MIN = 64 * 1024
# A request door's bounds on connections before and between whole frames (ZeroMQ keeps no table
# of them and no budget across them; the remoting door, remoting_admission.py, has both): a
# connection that has not finished the ZMTP handshake (with CURVE: been admitted by ZAP) this long
# after it was accepted is closed, silent ones included (ZeroMQ's default is 30 s); every
# connection is sent a PING this often, and one from which no whole frame (a PONG, a request)
# arrives within as long after it is closed: a half frame, held or dripping, lives at most twice
# this, and its buffer (up to the door's frame limit, MAXMSGSIZE) goes with it.
HANDSHAKE_TIMEOUT_MS = 10_000
HEARTBEAT_MS = 10_000
# Connections the kernel completes before the door accepts them (ZeroMQ's default is 100; the remoting
# door's listen backlog is as large): past it a client's connect waits for SYN retransmits, seconds.
ACCEPT_BACKLOG = 1024


def _send(sock: zmq.Socket, frames: list, flags: int = 0) -> None:
    send_parts(sock, frames, flags, len(frames[-1]) < ZERO_COPY_BYTES_MIN)


def _tune(sock: zmq.Socket) -> None:
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RECONNECT_IVL, 50)
    sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
    sock.setsockopt(zmq.SNDHWM, 100_000)
    sock.setsockopt(zmq.RCVHWM, 100_000)


class _ContextHolder:
    """A ZeroMQ context that is rebuilt in a forked child instead of being shared."""

    def __init__(self):
        self._pid = -1
        self._context: zmq.Context | None = None
        self._lock = threading.Lock()

    def get(self) -> zmq.Context:
        pid = os.getpid()
        if self._pid != pid:
            with self._lock:
                if self._pid != pid:
                    # The parent's context is not usable after fork; never term() it here.
                    self._context = zmq.Context()
                    self._pid = pid
        return self._context


CONTEXT = _ContextHolder()


# ---------------------------------------------------------------- server side

class Reply:
    """Answers one request, now or later, exactly once."""

    __slots__ = ("_server", "peer", "_opaque", "_oneway", "done")

    def __init__(self, server: "RpcServer", peer: bytes, opaque: int, oneway: bool):
        self._server = server
        self.peer = peer
        self._opaque = opaque
        self._oneway = oneway
        self.done = False

    def __call__(self, response: Command) -> None:
        if self.done:
            return
        self.done = True
        if self._oneway:
            return
        response.opaque = self._opaque
        response.flag |= FLAG_RESPONSE
        self._deliver(response)

    def _deliver(self, response: Command) -> None:
        self._server.send(self.peer, response)


class RpcServer:
    """A ROUTER socket dispatching requests to handlers by request code."""

    def __init__(self, endpoint: str, handlers: dict[int, Handler], *, name: str,
                 drain_max: int = 512, frame_bytes_max: int = 64 * 1024 * 1024, curve: KeyPair | None = None,
                 wait_bounds=None, rcvhwm: int | None = None):
        """``wait_bounds`` (``fast_failure.WaitBounds``): answer SYSTEM_BUSY to requests that waited
        longer; ``rcvhwm``: requests held unread per connection (ZeroMQ then stops reading it)."""
        self.name = name
        self.handlers = handlers
        self.drain_max = drain_max
        self.socket = CONTEXT.get().socket(zmq.ROUTER)
        self.curve = curve is not None   # CURVE (acl/zap.py bound first): requests carry their client's key
        if curve is not None:
            secure_server(self.socket, curve, "door")
        _tune(self.socket)
        if rcvhwm is not None:
            self.socket.setsockopt(zmq.RCVHWM, rcvhwm)
        # A larger frame drops that peer's connection inside libzmq, before it is buffered:
        # size checks after a multi-GB frame arrived would come too late.
        self.socket.setsockopt(zmq.MAXMSGSIZE, frame_bytes_max)
        self.socket.setsockopt(zmq.HANDSHAKE_IVL, HANDSHAKE_TIMEOUT_MS)
        self.socket.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_MS)
        self.socket.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_MS)
        self.socket.setsockopt(zmq.BACKLOG, ACCEPT_BACKLOG)
        # A send to a peer whose connection is gone raises instead of vanishing: ``reachable`` rests on it.
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.socket.bind(endpoint)
        self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.requests_served = 0
        self.malformed_frames = 0
        self._monitor: zmq.Socket | None = None
        self.peer_calls = PendingCalls()
        self.backlog = DoorBacklog(self.socket, wait_bounds, name) if wait_bounds is not None else None
        self._read_ahead: collections.deque = collections.deque()

    def attach(self, loop: EventLoop) -> None:
        self._loop = loop
        loop.add_reader(self.socket, self.on_readable if self.backlog is None else self._on_readable_timed)
        if self.backlog is not None:
            loop.watch_backlog(self.backlog)
        loop.call_every(1.0, lambda: self.peer_calls.expire(
            time.monotonic(), lambda _peer: TimeoutError("the client did not answer in time")))

    def call_peer(self, peer: bytes, cmd: Command, on_answer, timeout_s: float) -> None:
        """A request to client ``peer`` whose answer (an exception: none within ``timeout_s``) goes
        to ``on_answer``."""
        cmd.opaque = next_opaque()
        self.peer_calls.add(cmd.opaque, peer, time.monotonic() + timeout_s, on_answer)
        self.send(peer, cmd)

    def send(self, peer: bytes, cmd: Command) -> None:
        self._send_frames([peer, *to_frames(cmd)])

    def _send_frames(self, frames: list) -> None:
        try:
            _send(self.socket, frames, NOBLOCK)
        except zmq.Again:
            _limited.warning(f"unread:{self.name}", "%s: dropped a response to a peer that is not reading", self.name)
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:
                raise
            log.debug("%s: dropped a response to a peer that disconnected", self.name)

    def reachable(self, peer: bytes) -> bool:
        """Whether ``peer``'s connection is still open (sends it an empty probe frame)."""
        try:
            self.socket.send_multipart([peer, *PROBE_FRAMES], zmq.NOBLOCK)
        except zmq.Again:
            return True   # connected, but not reading now
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:
                raise
            return False
        return True

    def watch_disconnects(self, loop: "EventLoop", on_disconnect: Callable[[], None]) -> None:
        """Call ``on_disconnect()`` on the loop whenever a peer's connection closes (which peer,
        ZeroMQ does not say: ask ``reachable``)."""
        monitor = self._monitor = self.socket.get_monitor_socket(zmq.EVENT_DISCONNECTED)

        def on_event() -> None:
            if _disconnected(monitor):
                on_disconnect()

        loop.add_reader(monitor, on_event)

    def on_readable(self) -> None:
        sock = self.socket
        # Ask the socket whether more is queued rather than letting recv raise zmq.Again:
        # an exception per drained turn showed up in profiles.
        for _ in range(self.drain_max):
            if not readable(sock):
                return
            self._dispatch(recv_parts(sock, 0, False))

    def _on_readable_timed(self) -> None:
        """With fast failure: read everything unread (up to READ_AHEAD_MAX), each request marked with
        the last time the socket was empty, which it arrived after; then serve up to ``drain_max`` of
        them, answering SYSTEM_BUSY at once to those that may have waited past their bound."""
        sock, backlog, ahead = self.socket, self.backlog, self._read_ahead
        since = backlog.drained_at
        while len(ahead) < READ_AHEAD_MAX:
            checked_at = time.monotonic()
            if readable(sock):
                ahead.append((recv_parts(sock, 0, False), since))
                continue
            checked_at, found = empty_as_of(checked_at, lambda: readable(sock))
            if found:
                continue
            backlog.drained(checked_at)
            break
        now = time.monotonic()
        for _ in range(min(self.drain_max, len(ahead))):
            frames, since = ahead.popleft()
            if len(frames) > 1 and backlog.late(since, now):
                refused, answer = backlog.refuse_native(frames[1].buffer, since, now, len(ahead) + 1)
                if refused:
                    if answer is not None:
                        self._send_frames([frames[0].bytes, answer, b""])
                    continue
            self._dispatch(frames)
            now = time.monotonic()   # serving took time; a refusal next to nothing
        if ahead:
            self._loop.again(self._on_readable_timed)

    def _dispatch(self, frames) -> None:
        peer = frames[0].bytes
        try:
            request = from_frames(frames[1:])
        except FrameError as exc:
            self.malformed_frames += 1
            _limited.warning(f"malformed:{self.name}", "%s: malformed frame from peer %s: %s", self.name,
                             peer.hex(), exc)
            self.send(peer, Command(ResponseCode.SYSTEM_ERROR, {}, b"", 0, FLAG_RESPONSE,
                                    f"malformed frame: {exc}"))
            return
        if request.is_response:
            self.peer_calls.answer(request)   # a client answering our call_peer
            return
        self.requests_served += 1
        try:
            request.peer_address = frames[1].get("Peer-Address")
            if self.curve:
                request.curve_key = frames[1].get("User-Id")
        except (zmq.ZMQError, AttributeError):
            pass  # not a TCP peer (IPC): no address
        reply = Reply(self, peer, request.opaque, request.is_oneway)
        dispatch(self.handlers, request, reply, self.name)

    def notify(self, peer: bytes, cmd: Command) -> None:
        """A one-way request from server to client (RocketMQ's broker -> client calls)."""
        cmd.flag |= FLAG_ONEWAY
        cmd.opaque = next_opaque()
        self.send(peer, cmd)

    def close(self) -> None:
        if self._monitor is not None:
            self.socket.disable_monitor()
            self._monitor.close(0)
        self.socket.close(0)


# ---------------------------------------------------------------- client side

class RpcClient(ClientTransport):
    """Requests to many endpoints over ZeroMQ; thread-safe and fork-safe."""

    def __init__(self, default_timeout_ms: int = 3000, curve: ClientKeys | None = None, spin_max_s: float = 0.0,
                 direct_sync: bool = False):
        """``direct_sync``: without CURVE keys, sync calls to a ``tcp://`` door speak ZMTP on the calling
        thread's own socket (zmtp_calls.py) and asynchronous ones on the I/O thread's (zmtp_io.py), with
        no libzmq I/O thread on their way: two thread wake-ups fewer a round trip."""
        super().__init__(default_timeout_ms, spin_max_s)
        self.curve = curve   # None: the process's keys, if any (acl/curve.py)
        self.direct_sync = direct_sync

    def _new_io_thread(self) -> IoThreadBase:
        if self.direct_sync and effective_client_keys(self.curve) is None:
            return DirectIoThread(self.server_request_handlers)
        return _IoThread(self.server_request_handlers, self.curve)

    def _thread_monitors(self) -> dict:
        """The handshake monitor of each of the calling thread's sockets, by endpoint."""
        return self._thread_table("monitors")

    # Sockets owned by the calling thread: no hand-off between threads on the sync path.
    def _thread_socket(self, endpoint: str) -> zmq.Socket:
        sockets = self._thread_connections()
        sock = sockets.get(endpoint)
        if sock is None:
            sock = CONTEXT.get().socket(zmq.DEALER)
            _tune(sock)
            secure_client(sock, self.curve)
            sock.setsockopt(zmq.IMMEDIATE, 1)
            # A refused handshake (access control) is told at once, not as a time-out (_send_once_connected).
            monitor = sock.get_monitor_socket(HANDSHAKE_EVENTS)
            try:
                sock.connect(endpoint)
            except zmq.ZMQError as exc:
                sock.disable_monitor()
                monitor.close(0)
                sock.close(0)
                raise TransportError(f"cannot connect to {endpoint!r}: {exc}") from None
            sockets[endpoint] = sock
            self._thread_monitors()[endpoint] = monitor
        return sock

    def _drop_thread_socket(self, endpoint: str) -> None:
        sock = self._thread_connections().pop(endpoint, None)
        monitor = self._thread_monitors().pop(endpoint, None)
        if monitor is not None:
            sock.disable_monitor()
            monitor.close(0)
        if sock is not None:
            sock.close(0)

    def _send_once_connected(self, endpoint: str, sock: zmq.Socket, frames: list, deadline: float,
                             timeout_ms: int) -> None:
        """Send ``frames`` once ``sock`` has a connection (IMMEDIATE: none until its handshake is
        done): TransportError at ``deadline``, AccessRefused as soon as the door refuses the handshake."""
        monitor = self._thread_monitors().get(endpoint)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLOUT)
        if monitor is not None:
            poller.register(monitor, zmq.POLLIN)
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0:
                self._drop_thread_socket(endpoint)
                raise TransportError(f"{endpoint} is not reachable (no connection within {timeout_ms} ms)")
            ready = dict(poller.poll(left_ms))
            if monitor in ready:
                refusal = _handshake_refusal(monitor, endpoint, self.curve)
                if refusal:
                    self._drop_thread_socket(endpoint)
                    raise AccessRefused(refusal)
            if sock in ready:
                try:
                    _send(sock, frames, NOBLOCK)
                    return
                except zmq.Again:
                    continue

    def call(self, endpoint: str, request: Command, timeout_ms: int | None = None) -> Command:
        """Send and wait for the answer; RequestTimeout when none comes in time."""
        timeout_ms, deadline = self._begin_call(request, timeout_ms)
        if self.direct_sync and effective_client_keys(self.curve) is None:
            address = tcp_address(endpoint)
            if address is not None:
                return self._direct.call(endpoint, address, request, timeout_ms, deadline)
        sock = self._thread_socket(endpoint)
        frames = to_frames(request)
        try:
            _send(sock, frames, NOBLOCK)
        except zmq.Again:
            self._send_once_connected(endpoint, sock, frames, deadline, timeout_ms)
        sent_at = time.monotonic()
        # Poll first (spin_wait.py), then sleep: once per call, late answers to earlier calls aside.
        ready = self.spin.poll(lambda: readable(sock) or None, deadline)
        while True:
            left_ms = int((deadline - time.monotonic()) * 1000)
            if not ready and (left_ms <= 0 or not sock.poll(left_ms, zmq.POLLIN)):
                # A late answer would confuse the next call on this socket: start afresh.
                self._drop_thread_socket(endpoint)
                raise RequestTimeout(f"no answer from {endpoint} to request code {request.code} "
                                     f"within {timeout_ms} ms")
            ready = None
            response = decode_response(recv_parts(sock))
            if response is not None and response.opaque == request.opaque:
                self.spin.answered(time.monotonic() - sent_at)
                return response

    def oneway(self, endpoint: str, request: Command) -> None:
        request.opaque = next_opaque()
        request.flag |= FLAG_ONEWAY
        if self.direct_sync and effective_client_keys(self.curve) is None:
            address = tcp_address(endpoint)
            if address is not None:
                self._direct.oneway(endpoint, address, request)
                return
        sock = self._thread_socket(endpoint)
        sock.setsockopt(zmq.SNDTIMEO, 0)
        try:
            _send(sock, to_frames(request))
        except zmq.Again:
            pass  # one-way means best effort

    @property
    def _direct(self) -> "DirectCalls":
        return DirectCalls(self._thread_table("zmtp"), self.spin)

    def close(self) -> None:
        self._stop_io_thread()
        for endpoint in list(self._thread_connections()):
            self._drop_thread_socket(endpoint)
        self._direct.close_all()


def _monitor_events(monitor: zmq.Socket) -> list[tuple[int, int]]:
    """Drain a monitor socket: its (event, value) pairs, oldest first."""
    events = []
    while monitor.get(zmq.EVENTS) & zmq.POLLIN:
        frames = monitor.recv_multipart(zmq.NOBLOCK)
        events.append((int.from_bytes(frames[0][:2], "little"), int.from_bytes(frames[0][2:6], "little")))
    return events


def _disconnected(monitor: zmq.Socket) -> bool:
    """Drain a monitor socket; True if it reported a dropped connection."""
    return any(event == zmq.EVENT_DISCONNECTED for event, _ in _monitor_events(monitor))


HANDSHAKE_FAILED = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | \
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
HANDSHAKE_EVENTS = HANDSHAKE_FAILED | zmq.EVENT_HANDSHAKE_SUCCEEDED


def _refusal_of(events, endpoint: str, keys: ClientKeys | None) -> str | None:
    """Why the door at ``endpoint`` refused the handshake, if the last handshake event says so."""
    handshakes = [(event, value) for event, value in events if event & HANDSHAKE_EVENTS]
    if not handshakes or not handshakes[-1][0] & HANDSHAKE_FAILED:
        return None
    event, value = handshakes[-1]
    mismatch = event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
    return handshake_refusal(endpoint, mismatch, effective_client_keys(keys) is not None)


def _handshake_refusal(monitor: zmq.Socket, endpoint: str, keys: ClientKeys | None) -> str | None:
    return _refusal_of(_monitor_events(monitor), endpoint, keys)


class _IoThread(IoThreadBase):
    """The ZeroMQ client's I/O thread: DEALER sockets, one per endpoint."""

    def __init__(self, server_request_handlers: dict, curve: ClientKeys | None):
        self.curve = curve   # set before the base class starts the thread
        super().__init__(server_request_handlers)

    def _run(self) -> None:
        context = CONTEXT.get()
        sockets: dict[str, zmq.Socket] = {}
        # A monitor per endpoint: when a server's connection drops (it died or restarted),
        # its requests fail at once instead of waiting out their time-outs (RocketMQ's
        # failFast on a closed channel). A parked long poll is otherwise lost for its whole wait.
        monitors: dict[zmq.Socket, str] = {}
        pending = self._pending
        poller = zmq.Poller()
        poller.register(self._wake_r, zmq.POLLIN)
        while not self._stopping:
            wait_s = self._wait_s()
            for sock, _ in poller.poll(int(wait_s * 1000) + 1 if wait_s else 0):
                if sock == self._wake_r:
                    self._drain_wake_pipe()
                    continue
                if sock in monitors:
                    events = _monitor_events(sock)
                    refusal = _refusal_of(events, monitors[sock], self.curve)
                    if refusal:
                        pending.fail_key(monitors[sock], AccessRefused(refusal))
                    elif any(event == zmq.EVENT_DISCONNECTED for event, _ in events):
                        pending.fail_key(monitors[sock], TransportError(f"connection to {monitors[sock]} lost"))
                    continue
                for _ in range(1024):
                    if not readable(sock):
                        break
                    response = decode_response(recv_parts(sock))
                    if response is None:
                        continue
                    if not response.is_response:
                        answer = self._serve_request(response)
                        if answer is not None:
                            _send(sock, to_frames(answer), NOBLOCK)
                        continue
                    pending.answer(response)
            self._wake_pending = False
            while self._submitted:
                endpoint, request, future, deadline = self._submitted.popleft()
                sock = sockets.get(endpoint)
                if sock is None:
                    sock = context.socket(zmq.DEALER)
                    _tune(sock)
                    secure_client(sock, self.curve)
                    try:
                        sock.connect(endpoint)
                    except zmq.ZMQError as exc:
                        sock.close(0)
                        future.set_exception(TransportError(f"cannot connect to {endpoint!r}: {exc}"))
                        continue
                    sockets[endpoint] = sock
                    poller.register(sock, zmq.POLLIN)
                    monitor = sock.get_monitor_socket(zmq.EVENT_DISCONNECTED | HANDSHAKE_FAILED)
                    monitors[monitor] = endpoint
                    poller.register(monitor, zmq.POLLIN)
                try:
                    _send(sock, to_frames(request), zmq.NOBLOCK)
                except zmq.Again:
                    future.set_exception(TransportError(f"{endpoint}: send queue is full"))
                    continue
                except zmq.ZMQError as exc:
                    future.set_exception(TransportError(f"{endpoint}: {exc}"))
                    continue
                pending.add(request.opaque, endpoint, deadline, settle(future))
            self._expire_due()
        pending.fail_all(TransportError("client is closed"))
        for monitor in monitors:
            monitor.close(0)
        for sock in sockets.values():
            sock.close(0)
        os.close(self._wake_r)
        os.close(self._wake_w)
