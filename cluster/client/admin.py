"""Admin: topics, routes, cluster info, offsets, message lookup (RocketMQ's mqadmin surface)."""

from __future__ import annotations

import json
import time

from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.base import ClientBase
from rocketbox.cluster.client.message import Message, MessageExt, MessageQueue, decode_messages
from rocketbox.cluster.client.producer import Producer
from rocketbox.cluster.client.routes import normalize_endpoint
from rocketbox.cluster.config import name_problem
from rocketbox.cluster.fastjson_format import body_json, loads as fastjson_loads
from rocketbox.cluster.rocketmq_keys import parse_properties
from rocketbox.cluster.errors import BrokerError, NoRouteError, raise_for, unreachable_error
# TOOLS_CONSUMER_GROUP (RocketMQ's MixAll name): the admin reads queues under it and never commits.
from rocketbox.cluster.protocol import (MASTER_ID, PERM_READ_WRITE, TOOLS_CONSUMER_GROUP, RequestCode, ResponseCode,
                                        dlq_topic, retry_topic)
from rocketbox.cluster.message.properties import (PROPERTY_DELAY, PROPERTY_KEYS, PROPERTY_PGROUP, PROPERTY_REAL_QID,
                                                  PROPERTY_REAL_TOPIC, PROPERTY_RETRY_TOPIC, PROPERTY_TAGS,
                                                  PROPERTY_TIMER_DELIVER_MS, PROPERTY_TRAN_MSG, PROPERTY_UNIQ_KEY)
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.topic_attributes import MESSAGE_TYPE_KEY, MESSAGE_TYPES
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import TransportError

DLQ_RESEND_PRODUCER_GROUP = "TOOLS_DLQ_RESEND"
# Carried by a dead letter's resent copy: the dead letter's offset msg id (how a resend is remembered).
PROPERTY_RESENT_FROM_DLQ = "RESENT_FROM_DLQ"
# What a resent copy leaves behind: the retry and delay bookkeeping, transaction marks; TAGS and KEYS
# travel as the message's own fields.
_NOT_RESENT = frozenset({PROPERTY_RETRY_TOPIC, "ORIGIN_MESSAGE_ID", PROPERTY_REAL_TOPIC,
                         PROPERTY_REAL_QID, PROPERTY_DELAY, PROPERTY_TIMER_DELIVER_MS, PROPERTY_TRAN_MSG,
                         PROPERTY_PGROUP, "TRANSACTION_CHECK_TIMES", PROPERTY_TAGS, PROPERTY_KEYS,
                         PROPERTY_RESENT_FROM_DLQ})
# RocketMQ's TrackType for one consumer group and one message.
CONSUMED = "CONSUMED"
NOT_CONSUME_YET = "NOT_CONSUME_YET"
DEAD_LETTERS_MAX = 10_000
# The broker waits up to 3 s for the consumer (broker/admin.py) and checks once a second.
RUNNING_INFO_WAIT_MS = 6_000


