"""The NameServer: a routing registry (pure state) and the handlers that serve it.

NameServers never talk to each other; every broker registers with all of them, so
each holds the whole picture and losing one loses nothing (SPEC §1). A broker that
has not re-registered for ``broker_expiry_ms`` is dropped from every route.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from rocketbox.cluster.config import NamesrvConfig, name_problem
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.namesrv_admin import NamesrvAdmin, apply_stored_config
from rocketbox.cluster.namesrv_kv import FILE_NAME as KV_FILE_NAME, NAMESPACE_ORDER_TOPIC_CONFIG, KvConfig, KvConfigRequests
from rocketbox.cluster.protocol import (PERM_READ_WRITE, PERM_WRITE, answers_refusals, MASTER_ID, ProtocolError,
                                        RequestCode, ResponseCode, field_int, field_str, json_body, to_json_bytes)
from rocketbox.cluster.wire_format import DOOR_NATIVE, DOOR_REMOTING, Command

log = logging.getLogger(__name__)
# Registrations are a peer's doing (without access control anyone's): a burst per window.
_limited = RateLimitedLog(log)

CONTROLLER_CODES = (RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_REGISTER_BROKER,
                    RequestCode.CONTROLLER_GET_REPLICA_INFO, RequestCode.CONTROLLER_GET_METADATA_INFO)


@dataclass
class LiveBroker:
    cluster_name: str
    broker_name: str
    broker_id: int
    address: str
    last_heartbeat_ms: int
    ha_address: str = ""
    # Controller mode: the epoch of a master's term (0 without a controller).
    epoch: int = 0
    # Its RocketMQ remoting door, host:port ("" when it serves none): what routes asked for
    # through a remoting door carry instead of ``address``.
    remoting_address: str = ""
    # The DataVersion of the topic table it last registered ({"counter", "timestamp"}; RocketMQ's
    # brokers send one, ours none): what QUERY_DATA_VERSION compares.
    data_version: dict | None = None

    def address_for(self, door: str) -> str:
        return self.remoting_address if door == DOOR_REMOTING else self.address


@dataclass
class RouteTable:
    """Brokers and topic routes. Pure: time is passed in."""

    # address -> LiveBroker
    brokers: dict[str, LiveBroker] = field(default_factory=dict)
    # topic -> broker name -> queue data (readQueueNums, writeQueueNums, perm, topicSysFlag)
    topics: dict[str, dict[str, dict]] = field(default_factory=dict)
    # broker name -> the highest epoch a master of it registered with (controller mode)
    master_epochs: dict[str, int] = field(default_factory=dict)
    # Broker names whose routes lost the write bit (mqadmin wipeWritePerm), until addWritePerm:
    # later registrations keep it off (RocketMQ's stays off until the broker's topics change).
    write_wiped: set[str] = field(default_factory=set)

    def fence(self, broker: LiveBroker) -> None:
        """Refuse a master of an older epoch than one already seen; a newer one replaces the old.

        A master that was stopped and is resumed registers before it learns it was replaced:
        without this the route would flip back to it."""
        if broker.broker_id != MASTER_ID:
            return
        known = self.master_epochs.get(broker.broker_name, 0)
        if broker.epoch < known:
            raise ProtocolError(f"stale master: {broker.broker_name} at {broker.address} has epoch {broker.epoch}, "
                                f"the group is at epoch {known}")
        if broker.epoch > known:
            self.master_epochs[broker.broker_name] = broker.epoch
            for other in [b for b in self.brokers.values() if b.broker_name == broker.broker_name
                          and b.broker_id == MASTER_ID and b.address != broker.address]:
                del self.brokers[other.address]

    def register(self, broker: LiveBroker, topic_configs: dict[str, dict] | None) -> None:
        """Record a registration; all or nothing (a bad topic config changes no state)."""
        queue_datas = {}
        if topic_configs is not None and broker.broker_id == MASTER_ID:
            # Slaves serve reads of their master's queues; only masters define routes.
            for topic, cfg in topic_configs.items():
                queue_datas[topic] = {
                    "brokerName": broker.broker_name,
                    "readQueueNums": int(cfg.get("readQueueNums", 0)),
                    "writeQueueNums": int(cfg.get("writeQueueNums", 0)),
                    "perm": int(cfg.get("perm", 6)) & (~PERM_WRITE if broker.broker_name in self.write_wiped else 7),
                    "topicSysFlag": int(cfg.get("topicSysFlag", 0)),
                }
        self.fence(broker)
        self.brokers[broker.address] = broker
        if topic_configs is None or broker.broker_id != MASTER_ID:
            return
        for topic, queue_data in queue_datas.items():
            self.topics.setdefault(topic, {})[broker.broker_name] = queue_data
        # A topic the master no longer has was deleted on it.
        for topic, per_broker in list(self.topics.items()):
            if broker.broker_name in per_broker and topic not in topic_configs:
                del per_broker[broker.broker_name]
                if not per_broker:
                    del self.topics[topic]

    def unregister(self, address: str) -> LiveBroker | None:
        broker = self.brokers.pop(address, None)
        if broker is not None and broker.broker_id == MASTER_ID:
            self._drop_master_routes(broker.broker_name)
        return broker

    def _drop_master_routes(self, broker_name: str) -> None:
        if any(b.broker_name == broker_name and b.broker_id == MASTER_ID for b in self.brokers.values()):
            return
        for topic, per_broker in list(self.topics.items()):
            per_broker.pop(broker_name, None)
            if not per_broker:
                del self.topics[topic]

    def expire(self, now_ms: int, expiry_ms: int) -> list[LiveBroker]:
        gone = [b for b in self.brokers.values() if now_ms - b.last_heartbeat_ms > expiry_ms]
        for broker in gone:
            self.unregister(broker.address)
        return gone

    def delete_topic(self, topic: str, cluster_name: str = "") -> bool:
        """Forget ``topic``'s route; with ``cluster_name`` only that cluster's brokers' part of it."""
        if not cluster_name:
            return self.topics.pop(topic, None) is not None
        per_broker = self.topics.get(topic, {})
        removed = [per_broker.pop(name) for name in self.cluster_brokers(cluster_name) if name in per_broker]
        if not per_broker:
            self.topics.pop(topic, None)
        return bool(removed)

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """wipeWritePerm / addWritePerm: every route of ``broker_name`` loses the write bit, or gets
        read and write back (RocketMQ sets both); how many topics that touched."""
        if writable:
            self.write_wiped.discard(broker_name)
        else:
            self.write_wiped.add(broker_name)
        touched = 0
        for per_broker in self.topics.values():
            queue_data = per_broker.get(broker_name)
            if queue_data is not None:
                queue_data["perm"] = PERM_READ_WRITE if writable else queue_data["perm"] & ~PERM_WRITE
                touched += 1
        return touched

    def cluster_brokers(self, cluster_name: str) -> set[str]:
        return {b.broker_name for b in self.brokers.values() if b.cluster_name == cluster_name}

    def broker_addrs(self, broker_name: str, door: str = DOOR_NATIVE) -> dict[str, str]:
        """Broker id -> address of ``door`` (brokers without that door left out)."""
        return {str(b.broker_id): b.address_for(door) for b in self.brokers.values()
                if b.broker_name == broker_name and b.address_for(door)}

    def route(self, topic: str, door: str = DOOR_NATIVE) -> dict | None:
        """TopicRouteData as RocketMQ serialises it, with the addresses of ``door``; None for an
        unknown topic."""
        per_broker = self.topics.get(topic)
        if not per_broker:
            return None
        queue_datas = [dict(q) for _, q in sorted(per_broker.items())]
        broker_datas = []
        for broker_name in sorted(per_broker):
            addrs = self.broker_addrs(broker_name, door)
            if not addrs:
                continue
            cluster = next(b.cluster_name for b in self.brokers.values() if b.broker_name == broker_name)
            broker_datas.append({"cluster": cluster, "brokerName": broker_name, "brokerAddrs": addrs})
        if not broker_datas:
            return None
        return {"orderTopicConf": None, "queueDatas": queue_datas, "brokerDatas": broker_datas,
                "filterServerTable": {}}

    def cluster_info(self, door: str = DOOR_NATIVE) -> dict:
        """ClusterInfo with the addresses of ``door``; through the native door each broker entry
        also lists its remoting addresses (``remotingAddrs``), so an offset message id (which
        names the remoting door when there is one) can be traced to its broker."""
        broker_addr_table: dict[str, dict] = {}
        cluster_addr_table: dict[str, list[str]] = {}
        for b in self.brokers.values():
            if not b.address_for(door):
                continue
            entry = broker_addr_table.setdefault(
                b.broker_name, {"cluster": b.cluster_name, "brokerName": b.broker_name, "brokerAddrs": {}})
            entry["brokerAddrs"][str(b.broker_id)] = b.address_for(door)
            if door == DOOR_NATIVE and b.remoting_address:
                entry.setdefault("remotingAddrs", {})[str(b.broker_id)] = b.remoting_address
            names = cluster_addr_table.setdefault(b.cluster_name, [])
            if b.broker_name not in names:
                names.append(b.broker_name)
        return {"brokerAddrTable": broker_addr_table, "clusterAddrTable": cluster_addr_table}


