"""The native client's I/O thread on its own ZMTP connections (zmtp_client.py): asynchronous
requests (a push consumer's pulls, ``send_async``, heartbeats) and the requests a door sends back,
with no libzmq I/O thread between the door's bytes and this thread.

Through libzmq an answer woke libzmq's I/O thread, which woke this one: two thread wake-ups where
one does (perf/RESULTS.md, "The native door as a user meets it"). Same contract as the libzmq I/O
thread (zmq_transport._IoThread): a connection per endpoint, made on first use; a lost connection
fails its calls at once; answers settle their futures by opaque; a door's requests go to the
client's handlers. One difference: a door that refuses the connection fails the request at once
(as the remoting client's I/O thread does) instead of at its deadline.
"""

from __future__ import annotations

import os
import selectors
import time

from rocketbox.cluster.acl.curve import handshake_refusal
from rocketbox.cluster.client_transport import AccessRefused, IoThreadBase, TransportError, decode_response
from rocketbox.cluster.request_dispatch import settle
from rocketbox.cluster.wire_format import to_frames
from rocketbox.cluster.zmtp_client import ConnectionLost, HandshakeTimeout, ZmtpConnection, tcp_address
from rocketbox.cluster.zmtp_format import MechanismRefused, ZmtpError

CONNECT_TIMEOUT_S = 3.0
WRITE_TIMEOUT_S = 3.0
# Messages read from one connection a readiness event before the others get their turn.
READS_PER_EVENT = 1024
ANSWER_FRAME_BYTES_MAX = 1024 * 1024 * 1024


class DirectIoThread(IoThreadBase):
    THREAD_NAME = "rpc-io"   # the native client's I/O thread, whichever way it speaks ZMTP

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake_r, selectors.EVENT_READ)
        connections: dict[str, ZmtpConnection] = {}
        pending = self._pending

        def lose(endpoint: str, why: str) -> None:
            conn = connections.pop(endpoint, None)
            if conn is not None:
                selector.unregister(conn.sock)
                conn.close()
            pending.fail_key(endpoint, TransportError(f"connection to {endpoint} lost: {why}"))

        while not self._stopping:
            for key, _events in selector.select(self._wait_s()):
                if key.fileobj == self._wake_r:
                    self._drain_wake_pipe()
                    continue
                endpoint = key.data
                conn = connections.get(endpoint)
                if conn is None:
                    continue
                try:
                    for _ in range(READS_PER_EVENT):
                        parts = conn.poll_message()
                        if parts is None:
                            break
                        self._received(conn, parts)
                except (ConnectionLost, HandshakeTimeout, ZmtpError) as exc:
                    lose(endpoint, str(exc))
            self._wake_pending = False
            while self._submitted:
                endpoint, request, future, deadline = self._submitted.popleft()
                conn = connections.get(endpoint)
                if conn is None:
                    try:
                        conn = _open(endpoint)
                    except TransportError as exc:
                        future.set_exception(exc)
                        continue
                    connections[endpoint] = conn
                    selector.register(conn.sock, selectors.EVENT_READ, endpoint)
                pending.add(request.opaque, endpoint, deadline, settle(future))
                try:
                    conn.send(to_frames(request), time.monotonic() + WRITE_TIMEOUT_S)
                except (ConnectionLost, HandshakeTimeout) as exc:
                    lose(endpoint, str(exc))
            self._expire_due()
        pending.fail_all(TransportError("client is closed"))
        for conn in connections.values():
            conn.close()
        selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def _received(self, conn: ZmtpConnection, parts: list) -> None:
        message = decode_response(parts)
        if message is None:
            return
        if not message.is_response:
            answer = self._serve_request(message)
            if answer is not None:
                conn.send(to_frames(answer), time.monotonic() + WRITE_TIMEOUT_S)
            return
        self._pending.answer(message)


def _open(endpoint: str) -> ZmtpConnection:
    address = tcp_address(endpoint)
    if address is None:
        raise TransportError(f"cannot connect to {endpoint!r}: not a tcp://host:port endpoint")
    try:
        return ZmtpConnection.open(address, time.monotonic() + CONNECT_TIMEOUT_S, ANSWER_FRAME_BYTES_MAX,
                                   retry_refused=False)
    except MechanismRefused:
        raise AccessRefused(handshake_refusal(endpoint, True, False)) from None
    except (HandshakeTimeout, ConnectionLost, ZmtpError) as exc:
        raise TransportError(f"cannot connect to {endpoint!r}: {exc}") from None
