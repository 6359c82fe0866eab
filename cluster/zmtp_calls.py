"""Sync calls and one-way requests of the native client over its own ZMTP connections
(zmtp_client.py), one per endpoint and calling thread: what ``zmq_transport.RpcClient.call`` does
through a libzmq DEALER, with the same answers and errors, and no libzmq I/O thread on the way."""

from __future__ import annotations

import logging
import time

from rocketbox.cluster.acl.curve import handshake_refusal
from rocketbox.cluster.client_transport import AccessRefused, RequestTimeout, TransportError, decode_response
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.spin_wait import SpinWait
from rocketbox.cluster.wire_format import Command, to_frames
from rocketbox.cluster.zmtp_client import ConnectionLost, HandshakeTimeout, ZmtpConnection
from rocketbox.cluster.zmtp_format import MechanismRefused, ZmtpError

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# A door's answer larger than this is refused as garbage (the broker's own frame bound is 64 MiB).
ANSWER_FRAME_BYTES_MAX = 1024 * 1024 * 1024
ONEWAY_WRITE_S = 1.0


class DirectCalls:
    """The calling thread's ZMTP connections (``connections``: endpoint -> ZmtpConnection, a table
    of that thread's own, ``ClientTransport._thread_table``), and the calls made on them."""

    def __init__(self, connections: dict, spin: SpinWait):
        self.connections = connections
        self.spin = spin

    def call(self, endpoint: str, address: tuple[str, int], request: Command, timeout_ms: int,
             deadline: float) -> Command:
        conn = self._connection(endpoint, address, deadline, timeout_ms)
        try:
            conn.send(to_frames(request), deadline)
            sent_at = time.monotonic()
            # Poll first (spin_wait.py), then sleep: once per call, late answers to earlier calls aside.
            ready = self.spin.poll(conn.poll_message, deadline)
            while True:
                parts = ready if ready is not None else conn.wait_message(deadline)
                ready = None
                if parts is None:
                    # A late answer would confuse the next call on this connection: start afresh.
                    self.drop(endpoint)
                    raise RequestTimeout(f"no answer from {endpoint} to request code {request.code} "
                                         f"within {timeout_ms} ms")
                response = decode_response(parts)
                if response is not None and response.opaque == request.opaque:
                    self.spin.answered(time.monotonic() - sent_at)
                    return response
        except (ConnectionLost, HandshakeTimeout, ZmtpError) as exc:
            self.drop(endpoint)
            raise TransportError(f"connection to {endpoint} lost: {exc}") from None

    def oneway(self, endpoint: str, address: tuple[str, int], request: Command) -> None:
        """Best effort, as a one-way request is: not sent when no connection can be made at once."""
        try:
            conn = self._connection(endpoint, address, time.monotonic() + ONEWAY_WRITE_S, int(ONEWAY_WRITE_S * 1000))
            conn.send(to_frames(request), time.monotonic() + ONEWAY_WRITE_S)
        except (TransportError, ConnectionLost, HandshakeTimeout, ZmtpError) as exc:
            self.drop(endpoint)
            _limited.warning(f"oneway:{endpoint}", "a one-way request to %s was not sent: %s", endpoint, exc)

    def _connection(self, endpoint: str, address: tuple[str, int], deadline: float,
                    timeout_ms: int) -> ZmtpConnection:
        """This thread's connection to ``endpoint``, what came since its last call read (a door's
        PING answered), made afresh when the door had closed it."""
        conn = self.connections.get(endpoint)
        if conn is not None:
            try:
                conn.drain()
                return conn
            except (ConnectionLost, ZmtpError, HandshakeTimeout):
                self.drop(endpoint)
        try:
            conn = ZmtpConnection.open(address, deadline, ANSWER_FRAME_BYTES_MAX)
        except MechanismRefused as exc:
            # A CURVE door (access control) and no keys here: as zmq_transport says it.
            raise AccessRefused(handshake_refusal(endpoint, True, False)) from None
        except HandshakeTimeout:
            raise TransportError(f"{endpoint} is not reachable (no connection within {timeout_ms} ms)") from None
        except (ConnectionLost, ZmtpError) as exc:
            raise TransportError(f"cannot connect to {endpoint!r}: {exc}") from None
        self.connections[endpoint] = conn
        return conn

    def drop(self, endpoint: str) -> None:
        conn = self.connections.pop(endpoint, None)
        if conn is not None:
            conn.close()

    def close_all(self) -> None:
        for endpoint in list(self.connections):
            self.drop(endpoint)
