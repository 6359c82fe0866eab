"""A DEALER connection to a ZeroMQ ROUTER door on the calling thread's own TCP socket (ZMTP 3.1,
NULL mechanism: zmtp_format.py), for sync calls without libzmq's I/O threads.

Through a libzmq socket a request goes from the caller to libzmq's I/O thread and the answer comes
back the same way: two thread wake-ups a call on top of the door's own, ~150 us of a round trip on
this 2-core VM where a plain TCP round trip costs ~30 us (perf/RESULTS.md, "The native door as a
user meets it"). Here the calling thread writes the frames and reads the answer itself.

What libzmq did in the background is done when the connection is used: a door's heartbeat PING is
answered with PONG whenever the connection is read (before each request, and while waiting for an
answer); a door closes a connection that answered no PING for its heartbeat time-out (20 s idle),
and the next call finds it closed and connects again before it sends. A refused connect is retried
every ``CONNECT_RETRY_S`` until the call's deadline, as libzmq reconnects. A connection lost while a
call waits ends that call at once (TransportError) rather than at its time-out.
"""

from __future__ import annotations

import select
import socket
import time

from rocketbox.cluster import zmtp_format as zf

# libzmq's RECONNECT_IVL as the native client tunes it (zmq_transport._tune).
CONNECT_RETRY_S = 0.05
READ_BYTES = 256 * 1024


class ConnectionLost(Exception):
    """The door closed the connection (or it broke)."""


class MechanismRefused(Exception):
    """The door does not take NULL connections (it runs CURVE: access control)."""

    def __init__(self, mechanism: bytes):
        super().__init__(f"the door's mechanism is {mechanism.decode(errors='replace') or 'not NULL'}")
        self.mechanism = mechanism


class HandshakeTimeout(Exception):
    pass


def tcp_address(endpoint: str) -> tuple[str, int] | None:
    """(host, port) of a ``tcp://host:port`` endpoint; None for any other form (libzmq serves those)."""
    if not endpoint.startswith("tcp://"):
        return None
    host, _, port = endpoint[6:].rpartition(":")
    if not host or not port.isdigit() or host == "*" or host.startswith("["):
        return None
    return host, int(port)


