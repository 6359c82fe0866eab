"""The native door served by the process's own event loop: ZeroMQ's wire protocol (ZMTP 3.1, the
NULL mechanism) read and written on plain TCP connections, with no libzmq socket and no libzmq I/O
thread between the kernel and the handlers.

Why: a libzmq ROUTER hands every message to libzmq's I/O thread and back, a thread wake-up each
way on top of the loop's own; the native client already skips its side of them (zmtp_client.py),
and the door was the last on the path of a native request (perf/RESULTS.md, "The native door
served by the broker's loop"). Clients see the same door: a ROUTER at the same address, answering
libzmq's DEALERs and RocketBox's own ZMTP client alike.

The machinery is the remoting door's (``remoting_transport.RemotingServer``: one epoll set, the
answers of a read in one write, fast failure from the kernel's receive stamps, the places and byte
budgets of ``remoting_admission`` before a connection proves itself with a request); the protocol is
``zmtp_format.ServerSession``. A door with CURVE (access control on) stays libzmq's
(``zmq_transport.RpcServer``): a door serves one mechanism, the cluster's, and a client with keys at
this door reads our NULL greeting as libzmq does, a mechanism mismatch. The bounds ZeroMQ gave the
libzmq door hold here too: a connection sends its greeting and READY and a request within the
unproven time (10 s) or is closed; a connection silent for ``HEARTBEAT_MS`` is sent a PING, and one
silent for twice that (no PONG, no request) is closed, as is one holding half a message that long.
"""

from __future__ import annotations

import time
from typing import Callable

from rocketbox.cluster.remoting_admission import AdmissionLimits
from rocketbox.cluster.remoting_transport import RemotingServer
from rocketbox.cluster.request_dispatch import Handler
from rocketbox.cluster.wire_format import DOOR_NATIVE, Command, from_frames, to_frames
from rocketbox.cluster.zmq_transport import HEARTBEAT_MS
from rocketbox.cluster.zmtp_client import tcp_address
from rocketbox.cluster.zmtp_format import ServerSession, ZmtpError, message, ping

ZMTP_PEER_PREFIX = b"zmtp:"
HEARTBEAT_S = HEARTBEAT_MS / 1000


class ZmtpServer(RemotingServer):
    """A ROUTER door (NULL mechanism) on ``endpoint`` (``tcp://host:port``), served from the loop."""

    peer_prefix = ZMTP_PEER_PREFIX
    door = DOOR_NATIVE
    stream_errors = (ZmtpError,)
    tells_peer_port = False   # as through libzmq, which gives a peer's address only: born hosts keep port 0

    def __init__(self, endpoint: str, handlers: dict[int, Handler], *, name: str, frame_bytes_max: int,
                 limits: AdmissionLimits = AdmissionLimits(), wait_bounds=None,
                 on_disconnect: Callable[[bytes], None] | None = None):
        address = tcp_address(endpoint)
        if address is None:
            raise ValueError(f"the loop's ZMTP door serves tcp://host:port, not {endpoint!r}")
        super().__init__(*address, handlers, name=name, frame_bytes_max=frame_bytes_max, limits=limits,
                         idle_timeout_s=2 * HEARTBEAT_S, partial_frame_timeout_s=2 * HEARTBEAT_S,
                         on_disconnect=on_disconnect, wait_bounds=wait_bounds)
        self.endpoint = f"tcp://{self.address}"
        self._pinged_at: dict[bytes, float] = {}

    @staticmethod
    def applies_to(endpoint: str, curve) -> bool:
        """Whether this door can serve ``endpoint`` (else libzmq's does): TCP, no CURVE."""
        return curve is None and tcp_address(endpoint) is not None

    def new_decoder(self) -> ServerSession:
        return ServerSession(self.frame_bytes_max)

    def opened(self, conn) -> None:
        self.write(conn, ServerSession.opening())

    def after_feed(self, conn) -> None:
        owed = conn.decoder.take_outgoing()
        if owed:
            self.write(conn, owed)

    @staticmethod
    def decode(payload) -> tuple[Command, None]:
        return from_frames(payload), None

    @staticmethod
    def encode(cmd: Command, _serialize_type) -> bytes:
        return message(to_frames(cmd))

    def close_stale(self) -> None:
        """Heartbeats: a PING to each connection silent ``HEARTBEAT_S`` (once per silence); the
        remoting door's rules then close one silent twice as long, or holding half a message."""
        super().close_stale()
        now = time.monotonic()
        pinged = self._pinged_at
        for conn in list(self._connections.values()):
            if now - conn.last_active >= HEARTBEAT_S and pinged.get(conn.peer, -1.0) < conn.last_active \
                    and conn.decoder.open:
                pinged[conn.peer] = now
                self.write(conn, ping())

    def close_connection(self, conn, why: str | None, quiet: bool = False) -> None:
        self._pinged_at.pop(conn.peer, None)
        super().close_connection(conn, why, quiet)
