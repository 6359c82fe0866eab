"""A broker's doors: the native (ZeroMQ) door always, RocketMQ's remoting TCP server when configured.

The native door is served by the loop itself (``zmtp_door.ZmtpServer``, no libzmq I/O thread) unless
it speaks CURVE (access control on), which libzmq's ROUTER serves (``zmq_transport.RpcServer``).

Both feed the broker's one handler table. A connected client is reached (``notify``) and probed
(``reachable``) through the door its requests came in by; a TCP peer key says which.
"""

from __future__ import annotations

from typing import Callable

from rocketbox.cluster.acl.curve import KeyPair
from rocketbox.cluster.config import TLS_DISABLED, BrokerConfig
from rocketbox.cluster.fast_failure import WaitBounds
from rocketbox.cluster.remoting_admission import AdmissionLimits
from rocketbox.cluster.remoting_transport import RemotingServer
from rocketbox.cluster.wire_format import HEADER_BYTES_MAX, Command
from rocketbox.cluster.zmq_transport import EventLoop, RpcServer
from rocketbox.cluster.zmtp_door import ZmtpServer


class BrokerDoors:
    def __init__(self, cfg: BrokerConfig, handlers: dict, loop: EventLoop, on_peer_gone: Callable[[], None],
                 curve: KeyPair | None = None, read_lane=None):
        """Open and attach both doors. ``on_peer_gone()`` runs when a connection closed (which
        peer, ZeroMQ does not say: ask ``reachable``). ``curve``: the native door serves CURVE. ``read_lane``:
        the send handler's fast path for a remoting read (``RemotingServer``)."""
        # The largest legitimate frame is a batch body at the size limit; headers are far smaller.
        frame_bytes_max = cfg.store.message_size_bytes_max + HEADER_BYTES_MAX
        # Under overload a request that waited too long is answered SYSTEM_BUSY (fast_failure.py).
        bounds = WaitBounds.of_broker(cfg) if cfg.broker_fast_failure_enabled else None
        name = f"broker {cfg.broker_name}"
        if ZmtpServer.applies_to(cfg.endpoint, curve):
            self.native: RpcServer | ZmtpServer = ZmtpServer(
                cfg.endpoint, handlers, name=name, frame_bytes_max=frame_bytes_max, limits=AdmissionLimits.of(cfg),
                wait_bounds=bounds, on_disconnect=lambda peer: on_peer_gone())
            self.native.attach(loop)
        else:
            self.native = RpcServer(cfg.endpoint, handlers, name=name, frame_bytes_max=frame_bytes_max, curve=curve,
                                    wait_bounds=bounds, rcvhwm=cfg.native_connection_backlog_max)
            self.native.attach(loop)
            self.native.watch_disconnects(loop, on_peer_gone)
        self.remoting: RemotingServer | None = None
        self.loop_served = [door for door in (self.native,) if isinstance(door, RemotingServer)]
        if cfg.remoting_port:
            self.remoting = RemotingServer(
                cfg.host, cfg.remoting_port, handlers, name=f"broker {cfg.broker_name} remoting",
                frame_bytes_max=frame_bytes_max, limits=AdmissionLimits.of(cfg), authenticated_only=cfg.acl_enable,
                idle_timeout_s=cfg.remoting_idle_timeout_ms / 1000,
                partial_frame_timeout_s=cfg.remoting_partial_frame_timeout_ms / 1000,
                on_disconnect=lambda peer: on_peer_gone(), wait_bounds=bounds, tls=_server_tls(cfg),
                read_lane=read_lane)
            self.remoting.attach(loop)
            self.loop_served.append(self.remoting)

    def before_answers(self, hook: Callable[[], None]) -> None:
        """``hook()`` runs after each read's requests are served on the doors the loop serves, before
        their answers are written (``RemotingServer.before_answers``; libzmq's CURVE door has none)."""
        for door in self.loop_served:
            door.before_answers = hook

    def _door_of(self, peer):
        return self.remoting if self.remoting is not None and self.remoting.owns(peer) else self.native

    def notify(self, peer, command: Command) -> None:
        self._door_of(peer).notify(peer, command)

    def call(self, peer, command: Command, on_answer, timeout_s: float) -> None:
        """A request to a connected client that waits for its answer (``on_answer(exception)``: none came)."""
        self._door_of(peer).call_peer(peer, command, on_answer, timeout_s)

    def reachable(self, peer) -> bool:
        return self._door_of(peer).reachable(peer)

    def info(self) -> dict:
        """Counters of both doors (runtime info)."""
        if isinstance(self.native, ZmtpServer):   # served by the loop: its connections, bounds, writes
            info = {"native": {**self.native.info(), "servedBy": "loop"}}
        else:
            info = {"native": {"requestsServed": self.native.requests_served,
                               "malformedFrames": self.native.malformed_frames, "servedBy": "libzmq"}}
        if self.remoting is not None:
            info["remoting"] = self.remoting.info()
        for door, server in (("native", self.native), ("remoting", self.remoting)):
            if server is not None and server.backlog is not None:
                info[door]["busyAnswers"] = dict(server.backlog.shed)
                # Past their bound only because the broker's thread waited for a CPU: served (fast_failure.RunQueueDelay).
                info[door]["busyForgiven"] = server.backlog.forgiven
        return info

    def close(self) -> None:
        self.native.close()
        if self.remoting is not None:
            self.remoting.close()


def _server_tls(cfg):
    """The remoting door's TLS, None without it: ssl (OpenSSL) loads only for a door that uses it."""
    if cfg.tls_server_mode == TLS_DISABLED:
        return None
    from rocketbox.cluster.tls import ServerTls
    return ServerTls.of(cfg)