class ZmtpConnection:
    """One thread's connection to one door; every method is called by that thread."""

    def __init__(self, sock: socket.socket, frame_bytes_max: int):
        self.sock = sock
        self._reader = zf.FrameReader(frame_bytes_max)
        self._parts: list[bytes] = []
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    @classmethod
    def open(cls, address: tuple[str, int], deadline: float, frame_bytes_max: int,
             retry_refused: bool = True) -> "ZmtpConnection":
        """Connected and past the handshake by ``deadline`` (time.monotonic()), or HandshakeTimeout,
        MechanismRefused, ConnectionLost, zf.ZmtpError; a refused connect is tried again until then
        unless ``retry_refused`` is off."""
        sock = _connect(address, deadline, retry_refused)
        conn = cls(sock, frame_bytes_max)
        try:
            conn._handshake(deadline)
        except BaseException:
            conn.close()
            raise
        return conn

    def _handshake(self, deadline: float) -> None:
        # READY only after the door's greeting, as libzmq does: a CURVE door closes at our greeting,
        # and bytes of ours it never read would turn its close into a reset that loses its greeting.
        self._write(zf.greeting(), deadline)
        greeting = self._reader.take(zf.GREETING_BYTES)
        while greeting is None:
            try:
                self._read_some(deadline, HandshakeTimeout)
            except ConnectionLost:
                # A door whose mechanism is not ours (CURVE) closes at our greeting, before the rest
                # of its own (at most its 10-byte signature came): libzmq's client reports a close
                # during the handshake as a failed handshake too (zmq_transport._refusal_of).
                raise MechanismRefused(b"") from None
            greeting = self._reader.take(zf.GREETING_BYTES)
        _version, mechanism = zf.parse_greeting(greeting)
        if mechanism != zf.NULL_MECHANISM:
            raise MechanismRefused(mechanism)
        self._write(zf.ready(b"DEALER"), deadline)
        while True:
            got = self._reader.next_frame()
            if got is None:
                self._read_some(deadline, HandshakeTimeout)
                continue
            flags, data = got
            if not flags & zf.FLAG_COMMAND:
                raise zf.ZmtpError("a message before the door's READY")
            name, body = zf.parse_command(data)
            if name == b"READY":
                return
            if name == b"ERROR":
                raise ConnectionLost(f"the door refused the handshake: {zf.error_reason(body)}")

    def send(self, parts, deadline: float) -> None:
        self._write(zf.message(parts), deadline)

    def poll_message(self) -> list[bytes] | None:
        """A whole message if one can be read now (PINGs on the way are answered), else None."""
        message = self._next_message()
        if message is not None:
            return message
        try:
            data = self.sock.recv(READ_BYTES)
        except BlockingIOError:
            return None
        except OSError as exc:
            raise ConnectionLost(str(exc)) from None
        if not data:
            raise ConnectionLost("closed by the door")
        self._reader.feed(data)
        return self._next_message()

    def wait_message(self, deadline: float) -> list[bytes] | None:
        """The next whole message, sleeping for it until ``deadline``; None then."""
        while True:
            message = self.poll_message()
            if message is not None:
                return message
            left_ms = int((deadline - time.monotonic()) * 1000)
            if left_ms <= 0 or not self._poll.poll(left_ms):
                if time.monotonic() >= deadline:
                    return None

    def drain(self) -> None:
        """Read what has come since the last call: PINGs answered, late answers dropped;
        ConnectionLost when the door has closed the connection meanwhile."""
        for _ in range(1024):
            if self.poll_message() is None and not self._poll.poll(0):
                return

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def _next_message(self) -> list[bytes] | None:
        reader = self._reader
        while True:
            got = reader.next_frame()
            if got is None:
                return None
            flags, data = got
            if flags & zf.FLAG_COMMAND:
                self._command(data)
                continue
            self._parts.append(data)
            if not flags & zf.FLAG_MORE:
                parts, self._parts = self._parts, []
                return parts

    def _command(self, data: bytes) -> None:
        name, body = zf.parse_command(data)
        if name == b"PING":
            self._write(zf.pong(body), time.monotonic() + 1.0)
        elif name == b"ERROR":
            raise ConnectionLost(f"the door sent ERROR: {zf.error_reason(body)}")
        # PONG, SUBSCRIBE and others mean nothing to a DEALER client.

    def _read_some(self, deadline: float, timeout_error) -> None:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0 or not self._poll.poll(left_ms):
            raise timeout_error("no answer in time")
        try:
            data = self.sock.recv(READ_BYTES)
        except BlockingIOError:
            return
        except OSError as exc:
            raise ConnectionLost(str(exc)) from None
        if not data:
            raise ConnectionLost("closed by the door")
        self._reader.feed(data)

    def _write(self, data: bytes, deadline: float) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise HandshakeTimeout("the door takes no more bytes") from None
                select.select([], [self.sock], [], left)
                continue
            except OSError as exc:
                raise ConnectionLost(str(exc)) from None
            view = view[sent:]


def _connect(address: tuple[str, int], deadline: float, retry_refused: bool) -> socket.socket:
    """A non-blocking TCP socket connected to ``address``; refused connects retried until ``deadline``
    (or not)."""
    while True:
        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        try:
            sock.connect(address)
        except (ConnectionRefusedError, socket.timeout, OSError) as exc:
            sock.close()
            if not retry_refused or time.monotonic() + CONNECT_RETRY_S >= deadline:
                raise HandshakeTimeout(f"no connection: {exc}") from None
            time.sleep(CONNECT_RETRY_S)
            continue
        sock.setblocking(False)
        return sock
