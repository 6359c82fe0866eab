"""A DEALER connection to a ZeroMQ ROUTER door on the calling thread's own TCP socket (ZMTP 3.1,
NULL mechanism: zmtp_format.py, whose ``ClientSession`` reads and writes the protocol; this module
does the I/O), for sync calls without libzmq's I/O threads.

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
        self.session = zf.ClientSession(frame_bytes_max)
        # The hot path's steps, looked up once: bytes go straight to the session's reader, and what the
        # session owes the door (a PONG) is seen by a look at its outgoing buffer (emptied in place).
        self._feed = self.session.reader.feed
        self._next_message = self.session.next_message
        self._request = self.session.request   # open before any request: its frames at once
        self._outgoing = self.session.outgoing
        self._poll = select.poll()
        self._poll.register(sock.fileno(), select.POLLIN)

    @classmethod
    def open(cls, address: tuple[str, int], deadline: float, frame_bytes_max: int,
             retry_refused: bool = True) -> "ZmtpConnection":
        """Connected and past the handshake by ``deadline`` (time.monotonic()), or HandshakeTimeout,
        zf.MechanismRefused, ConnectionLost, zf.ZmtpError; a refused connect is tried again until then
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
        session = self.session
        self._write(session.opening(), deadline)
        while True:
            session.next_message()   # no message comes: a door writes none before our first request
            if self._outgoing:
                self._write(session.take_outgoing(), deadline)
            if session.open:
                return
            try:
                self._read_some(deadline, HandshakeTimeout)
            except ConnectionLost:
                refusal = session.close_refusal()
                if refusal is None:
                    raise
                raise refusal from None

    def send(self, parts, deadline: float) -> None:
        self._write(self._request(parts), deadline)

    def poll_message(self) -> list[bytes] | None:
        """A whole message if one can be read now (PINGs on the way are answered), else None."""
        message = self._next_message()
        if message is None:
            if self._outgoing:
                self._send_outgoing()
            try:
                data = self.sock.recv(READ_BYTES)
            except BlockingIOError:
                return None
            except OSError as exc:
                raise ConnectionLost(str(exc)) from None
            if not data:
                raise ConnectionLost("closed by the door")
            self._feed(data)
            message = self._next_message()
        if self._outgoing:
            self._send_outgoing()
        return message

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

    def _send_outgoing(self) -> None:
        """What the session owes the door (PONGs) written now."""
        self._write(self.session.take_outgoing(), time.monotonic() + 1.0)

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
        self._feed(data)

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
