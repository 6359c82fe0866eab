"""What every client shares: the RPC client, the route cache, a client id, open/closed state.

A client still open when its process exits is shut down then (``atexit``), as RocketMQ's
clients are by their shutdown hook: a consumer commits its offsets and leaves its group at once,
so the group's other members take its queues now rather than after the broker's client expiry.
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import logging
import os
import socket
import weakref
from typing import Sequence

from rocketbox.cluster.clock import SYSTEM_CLOCK, Clock
from rocketbox.cluster.client.routes import RouteCache, namesrv_endpoints_from_env
from rocketbox.cluster.config import ClientConfig, namesrv_endpoints
from rocketbox.cluster.errors import ClientClosed
from rocketbox.cluster.acl.curve import ClientKeys
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.tls import client_context
from rocketbox.cluster.zmq_transport import RpcClient

log = logging.getLogger(__name__)

_instance_counter = itertools.count()
_OPEN_CLIENTS: "weakref.WeakSet[ClientBase]" = weakref.WeakSet()


@atexit.register
def _shut_down_open_clients() -> None:
    for client in list(_OPEN_CLIENTS):
        if client._client_pid != os.getpid():
            continue   # inherited through fork: the parent's client, not this process's to close
        try:
            client.shutdown()
        except Exception:   # exiting anyway: say why the group may wait for the expiry
            log.exception("shutting %s down at exit failed", type(client).__name__)


def _local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


class ClientBase:
    def __init__(self, namesrv: str | Sequence[str] | None = None, config: ClientConfig | None = None,
                 clock: Clock = SYSTEM_CLOCK):
        cfg = config or ClientConfig(namesrv_endpoints=namesrv_endpoints_from_env())
        if namesrv is not None:
            cfg = dataclasses.replace(cfg, namesrv_endpoints=namesrv_endpoints(namesrv))
        cfg.validate()
        self.cfg = cfg
        # Deadlines, back-offs, latency windows and expiry read this (a test may pass a ManualClock).
        self.clock = clock
        if cfg.transport == "remoting":
            tls = client_context(cfg.tls_trust_cert_path, cfg.tls_verify_server) if cfg.tls_enable else None
            credentials = (cfg.access_key, cfg.secret_key) if cfg.access_key else None
            self.rpc = RemotingRpcClient(cfg.request_timeout_ms, spin_max_s=cfg.sync_call_spin_us / 1e6, tls=tls,
                                         credentials=credentials)
        else:
            curve = (ClientKeys(cfg.curve_server_key.encode(), cfg.curve_public_key.encode(),
                                cfg.curve_secret_key.encode()) if cfg.curve_server_key else None)
            # Sync calls on the thread's own ZMTP socket (zmtp_calls.py): no libzmq I/O thread on their way.
            self.rpc = RpcClient(cfg.request_timeout_ms, curve=curve, spin_max_s=cfg.sync_call_spin_us / 1e6,
                                 direct_sync=cfg.native_direct)
        self.routes = RouteCache(self.rpc, cfg)
        self._closed = False
        self._client_pid = os.getpid()
        self.client_id = f"{_local_ip()}@{os.getpid()}@{cfg.instance_name}@{next(_instance_counter)}"
        _OPEN_CLIENTS.add(self)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed(f"{type(self).__name__} is shut down")
        if self._client_pid != os.getpid():
            # After fork the child is a different client: a fresh id keeps group membership apart.
            self._client_pid = os.getpid()
            self.client_id = f"{_local_ip()}@{os.getpid()}@{self.cfg.instance_name}@{next(_instance_counter)}"

    def shutdown(self) -> None:
        if not self._closed:
            self._closed = True
            _OPEN_CLIENTS.discard(self)
            self.rpc.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
