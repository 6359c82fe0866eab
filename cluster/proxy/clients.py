"""The gRPC clients the proxy knows, by ``x-mq-client-id`` (RocketMQ's GrpcClientSettingsManager and
GrpcChannelManager in one table): each one's latest Settings, and the outbox of its open Telemetry
stream, through which the proxy pushes commands (transaction recovery) to it.

Bounded: at most ``max_clients`` entries; a client that neither heartbeats nor holds a stream for
``client_expiry_ms`` is forgotten, and when the table is full the longest-silent client without a
stream makes room. Everything here runs on the proxy's asyncio loop (no locks).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from rocketbox.cluster.proxy.protos import Code, pb, service
from rocketbox.cluster.proxy.status import ProxyError

log = logging.getLogger(__name__)

CONSUMER_TYPES = (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.LITE_PUSH_CONSUMER, pb.LITE_SIMPLE_CONSUMER)
SERVED_CLIENT_TYPES = (pb.PRODUCER, *CONSUMER_TYPES)


def unserved_client_type(client_type: int) -> ProxyError:
    """The refusal of a client type RocketBox does not serve (Apache's UNRECOGNIZED_CLIENT_TYPE)."""
    name = pb.ClientType.Name(client_type) if client_type in pb.ClientType.values() else str(client_type)
    return ProxyError(Code.UNRECOGNIZED_CLIENT_TYPE, f"{name}: RocketBox serves PRODUCER, PUSH_CONSUMER, "
                                                     f"SIMPLE_CONSUMER and their LITE_ clients")


@dataclass(eq=False)
class GrpcClient:
    client_id: str
    last_seen: float
    settings: pb.Settings | None = None
    # The open Telemetry stream's queue of commands to write (None: no stream).
    outbox: asyncio.Queue | None = None
    # Topics it publishes: its settings' topics and those it sent transactional messages to.
    topics: set[str] = field(default_factory=set)
    # The client type of settings refused as one RocketBox does not serve (0: none refused).
    unserved_type: int = 0

    @property
    def client_type(self) -> int:
        return self.settings.client_type if self.settings is not None else pb.CLIENT_TYPE_UNSPECIFIED

    @property
    def group(self) -> str:
        if self.settings is not None and self.settings.HasField("subscription"):
            return self.settings.subscription.group.name
        return ""

    def push(self, command: service.TelemetryCommand) -> bool:
        """Queue ``command`` on the open stream; False when there is none or it is full."""
        if self.outbox is None:
            return False
        try:
            self.outbox.put_nowait(command)
            return True
        except asyncio.QueueFull:
            return False


class ClientRegistry:
    def __init__(self, max_clients: int, expiry_ms: int, clock=time.monotonic):
        self.max_clients = max_clients
        self.expiry_s = expiry_ms / 1000
        self.clock = clock
        self._clients: dict[str, GrpcClient] = {}

    def __len__(self) -> int:
        return len(self._clients)

    def get(self, client_id: str) -> GrpcClient | None:
        return self._clients.get(client_id)

    def touch(self, client_id: str) -> GrpcClient:
        """The client's entry, made if new (ProxyError TOO_MANY_REQUESTS when the table is full of
        clients that are all still live)."""
        now = self.clock()
        client = self._clients.get(client_id)
        if client is None:
            if len(self._clients) >= self.max_clients and not self._make_room(now):
                raise ProxyError(Code.TOO_MANY_REQUESTS, f"the proxy serves {self.max_clients} clients already")
            client = self._clients[client_id] = GrpcClient(client_id, now)
        client.last_seen = now
        return client

    def _make_room(self, now: float) -> bool:
        self.expire(now)
        if len(self._clients) < self.max_clients:
            return True
        idle = [c for c in self._clients.values() if c.outbox is None]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.last_seen)
        del self._clients[oldest.client_id]
        return True

    def remove(self, client_id: str) -> GrpcClient | None:
        return self._clients.pop(client_id, None)

    def expire(self, now: float | None = None) -> list[str]:
        now = self.clock() if now is None else now
        gone = [cid for cid, c in self._clients.items() if c.outbox is None and now - c.last_seen > self.expiry_s]
        for cid in gone:
            del self._clients[cid]
        if gone:
            log.info("forgot %d silent gRPC client(s)", len(gone))
        return gone

    def publishing_topics(self) -> set[str]:
        """Every topic a known producer publishes (the producer groups to heartbeat to brokers)."""
        topics: set[str] = set()
        for client in self._clients.values():
            if client.client_type == pb.PRODUCER:
                topics |= client.topics
        return topics

    def producers_of(self, topic: str) -> list[GrpcClient]:
        """Producers publishing ``topic`` with an open Telemetry stream, most recently seen first."""
        found = [c for c in self._clients.values()
                 if c.client_type == pb.PRODUCER and c.outbox is not None and topic in c.topics]
        return sorted(found, key=lambda c: -c.last_seen)
