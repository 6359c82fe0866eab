"""Admin: topics, routes, cluster info, offsets, message lookup (RocketMQ's mqadmin surface)."""

from __future__ import annotations

import json
import time

from cluster.client import broker_api
from cluster.client.base import ClientBase
from cluster.client.message import MessageExt, MessageQueue, decode_messages
from cluster.client.routes import normalize_endpoint
from cluster.config import name_problem
from cluster.errors import BrokerError, NoRouteError, raise_for
from cluster.protocol import MASTER_ID, PERM_READ_WRITE, RequestCode, ResponseCode
from cluster.shm.commitlog_format import parse_offset_msg_id
from cluster.wire_format import Command
from cluster.zmq_transport import TransportError


class Admin(ClientBase):
    def _namesrv_json(self, code: int, fields: dict | None = None) -> dict:
        response = self.routes.namesrv_call(lambda: Command(code, dict(fields or {})))
        raise_for(response, "namesrv")
        return json.loads(response.body)

    def cluster_info(self) -> dict:
        return self._namesrv_json(RequestCode.GET_BROKER_CLUSTER_INFO)

    def master_endpoints(self, cluster_name: str | None = None) -> dict[str, str]:
        """broker name -> master RPC endpoint, for every live broker group (of one cluster)."""
        info = self.cluster_info()
        names = None
        if cluster_name:
            names = set(info["clusterAddrTable"].get(cluster_name, []))
        out = {}
        for name, data in info["brokerAddrTable"].items():
            addr = data["brokerAddrs"].get(str(MASTER_ID))
            if addr and (names is None or name in names):
                out[name] = normalize_endpoint(addr)
        return out

    def topic_list(self) -> list[str]:
        return list(self._namesrv_json(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)["topicList"])

    def route(self, topic: str) -> dict:
        response = self.routes.namesrv_call(lambda: Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if response.code == ResponseCode.TOPIC_NOT_EXIST:
            raise NoRouteError(response.remark)
        raise_for(response, "namesrv")
        return json.loads(response.body)

    def create_topic(self, topic: str, queue_count: int = 4, *, read_queue_count: int | None = None,
                     perm: int = PERM_READ_WRITE, cluster_name: str | None = None,
                     wait_for_route_s: float = 5.0) -> None:
        """Create or resize ``topic`` on every master (RocketMQ's updateTopic), then wait for its route."""
        problem = name_problem("topic", topic)
        if problem:
            raise ValueError(problem)
        masters = self.master_endpoints(cluster_name)
        if not masters:
            raise NoRouteError("no live broker master is registered with the NameServers")
        read = read_queue_count if read_queue_count is not None else queue_count
        for endpoint in masters.values():
            raise_for(self.rpc.call(endpoint, Command(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "readQueueNums": str(read), "writeQueueNums": str(queue_count),
                "perm": str(perm), "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})),
                endpoint)
        self._await_route(topic, lambda r: _route_queue_total(r) == len(masters) * queue_count, wait_for_route_s)

    update_topic = create_topic

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        for endpoint in self.master_endpoints(cluster_name).values():
            response = self.rpc.call(endpoint, Command(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}))
            raise_for(response, endpoint, ok=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
        for endpoint in self.cfg.namesrv_endpoints:
            try:
                raise_for(self.rpc.call(endpoint, Command(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})),
                          endpoint)
            except TransportError:
                pass  # that NameServer is down; the brokers' next registration tells it

    def _await_route(self, topic: str, condition, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                route = self.route(topic)
                if condition(route):
                    self.routes.get(topic, refresh=True)
                    return
            except NoRouteError:
                pass
            if time.monotonic() >= deadline:
                raise NoRouteError(f"the route of {topic} did not reach the NameServers within {timeout_s} s")
            time.sleep(0.02)

    def broker_runtime_info(self, endpoint: str) -> dict:
        response = self.rpc.call(endpoint, Command(RequestCode.GET_BROKER_RUNTIME_INFO))
        raise_for(response, endpoint)
        return json.loads(response.body)

    def queue_offsets(self, topic: str, group: str | None = None) -> list[dict]:
        """Per queue: min, max and (with ``group``) the group's committed offset and lag."""
        route = self.routes.get(topic, refresh=True)
        if route is None:
            raise NoRouteError(f"topic {topic} has no route")
        rows = []
        for mq in route.subscribe_queues():
            endpoint = route.master_endpoint(mq.broker_name)
            row = {"topic": mq.topic, "broker": mq.broker_name, "queueId": mq.queue_id,
                   "minOffset": broker_api.min_offset(self.rpc, endpoint, mq),
                   "maxOffset": broker_api.max_offset(self.rpc, endpoint, mq)}
            if group:
                committed = broker_api.query_consumer_offset(self.rpc, endpoint, group, mq)
                row["consumerOffset"] = committed
                row["lag"] = row["maxOffset"] - (committed or 0)
            rows.append(row)
        return rows

    def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offset message id names: the broker reads it at its CommitLog offset."""
        ip, port, phys_offset = parse_offset_msg_id(offset_msg_id)
        endpoint = f"tcp://{ip}:{port}"
        response = self.rpc.call(endpoint, Command(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phys_offset)}))
        raise_for(response, endpoint)
        return decode_messages(response.body)[0]

    def query_by_key(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                     end_ms: int | None = None) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS or UNIQ_KEY is ``key``, stored within [begin, end]."""
        route = self.routes.get(topic, refresh=True)
        if route is None:
            raise NoRouteError(f"topic {topic} has no route")
        end_ms = end_ms if end_ms is not None else int(time.time() * 1000) + 60_000
        found: list[MessageExt] = []
        for name in sorted(route.broker_addrs):
            endpoint = route.master_endpoint(name)
            if endpoint is None:
                continue
            response = self.rpc.call(endpoint, Command(RequestCode.QUERY_MESSAGE, {
                "topic": topic, "key": key, "maxNum": str(max_num), "beginTimestamp": str(begin_ms),
                "endTimestamp": str(end_ms)}))
            if response.code == ResponseCode.QUERY_NOT_FOUND:
                continue
            raise_for(response, endpoint)
            found.extend(decode_messages(response.body, name))
        return found[:max_num]

    def consumer_ids(self, topic: str, group: str) -> list[str]:
        route = self.routes.get(topic, refresh=True)
        for name in sorted(route.broker_addrs if route else []):
            endpoint = route.master_endpoint(name)
            try:
                return broker_api.consumer_ids(self.rpc, endpoint, group)
            except BrokerError:
                continue
        return []


def _route_queue_total(route: dict) -> int:
    return sum(q["writeQueueNums"] for q in route["queueDatas"])


__all__ = ["Admin", "MessageQueue"]
