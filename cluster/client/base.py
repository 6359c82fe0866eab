"""What every client shares: the RPC client, the route cache, a client id, open/closed state."""

from __future__ import annotations

import dataclasses
import itertools
import os
import socket
from typing import Sequence

from cluster.clock import SYSTEM_CLOCK, Clock
from cluster.client.routes import RouteCache, namesrv_endpoints_from_env, normalize_endpoint
from cluster.config import ClientConfig
from cluster.errors import ClientClosed
from cluster.zmq_transport import RpcClient

_instance_counter = itertools.count()


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
            endpoints = (namesrv,) if isinstance(namesrv, str) else tuple(namesrv)
            endpoints = tuple(normalize_endpoint(e) for part in endpoints for e in part.split(";") if e.strip())
            cfg = dataclasses.replace(cfg, namesrv_endpoints=endpoints)
        cfg.validate()
        self.cfg = cfg
        # Deadlines, back-offs, latency windows and expiry read this (a test may pass a ManualClock).
        self.clock = clock
        self.rpc = RpcClient(cfg.request_timeout_ms)
        self.routes = RouteCache(self.rpc, cfg)
        self._closed = False
        self._client_pid = os.getpid()
        self.client_id = f"{_local_ip()}@{os.getpid()}@{cfg.instance_name}@{next(_instance_counter)}"

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
            self.rpc.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()
