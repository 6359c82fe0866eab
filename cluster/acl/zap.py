"""The process's ZAP handler (ZeroMQ's authentication protocol, RFC 27) for its CURVE server sockets.

libzmq asks it once per new connection, after the CURVE handshake proved the client holds the
secret key of the public key it presents. Request doors (``DOOR_DOMAIN``) admit every key and
label the connection with it (``User-Id`` = the z85 public key), so each request is judged against
the current key table and ACL file (a key removed stops working at once, not at the next
connection), and a stranger gets NO_PERMISSION with a reason instead of a silent time-out. The HA
door (``HA_DOMAIN``: the whole CommitLog streams through it) admits only the cluster's own key.

It is bound before any CURVE server socket of the process (a CURVE socket with no handler would
admit every client unlabelled), and served on the process's event loop, which answers it within a
loop turn.
"""

from __future__ import annotations

import logging

import zmq
from zmq.utils import z85

from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.zmq_transport import CONTEXT

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
DOOR_DOMAIN = "door"
HA_DOMAIN = "ha"
_VERSION = b"1.0"

_handler: "ZapHandler | None" = None


class ZapHandler:
    def __init__(self, cluster_public: bytes):
        self.cluster_public = cluster_public
        self.socket = CONTEXT.get().socket(zmq.REP)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.bind(ZAP_ENDPOINT)

    def attach(self, loop) -> None:
        loop.add_reader(self.socket, self.on_readable)

    def on_readable(self) -> None:
        while self.socket.get(zmq.EVENTS) & zmq.POLLIN:
            frames = self.socket.recv_multipart()
            try:
                reply = self.answer(frames)
            except Exception as exc:   # a REP socket must answer, or it serves nobody again
                _limited.error("zap-failed", "ZAP request failed", exc_info=True)
                reply = [_VERSION, frames[1] if len(frames) > 1 else b"", b"500", str(exc).encode(), b"", b""]
            self.socket.send_multipart(reply)

    def answer(self, frames: list[bytes]) -> list[bytes]:
        """The reply frames to one ZAP request."""
        if len(frames) < 6 or frames[0] != _VERSION:
            return [_VERSION, frames[1] if len(frames) > 1 else b"", b"500", b"malformed ZAP request", b"", b""]
        request_id, domain, address, mechanism = frames[1], frames[2], frames[3], frames[5]
        if mechanism != b"CURVE" or len(frames) < 7:
            return self._refuse(request_id, address, f"{mechanism.decode(errors='replace')} is not CURVE")
        public = z85.encode(frames[6])
        if domain == HA_DOMAIN.encode() and public != self.cluster_public:
            return self._refuse(request_id, address, "only the cluster's own key may replicate")
        return [_VERSION, request_id, b"200", b"OK", public, b""]

    def _refuse(self, request_id: bytes, address: bytes, why: str) -> list[bytes]:
        _limited.warning("zap-refused", "refused a ZeroMQ connection from %s: %s",
                         address.decode(errors="replace"), why)
        return [_VERSION, request_id, b"400", why.encode(), b"", b""]


def start(cluster_public: bytes, loop) -> ZapHandler:
    """The process's handler, bound and served on ``loop`` (made once; later calls return it)."""
    global _handler
    if _handler is None:
        _handler = ZapHandler(cluster_public)
        _handler.attach(loop)
    return _handler
