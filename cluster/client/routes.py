"""Topic routes from the NameServers, cached and refreshed (RocketMQ: every 30 s)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Sequence

from rocketbox.cluster.fastjson_format import body_json
from rocketbox.cluster.config import ClientConfig, namesrv_endpoints
from rocketbox.cluster.errors import BrokerError, NoRouteError, unreachable_error
from rocketbox.cluster.protocol import MASTER_ID, PERM_READ, PERM_WRITE, RequestCode, ResponseCode
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY
from rocketbox.cluster.client.message import MessageQueue
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient, TransportError


# A route whose broker failed a request is fetched again after this long at the soonest.
ROUTE_SUSPECT_REFRESH_S = 0.5


def namesrv_endpoints_from_env(default: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """ROCKETBOX_NAMESRV: NameServer addresses separated by ';' (host:port or tcp://host:port)."""
    raw = os.environ.get("ROCKETBOX_NAMESRV", "")
    if not raw:
        return default if default is not None else ClientConfig().namesrv_endpoints
    return namesrv_endpoints(raw)


def normalize_endpoint(address: str) -> str:
    address = address.strip()
    return address if "://" in address else f"tcp://{address}"


def config_for(namesrv: str | Sequence[str], **changes) -> ClientConfig:
    """Client settings for these NameServers ("host:port;host:port" or a sequence), plus ``changes``."""
    return ClientConfig(namesrv_endpoints=namesrv_endpoints(namesrv), **changes)


@dataclass
class TopicRoute:
    topic: str
    queue_datas: list[dict]
    broker_addrs: dict[str, dict[int, str]]  # broker name -> broker id -> "host:port"
    fetched_at_s: float
    _publish_cache: dict = field(default_factory=dict, repr=False, compare=False)
    suspect: bool = field(default=False, compare=False)

    @classmethod
    def from_json(cls, topic: str, data: dict) -> "TopicRoute":
        addrs = {b["brokerName"]: {int(k): v for k, v in b["brokerAddrs"].items()} for b in data["brokerDatas"]}
        return cls(topic, data["queueDatas"], addrs, time.monotonic())

    def master_endpoint(self, broker_name: str) -> str | None:
        addr = self.broker_addrs.get(broker_name, {}).get(MASTER_ID)
        return normalize_endpoint(addr) if addr else None

    def publish_queues(self, topic: str | None = None) -> list[MessageQueue]:
        """Writable queues on brokers that have a master, in broker order (round-robin order).

        Computed once per route and topic: producers ask for it on every send."""
        topic = topic or self.topic
        cached = self._publish_cache.get(topic)
        if cached is not None:
            return cached
        out = self._publish_cache[topic] = []
        for q in sorted(self.queue_datas, key=lambda q: q["brokerName"]):
            if q["perm"] & PERM_WRITE and self.master_endpoint(q["brokerName"]):
                out.extend(MessageQueue(topic, q["brokerName"], i) for i in range(q["writeQueueNums"]))
        return out

    def subscribe_queues(self) -> list[MessageQueue]:
        out = []
        for q in sorted(self.queue_datas, key=lambda q: q["brokerName"]):
            if q["perm"] & PERM_READ:
                out.extend(MessageQueue(self.topic, q["brokerName"], i) for i in range(q["readQueueNums"]))
        return out


class RouteCache:
    """Asks any NameServer (the first that answers); keeps routes until they age out."""

    def __init__(self, rpc: RpcClient, cfg: ClientConfig):
        self.rpc = rpc
        self.cfg = cfg
        self._routes: dict[str, TopicRoute] = {}
        self._lock = threading.Lock()
        self._next_namesrv = 0
        # remoting door host:port -> native host:port, for offset message ids (store_host_endpoint)
        self._native_by_remoting: dict[str, str] = {}

    def namesrv_call(self, request_factory, timeout_ms: int | None = None) -> Command:
        """Try each NameServer in turn until one answers."""
        endpoints = self.cfg.namesrv_endpoints
        failures: list[Exception] = []
        for i in range(len(endpoints)):
            endpoint = endpoints[(self._next_namesrv + i) % len(endpoints)]
            try:
                response = self.rpc.call(endpoint, request_factory(), timeout_ms or self.cfg.request_timeout_ms)
                self._next_namesrv = (self._next_namesrv + i) % len(endpoints)
                return response
            except TransportError as exc:
                failures.append(exc)
        raise unreachable_error(endpoints, failures)

    def fetch(self, topic: str) -> TopicRoute | None:
        response = self.namesrv_call(lambda: Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise BrokerError(response.code, response.remark, "namesrv")
        route = TopicRoute.from_json(topic, body_json(response.body))
        with self._lock:
            self._routes[topic] = route
        return route

    def suspect(self, broker_name: str) -> None:
        """A request to ``broker_name`` failed: fetch every route through it again soon (the group
        may have a new master: failover), but each at most every ``ROUTE_SUSPECT_REFRESH_S``.
        Every route, not only the topic's: a new topic's sends follow the auto-create route."""
        with self._lock:
            for route in self._routes.values():
                if broker_name in route.broker_addrs:
                    route.suspect = True

    def get(self, topic: str, *, refresh: bool = False) -> TopicRoute | None:
        with self._lock:
            route = self._routes.get(topic)
        age_s = self.cfg.route_refresh_interval_ms / 1000
        now = time.monotonic()
        if route is not None and route.suspect and now - route.fetched_at_s > ROUTE_SUSPECT_REFRESH_S:
            refresh = True
        if refresh or route is None or now - route.fetched_at_s > age_s:
            try:
                fresh = self.fetch(topic)
            except NoRouteError:
                if route is not None:
                    return route  # keep serving from the last known route while NameServers are away
                raise
            return fresh
        return route

    def publish_route(self, topic: str) -> tuple[TopicRoute, list[MessageQueue], bool]:
        """(route, writable queues, auto_create) for a send; falls back to TBW102 for new topics."""
        route = self.get(topic)
        if route is not None and route.publish_queues():
            return route, route.publish_queues(), False
        default = self.get(AUTO_CREATE_TOPIC_KEY)
        if default is None or not default.publish_queues(topic):
            raise NoRouteError(f"No route info of this topic: {topic} (and auto-create is not offered)")
        # As RocketMQ clients do: at most the client default queue count per broker.
        queues = [q for q in default.publish_queues(topic) if q.queue_id < 4]
        return default, queues, True

    def store_host_endpoint(self, ip: str, port: int) -> str:
        """The endpoint of the broker an offset message id (or a record's STOREHOST) names, at
        this client's door. A broker with a remoting door stores that door's address, as RocketMQ
        does; a native client finds the broker's ZeroMQ address through the cluster info."""
        address = f"{ip}:{port}"
        if self.cfg.transport == "remoting":
            return f"tcp://{address}"
        native = self._native_by_remoting.get(address)
        if native is None:
            response = self.namesrv_call(lambda: Command(RequestCode.GET_BROKER_CLUSTER_INFO, {}))
            if response.code == ResponseCode.SUCCESS:
                table = body_json(response.body).get("brokerAddrTable", {})
                mapping = {remoting: data["brokerAddrs"][broker_id] for data in table.values()
                           for broker_id, remoting in (data.get("remotingAddrs") or {}).items()
                           if broker_id in data.get("brokerAddrs", {})}
                with self._lock:
                    self._native_by_remoting = mapping
            native = self._native_by_remoting.get(address, address)
        return f"tcp://{native}"

    def all_broker_endpoints(self) -> dict[str, str]:
        """broker name -> master endpoint, over every cached route."""
        out = {}
        with self._lock:
            routes = list(self._routes.values())
        for route in routes:
            for name in route.broker_addrs:
                endpoint = route.master_endpoint(name)
                if endpoint:
                    out[name] = endpoint
        return out