class Admin(ClientBase):
    def _namesrv_json(self, code: int, fields: dict | None = None) -> dict:
        response = self.routes.namesrv_call(lambda: Command(code, dict(fields or {})))
        raise_for(response, "namesrv")
        return body_json(response.body)

    def controller_group(self, broker_name: str) -> dict:
        """A broker group's master, epoch and sync set from the failover controller: the Raft
        leader's view when a NameServer that is leader answers, else the first answer."""
        first, failures = None, []
        for endpoint in self.cfg.namesrv_endpoints:
            try:
                response = self.rpc.call(endpoint, Command(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                                           {"brokerName": broker_name}), self.cfg.request_timeout_ms)
            except TransportError as exc:
                failures.append(exc)
                continue
            raise_for(response, endpoint)
            view = body_json(response.body)
            if view.get("isLeader"):
                return view
            first = first or view
        if first is None:
            raise unreachable_error(self.cfg.namesrv_endpoints, failures)
        return first

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
        return body_json(response.body)

    def create_topic(self, topic: str, queue_count: int = 4, *, read_queue_count: int | None = None,
                     perm: int = PERM_READ_WRITE, cluster_name: str | None = None,
                     wait_for_route_s: float = 5.0, message_type: str | None = None) -> None:
        """Create or resize ``topic`` on every master (RocketMQ's updateTopic), then wait for its route.
        ``message_type`` (one of MESSAGE_TYPES) declares what the topic takes (RocketMQ 5's
        ``-a +message.type=...``); None leaves an existing topic's type as it is, a new one takes every type."""
        problem = name_problem("topic", topic)
        if problem:
            raise ValueError(problem)
        if message_type is not None and message_type not in MESSAGE_TYPES:
            raise ValueError(f"message type {message_type!r} is not one of {', '.join(MESSAGE_TYPES)}")
        extra = {"attributes": f"+{MESSAGE_TYPE_KEY}={message_type}"} if message_type else {}
        masters = self.master_endpoints(cluster_name)
        if not masters:
            raise NoRouteError("no live broker master is registered with the NameServers")
        read = read_queue_count if read_queue_count is not None else queue_count
        for endpoint in masters.values():
            raise_for(self.rpc.call(endpoint, Command(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": topic, "readQueueNums": str(read), "writeQueueNums": str(queue_count),
                "perm": str(perm), "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false",
                **extra})), endpoint)
        self._await_route(topic, lambda r: _route_queue_total(r) == len(masters) * queue_count, wait_for_route_s)

    update_topic = create_topic

    def topic_configs(self, topic: str, cluster_name: str | None = None) -> dict[str, dict]:
        """broker name -> ``topic``'s config on that master (GET_TOPIC_CONFIG: queue counts, perm,
        ``attributes``), for every master that has the topic."""
        out = {}
        for name, endpoint in sorted(self.master_endpoints(cluster_name).items()):
            response = self.rpc.call(endpoint, Command(RequestCode.GET_TOPIC_CONFIG, {"topic": topic}))
            if response.code != ResponseCode.TOPIC_NOT_EXIST:
                raise_for(response, endpoint)
                out[name] = body_json(response.body)
        return out

    def all_topic_configs(self, endpoint: str) -> dict[str, dict]:
        """topic -> config (queue counts, perm, ``attributes``) of every topic a broker holds
        (GET_ALL_TOPIC_CONFIG, what slaves copy): one request for a whole topic list's types."""
        response = self.rpc.call(endpoint, Command(RequestCode.GET_ALL_TOPIC_CONFIG))
        raise_for(response, endpoint)
        return body_json(response.body).get("topicConfigTable") or {}

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
        """Our detailed runtime info (``detail``: also through the remoting door)."""
        response = self.rpc.call(endpoint, Command(RequestCode.GET_BROKER_RUNTIME_INFO, {"detail": "true"}))
        raise_for(response, endpoint)
        return body_json(response.body)

    def broker_status(self, endpoint: str) -> dict[str, str]:
        """mqadmin brokerStatus: RocketMQ's runtime KVTable (putTps, commitLogMaxOffset, ...)."""
        response = self.rpc.call(endpoint, Command(RequestCode.GET_BROKER_RUNTIME_INFO, {"detail": "false"}))
        raise_for(response, endpoint)
        return body_json(response.body)["table"]

    def broker_stats_data(self, endpoint: str, stats_name: str, stats_key: str) -> dict | None:
        """mqadmin statsAll's BrokerStatsData: ``statsMinute``, ``statsHour``, ``statsDay``, each
        ``sum``, ``tps``, ``avgpt``, of TOPIC_PUT_NUMS (key: topic) or GROUP_GET_NUMS (key:
        ``topic@group``); None when the broker has counted nothing under that key."""
        response = self.rpc.call(endpoint, Command(RequestCode.VIEW_BROKER_STATS_DATA,
                                                   {"statsName": stats_name, "statsKey": stats_key}))
        if response.code == ResponseCode.SYSTEM_ERROR and response.remark.endswith("not exist"):
            return None
        raise_for(response, endpoint)
        return body_json(response.body)

    def ha_status(self, endpoint: str) -> dict:
        """mqadmin haStatus: the broker's HARuntimeInfo (``master``; a master's ``haConnectionInfo``
        per slave, a slave's ``haClientRuntimeInfo``)."""
        response = self.rpc.call(endpoint, Command(RequestCode.GET_BROKER_HA_STATUS))
        raise_for(response, endpoint)
        return body_json(response.body)

    def queue_offsets(self, topic: str, group: str | None = None) -> list[dict]:
        """Per queue: min, max and (with ``group``) the group's committed offset (0 when none) and
        lag. One GET_TOPIC_STATS_INFO (and one GET_CONSUME_STATS) per broker, as mqadmin topicStatus
        and consumerProgress ask."""
        route = self.routes.get(topic, refresh=True)
        if route is None:
            raise NoRouteError(f"topic {topic} has no route")
        stats, progress = {}, {}
        rows = []
        for mq in route.subscribe_queues():
            endpoint = route.master_endpoint(mq.broker_name)
            if mq.broker_name not in stats:
                stats[mq.broker_name] = self.topic_stats(endpoint, topic)
                if group:
                    progress[mq.broker_name] = self.consume_stats(endpoint, group, topic)["offsetTable"]
            offsets = stats[mq.broker_name][mq]
            row = {"topic": mq.topic, "broker": mq.broker_name, "queueId": mq.queue_id,
                   "minOffset": offsets["minOffset"], "maxOffset": offsets["maxOffset"],
                   "lastUpdateTimestamp": offsets["lastUpdateTimestamp"]}
            if group:
                consumed = progress[mq.broker_name].get(mq, {})
                row["consumerOffset"] = consumed.get("consumerOffset", 0)
                row["lag"] = row["maxOffset"] - row["consumerOffset"]
            rows.append(row)
        return rows

    def topic_stats(self, endpoint: str, topic: str) -> dict[MessageQueue, dict]:
        """A broker's TopicStatsTable (mqadmin topicStatus): queue -> minOffset, maxOffset,
        lastUpdateTimestamp."""
        response = self.rpc.call(endpoint, Command(RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic}))
        raise_for(response, endpoint)
        return _by_message_queue(fastjson_loads(response.body).get("offsetTable") or {})

    def consume_stats(self, endpoint: str, group: str, topic: str = "") -> dict:
        """A broker's ConsumeStats of ``group`` (mqadmin consumerProgress): ``offsetTable`` queue ->
        brokerOffset, consumerOffset, lastTimestamp; and ``consumeTps``."""
        response = self.rpc.call(endpoint, Command(RequestCode.GET_CONSUME_STATS,
                                                   {"consumerGroup": group, "topic": topic}))
        raise_for(response, endpoint)
        stats = fastjson_loads(response.body)
        return {"offsetTable": _by_message_queue(stats.get("offsetTable") or {}),
                "consumeTps": stats.get("consumeTps", 0.0)}

    def update_subscription_group(self, group: str, cluster_name: str | None = None, **settings) -> None:
        """mqadmin updateSubGroup on every master: RocketMQ's SubscriptionGroupConfig fields
        (consumeEnable, retryMaxTimes, consumeBroadcastEnable, ...) as keyword arguments."""
        for endpoint in self.master_endpoints(cluster_name).values():
            self.update_subscription_group_at(endpoint, group, **settings)

    def update_subscription_group_at(self, endpoint: str, group: str, **settings) -> None:
        body = json.dumps({"groupName": group, **settings}).encode()
        raise_for(self.rpc.call(endpoint, Command(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)),
                  endpoint)

    def delete_subscription_group(self, group: str, clean_offset: bool = False,
                                  cluster_name: str | None = None) -> None:
        """mqadmin deleteSubGroup on every master; ``clean_offset`` also forgets the group's offsets."""
        for endpoint in self.master_endpoints(cluster_name).values():
            self.delete_subscription_group_at(endpoint, group, clean_offset)

    def delete_subscription_group_at(self, endpoint: str, group: str, clean_offset: bool = False) -> None:
        fields = {"groupName": group, "cleanOffset": "true" if clean_offset else "false"}
        raise_for(self.rpc.call(endpoint, Command(RequestCode.DELETE_SUBSCRIPTIONGROUP, fields)), endpoint)

    def consumer_connection(self, group: str, endpoint: str | None = None) -> dict:
        """mqadmin consumerConnection: RocketMQ's ConsumerConnection from ``endpoint``, else from the
        first master that has the group online (BrokerError CONSUMER_NOT_ONLINE when none has)."""
        refusal = None
        for endpoint in [endpoint] if endpoint else self.master_endpoints().values():
            response = self.rpc.call(endpoint, Command(RequestCode.GET_CONSUMER_CONNECTION_LIST,
                                                       {"consumerGroup": group}))
            if response.code == ResponseCode.SUCCESS:
                return body_json(response.body)
            refusal = (response, endpoint)
        if refusal is None:
            raise NoRouteError("no broker master is registered")
        raise_for(*refusal)

    def broker_config(self, endpoint: str) -> dict[str, str]:
        """mqadmin getBrokerConfig: the broker's settings under RocketMQ's keys."""
        response = self.rpc.call(endpoint, Command(RequestCode.GET_BROKER_CONFIG))
        raise_for(response, endpoint)
        return parse_properties(response.body.decode())

    def update_broker_config(self, endpoint: str, settings: dict[str, str]) -> None:
        """mqadmin updateBrokerConfig: settings the broker lets change while it runs, by their keys."""
        body = "".join(f"{key}={value}\n" for key, value in settings.items()).encode()
        response = self.rpc.call(endpoint, Command(RequestCode.UPDATE_BROKER_CONFIG, body=body))
        raise_for(response, endpoint)

    def delete_expired_commitlog(self, endpoint: str) -> None:
        """mqadmin deleteExpiredCommitLog: the broker's retention deletes expired segments now
        instead of at deleteWhen (the answer comes before the files go, as RocketMQ's)."""
        response = self.rpc.call(endpoint, Command(RequestCode.DELETE_EXPIRED_COMMITLOG))
        raise_for(response, endpoint)

    def subscription_groups(self, endpoint: str) -> dict[str, dict]:
        response = self.rpc.call(endpoint, Command(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        raise_for(response, endpoint)
        return body_json(response.body).get("subscriptionGroupTable") or {}

    def reset_offset_by_time(self, topic: str, group: str, timestamp_ms: int,
                             force: bool = True) -> dict[MessageQueue, int]:
        """Move ``group``'s offsets of ``topic`` to the first messages stored at or after ``timestamp_ms``
        (-1: the end), on every master of the topic (RocketMQ's resetOffsetByTime, INVOKE_BROKER_TO_RESET_OFFSET).
        Online members drop those queues and restart from there at once. Without ``force`` a committed
        offset already earlier than the time's is kept. A broker with no member of the group online
        gets the offsets committed directly (RocketMQ's resetOffsetByTimestampOld). The new offsets."""
        route = self.routes.get(topic, refresh=True)
        if route is None:
            raise NoRouteError(f"topic {topic} has no route")
        offsets: dict[MessageQueue, int] = {}
        for name in sorted(route.broker_addrs):
            endpoint = route.master_endpoint(name)
            if endpoint is None:
                raise NoRouteError(f"no live master for {name} of topic {topic}: its offsets cannot be reset")
            reset = broker_api.reset_offset(self.rpc, endpoint, topic, group, timestamp_ms, force)
            if reset is None:  # no member online: set the committed offsets ourselves
                reset = {}
                for mq in (q for q in route.subscribe_queues() if q.broker_name == name):
                    target = (broker_api.max_offset(self.rpc, endpoint, mq) if timestamp_ms < 0
                              else broker_api.search_offset(self.rpc, endpoint, mq, timestamp_ms))
                    committed = broker_api.query_consumer_offset(self.rpc, endpoint, group, mq)
                    if not force and committed is not None and committed <= target:
                        target = committed
                    broker_api.update_consumer_offset(self.rpc, endpoint, group, mq, target)
                    reset[mq] = target
            offsets.update(reset)
        return offsets

    def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message an offset message id names: the broker reads it at its CommitLog offset.

        Only a broker of this cluster is asked: any 32 hex characters parse as an offset id (a
        UNIQ_KEY does too), and the address inside must not send a request anywhere else."""
        ip, port, phys_offset = parse_offset_msg_id(offset_msg_id)
        known = {address for data in self.cluster_info()["brokerAddrTable"].values()
                 for door in ("brokerAddrs", "remotingAddrs") for address in (data.get(door) or {}).values()}
        if f"{ip}:{port}" not in known:
            raise NoRouteError(f"{offset_msg_id} is not an offset message id of this cluster: no broker of it "
                               f"is at {ip}:{port}")
        endpoint = self.routes.store_host_endpoint(ip, port)
        response = self.rpc.call(endpoint, Command(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phys_offset)}))
        raise_for(response, endpoint)
        names = {e: n for n, e in self.master_endpoints().items()}
        return decode_messages(response.body, names.get(endpoint, ""))[0]

    def query_by_unique_key(self, topic: str, msg_id: str, max_num: int = 32) -> list[MessageExt]:
        """The message whose UNIQ_KEY (the msg id its producer made) is ``msg_id``, found through the
        IndexFile's ``topic#UNIQ_KEY`` entry (RocketMQ's queryMessageByUniqKey); more than one when the
        producer retried a send."""
        return [m for m in self.query_by_key(topic, msg_id, max_num)
                if m.properties.get(PROPERTY_UNIQ_KEY) == msg_id]

    def _master(self, topic: str, broker_name: str) -> str:
        for refresh in (False, True):
            route = self.routes.get(topic, refresh=refresh)
            endpoint = route.master_endpoint(broker_name) if route else None
            if endpoint:
                return endpoint
        raise NoRouteError(f"no live master for {broker_name} of topic {topic}")

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32) -> broker_api.PullResult:
        """Messages of ``mq`` from ``offset``, read as the tools group: nothing is committed."""
        endpoint = self._master(mq.topic, mq.broker_name)
        request = broker_api.pull_request(TOOLS_CONSUMER_GROUP, mq, offset, max_nums, "*", 0)
        return broker_api.pull_result(self.rpc.call(endpoint, request), mq, endpoint, None)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The first offset of ``mq`` stored at or after ``timestamp_ms`` (its max offset when none)."""
        return broker_api.search_offset(self.rpc, self._master(mq.topic, mq.broker_name), mq, timestamp_ms)

    def message_at(self, mq: MessageQueue, offset: int) -> MessageExt | None:
        """The message at queue offset ``offset`` of ``mq`` (a pull of one), or None."""
        return next((m for m in self.pull(mq, offset, 1).messages if m.queue_offset == offset), None)

    def groups_of(self, topic: str) -> set[str]:
        """The consumer groups with offsets on ``topic`` or online subscribing to it, on any of its brokers."""
        route = self.routes.get(topic, refresh=True)
        if route is None:
            raise NoRouteError(f"topic {topic} has no route")
        groups: set[str] = set()
        for name in sorted(route.broker_addrs):
            endpoint = route.master_endpoint(name)
            if endpoint is not None:
                groups.update(broker_api.query_topic_consume_by_who(self.rpc, endpoint, topic))
        return groups

    def message_track(self, message: MessageExt) -> list[dict]:
        """Per consumer group of the message's topic on its broker (QUERY_TOPIC_CONSUME_BY_WHO): CONSUMED
        when the group's committed offset of the message's queue is past the message, else NOT_CONSUME_YET
        (RocketMQ's messageTrackDetail / TrackType)."""
        ip, port, _ = parse_offset_msg_id(message.offset_msg_id)
        endpoint = self.routes.store_host_endpoint(ip, port)
        mq = MessageQueue(message.topic, message.broker_name, message.queue_id)
        tracks = []
        for group in broker_api.query_topic_consume_by_who(self.rpc, endpoint, message.topic):
            offset = broker_api.query_consumer_offset(self.rpc, endpoint, group, mq)
            consumed = offset is not None and offset > message.queue_offset
            tracks.append({"consumerGroup": group, "trackType": CONSUMED if consumed else NOT_CONSUME_YET,
                           "consumerOffset": offset})
        return tracks

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

    def consumer_groups(self) -> dict[str, dict]:
        """group -> its subscription group config (retryMaxTimes, consumeEnable, ...), over every master."""
        groups: dict[str, dict] = {}
        for endpoint in self.master_endpoints().values():
            for name, config in self.subscription_groups(endpoint).items():
                groups.setdefault(name, config)
        return groups

    def message_retries(self, message: MessageExt, groups) -> list[MessageExt]:
        """The copies of ``message`` that ``groups`` sent back: in each group's retry topic (one per
        failed delivery, ``reconsume_times`` counting them) and dead-letter topic, found by its
        UNIQ_KEY through the IndexFile; oldest first."""
        copies = []
        for group in sorted(groups):
            for topic in (retry_topic(group), dlq_topic(group)):
                try:
                    copies.extend(m for m in self.query_by_key(topic, message.msg_id, 64)
                                  if m.msg_id == message.msg_id)
                except NoRouteError:
                    continue   # the group never failed a message: no such topic
        return sorted(copies, key=lambda m: m.store_timestamp_ms)

    def consumer_running_info(self, endpoint: str, group: str, client_id: str, jstack: bool = False) -> dict:
        """mqadmin consumerStatus: the member's own ConsumerRunningInfo, relayed by the broker
        (``mqTable`` keyed by MessageQueue; with ``jstack``, its threads' stacks in ``jstack``)."""
        response = self.rpc.call(endpoint, Command(RequestCode.GET_CONSUMER_RUNNING_INFO, {
            "consumerGroup": group, "clientId": client_id, "jstackEnable": str(jstack).lower()}),
            max(self.cfg.request_timeout_ms, RUNNING_INFO_WAIT_MS))
        raise_for(response, endpoint)
        info = fastjson_loads(response.body)
        info["mqTable"] = _by_message_queue(info.get("mqTable") or {})
        return info

    def consumer_ids(self, topic: str, group: str) -> list[str]:
        route = self.routes.get(topic, refresh=True)
        for name in sorted(route.broker_addrs if route else []):
            endpoint = route.master_endpoint(name)
            try:
                return broker_api.consumer_ids(self.rpc, endpoint, group)
            except BrokerError:
                continue
        return []


    # ------------------------------------------------------------ dead letters

    def dead_letters(self, group: str, max_num: int = DEAD_LETTERS_MAX) -> list[MessageExt]:
        """The messages in ``%DLQ%<group>`` (on every broker that has one), oldest first per broker."""
        route = self.routes.get(dlq_topic(group), refresh=True)
        letters: list[MessageExt] = []
        for mq in route.subscribe_queues() if route else []:
            offset = broker_api.min_offset(self.rpc, self._master(mq.topic, mq.broker_name), mq)
            while len(letters) < max_num:
                result = self.pull(mq, offset, min(32, max_num - len(letters)))
                if not result.messages or result.next_begin_offset <= offset:
                    break
                letters.extend(result.messages)
                offset = result.next_begin_offset
        return letters[:max_num]

    def dead_letter(self, group: str, msg_id: str) -> list[MessageExt]:
        """The dead letters of ``group`` whose msg id (UNIQ_KEY) or offset msg id is ``msg_id``: one,
        or more when the message died again after a resend."""
        return [m for m in self.dead_letters(group) if msg_id in (m.msg_id, m.offset_msg_id)]

    def dead_letter_resent(self, letter: MessageExt) -> bool:
        """Whether ``letter`` was resent: its original topic holds a copy marked with the letter's
        offset msg id (found through the IndexFile by the UNIQ_KEY the copy shares)."""
        topic = letter.properties.get(PROPERTY_RETRY_TOPIC)
        if not topic:
            return False
        try:
            copies = self.query_by_key(topic, letter.msg_id, 64)
        except NoRouteError:
            return False
        return any(m.properties.get(PROPERTY_RESENT_FROM_DLQ) == letter.offset_msg_id for m in copies)

    def resend_dead_letters(self, group: str, msg_ids=None, *, force: bool = False,
                            producer_group: str = DLQ_RESEND_PRODUCER_GROUP, index_wait_s: float = 5.0) -> list[dict]:
        """Send dead letters of ``group`` (all, or those whose msg id or offset msg id is in ``msg_ids``)
        back to their original topic (RETRY_TOPIC) as normal messages: same body, flag, tags, keys, user
        properties and UNIQ_KEY, reconsumeTimes 0. A letter already resent is skipped unless ``force``.

        One row per letter: status RESENT (with where the copy went), ALREADY_RESENT, or NO_ORIGIN_TOPIC.
        Returns once the copies are in the IndexFile, so a resend right after this one sees them."""
        letters = self.dead_letters(group)
        if msg_ids is not None:
            wanted = set(msg_ids)
            letters = [m for m in letters if m.msg_id in wanted or m.offset_msg_id in wanted]
        rows, resent = [], []
        with Producer(producer_group, config=self.cfg) as producer:
            for letter in letters:
                topic = letter.properties.get(PROPERTY_RETRY_TOPIC)
                row = {"msgId": letter.msg_id, "dlqOffsetMsgId": letter.offset_msg_id, "topic": topic}
                if not topic:
                    row["status"] = "NO_ORIGIN_TOPIC"
                elif not force and self.dead_letter_resent(letter):
                    row["status"] = "ALREADY_RESENT"
                else:
                    r = producer.send(_resend_copy(letter, topic))
                    row.update(status="RESENT", offsetMsgId=r.offset_msg_id, broker=r.queue.broker_name,
                               queueId=r.queue.queue_id, queueOffset=r.queue_offset)
                    resent.append(letter)
                rows.append(row)
        deadline = time.monotonic() + index_wait_s
        while resent and time.monotonic() < deadline:
            resent = [letter for letter in resent if not self.dead_letter_resent(letter)]
            if resent:
                time.sleep(0.02)
        return rows


def _resend_copy(letter: MessageExt, topic: str) -> Message:
    properties = {k: v for k, v in letter.properties.items() if k not in _NOT_RESENT}
    properties[PROPERTY_UNIQ_KEY] = letter.msg_id
    properties[PROPERTY_RESENT_FROM_DLQ] = letter.offset_msg_id
    return Message(topic, letter.body, tags=letter.tags, keys=letter.keys or None, properties=properties,
                   flag=letter.flag)


def _route_queue_total(route: dict) -> int:
    return sum(q["writeQueueNums"] for q in route["queueDatas"])


def _by_message_queue(table: dict) -> dict[MessageQueue, dict]:
    """A fastjson map keyed by MessageQueue objects, keyed by our MessageQueue."""
    out = {}
    for key, value in table.items():
        fields = key.as_dict()
        out[MessageQueue(fields["topic"], fields["brokerName"], int(fields["queueId"]))] = value
    return out


__all__ = ["Admin", "MessageQueue"]