def address_problem(address: str) -> str | None:
    """Why ``address`` is not a usable host:port for routes, or None."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536 or any(c in host for c in " /[]@"):
        return f"broker address {address[:80]!r} is not host:port"
    return None


class NamesrvService:
    """Request handlers of one NameServer process."""

    def __init__(self, cfg: NamesrvConfig, clock_ms=lambda: int(time.time() * 1000), controller=None):
        # Settings an earlier updateNamesrvConfig changed hold again (namesrv_admin.py).
        self.cfg = cfg = apply_stored_config(cfg)
        self.clock_ms = clock_ms
        self.table = RouteTable()
        self.kv = KvConfig(os.path.join(cfg.data_dir, KV_FILE_NAME) if cfg.data_dir else "")
        kv_requests = KvConfigRequests(self.kv)
        # Refusals of access control per door and kind (procs/namesrv.py sets it when access control is on).
        self.acl_refusals = lambda: []
        # The failover controller's handlers (cluster/controller/service.py) when this node runs one.
        controller_handlers = controller.handlers if controller is not None else {
            code: self.on_no_controller for code in CONTROLLER_CODES}
        self.handlers = {
            **controller_handlers,
            RequestCode.REGISTER_BROKER: self.on_register_broker,
            RequestCode.UNREGISTER_BROKER: self.on_unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.on_get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.on_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.on_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.on_delete_topic,
            RequestCode.PUT_KV_CONFIG: kv_requests.on_put,
            RequestCode.GET_KV_CONFIG: kv_requests.on_get,
            RequestCode.DELETE_KV_CONFIG: kv_requests.on_delete,
            RequestCode.GET_KVLIST_BY_NAMESPACE: kv_requests.on_list,
            RequestCode.GET_NAMESRV_METRICS: self.on_metrics,
            **NamesrvAdmin(self).handlers(),
        }

    @staticmethod
    def on_no_controller(request: Command, reply=None) -> Command:
        return request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                remark="this NameServer runs no controller (cluster up --failover starts one)")

    def scan_expired(self) -> None:
        for broker in self.table.expire(self.clock_ms(), self.cfg.broker_expiry_ms):
            _limited.warning("expired", "broker %s (%s id %d) silent for over %d ms: dropped from routes",
                             broker.address, broker.broker_name, broker.broker_id, self.cfg.broker_expiry_ms)

    @answers_refusals
    def on_register_broker(self, request: Command, reply=None) -> Command:
        body = json_body(request)
        broker = LiveBroker(
            cluster_name=field_str(request, "clusterName"),
            broker_name=field_str(request, "brokerName"),
            broker_id=field_int(request, "brokerId"),
            address=field_str(request, "brokerAddr"),
            last_heartbeat_ms=self.clock_ms(),
            ha_address=request.fields.get("haServerAddr", ""),
            epoch=field_int(request, "masterEpoch", 0),
            remoting_address=request.fields.get("remotingAddr", ""),
            data_version=body.get("dataVersion") if isinstance(body.get("dataVersion"), dict) else None,
        )
        problem = (name_problem("broker", broker.broker_name) or address_problem(broker.address)
                   or (broker.remoting_address and address_problem(broker.remoting_address)))
        if problem:
            raise ProtocolError(problem)
        topic_configs = body.get("topicConfigTable")
        if topic_configs is not None and not (isinstance(topic_configs, dict) and
                                              all(isinstance(c, dict) for c in topic_configs.values())):
            raise ProtocolError("topicConfigTable must be an object of topic -> config objects")
        is_new = broker.address not in self.table.brokers
        self.table.register(broker, topic_configs)
        if is_new:
            _limited.info("registered", "broker registered: %s %s id %d at %s", broker.cluster_name,
                          broker.broker_name, broker.broker_id, broker.address)
        # RocketMQ answers with the order config KVTable (its brokers mark those topics orderly).
        order_conf = self.kv.namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"table": order_conf}) if order_conf else b"")

    @answers_refusals
    def on_unregister_broker(self, request: Command, reply=None) -> Command:
        gone = self.table.unregister(field_str(request, "brokerAddr"))
        if gone:
            _limited.info("unregistered", "broker unregistered: %s", gone.address)
        return request.response(ResponseCode.SUCCESS)

    @answers_refusals
    def on_get_route(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        route = self.table.route(topic, request.door)
        if route is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST,
                                    remark=f"No topic route info in name server for the topic: {topic}")
        if self.cfg.order_message_enable:
            route["orderTopicConf"] = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, topic)
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(route))

    def on_cluster_info(self, request: Command, reply=None) -> Command:
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes(self.table.cluster_info(request.door)))

    def on_topic_list(self, request: Command, reply=None) -> Command:
        return request.response(ResponseCode.SUCCESS,
                                body=to_json_bytes({"topicList": sorted(self.table.topics)}))

    def on_metrics(self, request: Command, reply=None) -> Command:
        """What the cluster's metrics exporter publishes about this NameServer (``metrics/families.py``)."""
        return request.response(ResponseCode.SUCCESS, body=to_json_bytes({"aclRefusals": self.acl_refusals()}))

    @answers_refusals
    def on_delete_topic(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        self.table.delete_topic(topic, request.fields.get("clusterName") or "")
        return request.response(ResponseCode.SUCCESS)
