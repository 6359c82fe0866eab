"""The proxy's way to the cluster: NameServers and broker masters over the native (ZeroMQ) door, on
the asyncio loop's own connections (loop_calls.py), or with access control's CURVE keys through the
client library's RpcClient, awaited from the loop (answers handed over in batches: handoff.py).

Everything the proxy learns from them is cached with a time-to-live and a size bound (a flood of
requests naming random topics must not grow the proxy): topic routes (``route_ttl_ms``, RocketMQ's
30 s), topic configs and group configs (``metadata_ttl_ms``), the cluster's broker table. A request
to a broker that fails marks the routes through it stale, so a new master (failover) is found on
the next request. Concurrent lookups of one key share one request.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import time

from rocketbox.cluster.client.routes import TopicRoute, normalize_endpoint
from rocketbox.cluster.protocol import MASTER_ID, PERM_READ, PERM_WRITE, RequestCode, ResponseCode
from rocketbox.cluster.acl.curve import effective_client_keys
from rocketbox.cluster.proxy.group_order import release_turns, wait_turns
from rocketbox.cluster.proxy.handoff import BatchedCalls
from rocketbox.cluster.proxy.loop_calls import LoopCalls
from rocketbox.cluster.proxy.protos import Code
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import ProxyError, broker_refusal, code_of_transport
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient, TransportError

log = logging.getLogger(__name__)

CACHE_ENTRIES_MAX = 10_000
# A topic the NameServers do not know is asked about again after this long (not after route_ttl_ms:
# a client that creates it and retries must not wait half a minute).
MISSING_TOPIC_TTL_S = 1.0


class TtlCache:
    """key -> (value, expiry); the oldest entries go first once over ``max_entries``."""

    def __init__(self, max_entries: int = CACHE_ENTRIES_MAX):
        self.max_entries = max_entries
        self._entries: collections.OrderedDict = collections.OrderedDict()

    def get(self, key, now: float):
        entry = self._entries.get(key)
        if entry is None or entry[1] <= now:
            return None
        return entry

    def put(self, key, value, expires_at: float) -> None:
        self._entries[key] = (value, expires_at)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def expire_where(self, predicate) -> None:
        for key, (value, _) in list(self._entries.items()):
            if predicate(value):
                self._entries[key] = (value, 0.0)


class BrokerGateway:
    def __init__(self, settings: ProxySettings):
        self.settings = settings
        self.rpc = RpcClient(settings.request_timeout_ms)
        self._calls = BatchedCalls(self.rpc)
        if settings.broker_calls_on_loop and effective_client_keys(None) is None:
            self._calls = LoopCalls(self._calls, self.rpc.server_request_handlers, settings.request_timeout_ms)
        self._routes = TtlCache()
        self._topic_configs = TtlCache()
        self._group_tables = TtlCache()
        self._cluster = TtlCache(1)
        self._inflight: dict[tuple, asyncio.Future] = {}
        self._next_namesrv = 0

    # ------------------------------------------------------------ requests

    def call(self, endpoint: str, request: Command, timeout_ms: int | None = None) -> asyncio.Future:
        """One request, handed to its connection now (so requests go out in the order of these calls);
        the future's result is the answer, or a TransportError when none comes within ``timeout_ms``."""
        return self._calls.call(endpoint, request, timeout_ms)

    async def namesrv(self, factory) -> Command:
        """Ask each NameServer in turn until one answers."""
        endpoints = self.settings.namesrv_endpoints
        last: Exception | None = None
        for i in range(len(endpoints)):
            index = (self._next_namesrv + i) % len(endpoints)
            try:
                response = await self.call(endpoints[index], factory())
                self._next_namesrv = index
                return response
            except TransportError as exc:
                last = exc
        raise ProxyError(code_of_transport(last), f"no NameServer answered ({', '.join(endpoints)}): {last}")

    async def _shared(self, key: tuple, fetch):
        """``await fetch()`` once for every concurrent caller asking for ``key``."""
        pending = self._inflight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future = asyncio.ensure_future(fetch())
        self._inflight[key] = future
        try:
            return await asyncio.shield(future)
        finally:
            if future.done():
                self._inflight.pop(key, None)
            else:
                future.add_done_callback(lambda _f: self._inflight.pop(key, None))

    # ------------------------------------------------------------ routes

    async def route(self, topic: str) -> TopicRoute | None:
        """The topic's route (None: the NameServers do not know it)."""
        now = time.monotonic()
        cached = self._routes.get(topic, now)
        if cached is not None:
            return cached[0]
        return await self._shared(("route", topic), lambda: self._fetch_route(topic))

    async def _fetch_route(self, topic: str) -> TopicRoute | None:
        response = await self.namesrv(lambda: Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        now = time.monotonic()
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            self._routes.put(topic, None, now + MISSING_TOPIC_TTL_S)
            return None
        if response.code != ResponseCode.SUCCESS:
            raise broker_refusal(response, "the NameServer")
        route = TopicRoute.from_json(topic, json.loads(response.body))
        self._routes.put(topic, route, now + self.settings.route_ttl_ms / 1000)
        return route

    async def existing_route(self, topic: str) -> TopicRoute:
        route = await self.route(topic)
        if route is None or not route.queue_datas:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic} does not exist")
        return route

    def suspect(self, broker_name: str) -> None:
        """A request to ``broker_name`` failed: its routes are fetched again on the next request."""
        self._routes.expire_where(lambda route: route is not None and broker_name in route.broker_addrs)
        self._cluster.expire_where(lambda _table: True)

    @staticmethod
    def masters(route: TopicRoute, perm: int | None = None) -> list[tuple[str, dict]]:
        """(broker name, queue data) of each broker with a master (and a permission in ``perm``), by name."""
        return [(q["brokerName"], q) for q in sorted(route.queue_datas, key=lambda q: q["brokerName"])
                if (perm is None or q["perm"] & perm) and route.master_endpoint(q["brokerName"])]

    @classmethod
    def readable(cls, route: TopicRoute) -> list[tuple[str, dict]]:
        return cls.masters(route, PERM_READ)

    @classmethod
    def writable(cls, route: TopicRoute) -> list[tuple[str, dict]]:
        return cls.masters(route, PERM_WRITE)

    # ------------------------------------------------------------ brokers

    async def broker_table(self) -> dict[str, dict]:
        """broker name -> {"master": endpoint or None, "addresses": every address it is known by}."""
        cached = self._cluster.get("table", time.monotonic())
        if cached is not None:
            return cached[0]
        return await self._shared(("cluster",), self._fetch_cluster)

    async def _fetch_cluster(self) -> dict[str, dict]:
        response = await self.namesrv(lambda: Command(RequestCode.GET_BROKER_CLUSTER_INFO, {}))
        if response.code != ResponseCode.SUCCESS:
            raise broker_refusal(response, "the NameServer")
        table = {}
        for name, data in (json.loads(response.body).get("brokerAddrTable") or {}).items():
            native = data.get("brokerAddrs") or {}
            master = native.get(str(MASTER_ID))
            addresses = set(native.values()) | set((data.get("remotingAddrs") or {}).values())
            table[name] = {"master": normalize_endpoint(master) if master else None, "addresses": addresses}
        self._cluster.put("table", table, time.monotonic() + self.settings.metadata_ttl_ms / 1000)
        return table

    async def master_endpoint(self, broker_name: str) -> str:
        entry = (await self.broker_table()).get(broker_name)
        if entry is None or not entry["master"]:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR if entry else Code.BAD_REQUEST,
                             f"broker {broker_name} has no master now" if entry else
                             f"no broker named {broker_name!r}")
        return entry["master"]

    async def broker_name_of(self, address: str) -> str | None:
        """The broker group a host:port (either door, master or slave) belongs to."""
        for name, entry in (await self.broker_table()).items():
            if address in entry["addresses"]:
                return name
        return None

    async def broker_call(self, broker_name: str, request: Command, timeout_ms: int | None = None,
                          turns=()) -> Command:
        """``request`` to the master of ``broker_name``; a ProxyError when it cannot be had. With
        ``turns`` (group_order.py), written once the sends before them in their groups are, and the
        turns released as it is written (or fails before)."""
        endpoint = None
        try:
            try:
                endpoint = await self.master_endpoint(broker_name)
                if turns:
                    await wait_turns(turns)
                answer = self.call(endpoint, request, timeout_ms)
            finally:
                if turns:
                    release_turns(turns)
            return await answer
        except TransportError as exc:
            self.suspect(broker_name)
            raise ProxyError(code_of_transport(exc), f"broker {broker_name} ({endpoint}): {exc}") from None

    # ------------------------------------------------------------ metadata

    async def topic_config(self, topic: str, route: TopicRoute) -> dict | None:
        """The topic's config as a master holding it answers GET_TOPIC_CONFIG (None: none has it)."""
        cached = self._topic_configs.get(topic, time.monotonic())
        if cached is not None:
            return cached[0]
        return await self._shared(("topic", topic), lambda: self._fetch_topic_config(topic, route))

    async def _fetch_topic_config(self, topic: str, route: TopicRoute) -> dict | None:
        config = None
        for broker_name, _queue in self.masters(route, PERM_READ | PERM_WRITE):
            response = await self.broker_call(broker_name, Command(RequestCode.GET_TOPIC_CONFIG, {"topic": topic}))
            if response.code == ResponseCode.SUCCESS:
                config = json.loads(response.body)
                break
            if response.code != ResponseCode.TOPIC_NOT_EXIST:
                raise broker_refusal(response, broker_name)
        self._topic_configs.put(topic, config, time.monotonic() + self.settings.metadata_ttl_ms / 1000)
        return config

    async def group_config(self, group: str) -> dict:
        """The subscription group's config on a master ({}: not made yet, the defaults apply)."""
        table = await self.broker_table()
        for broker_name in sorted(table):
            if not table[broker_name]["master"]:
                continue
            cached = self._group_tables.get(broker_name, time.monotonic())
            groups = cached[0] if cached is not None else await self._shared(
                ("groups", broker_name), lambda name=broker_name: self._fetch_groups(name))
            return groups.get(group) or {}
        return {}

    async def _fetch_groups(self, broker_name: str) -> dict:
        response = await self.broker_call(broker_name, Command(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}))
        if response.code != ResponseCode.SUCCESS:
            raise broker_refusal(response, broker_name)
        groups = json.loads(response.body).get("subscriptionGroupTable") or {}
        self._group_tables.put(broker_name, groups, time.monotonic() + self.settings.metadata_ttl_ms / 1000)
        return groups

    def close(self) -> None:
        if isinstance(self._calls, LoopCalls):
            self._calls.close()
        self.rpc.close()
