"""mqadmin's NameServer verbs and its rarer broker verbs, for RocketBox's Admin (``cli/mqadmin_more.py``).

Each takes an ``Admin`` (its RPC client, NameServers and routes) and makes RocketMQ's request:
the KV config and ``updateOrderConf`` (PUT/GET/DELETE_KV_CONFIG; written to
every NameServer, as RocketMQ's tools do), the NameServers' settings (GET/UPDATE_NAMESRV_CONFIG),
a broker's write permission in the routes (WIPE/ADD_WRITE_PERM_OF_BROKER, on every NameServer),
and per broker: producer connections (204, 328), every group's consume stats (317), ConsumeQueue
entries (321), cleaning (306, 316), cloning a group's offsets (314), and asking a consumer to
consume one message (309).
"""

from __future__ import annotations

import json

from rocketbox.cluster.errors import BrokerError, raise_for
from rocketbox.cluster.fastjson_format import loads as fastjson_loads
from rocketbox.cluster.protocol import MessageQueue, RequestCode, ResponseCode
from rocketbox.cluster.rocketmq_keys import parse_properties, properties_text
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.wire_format import Command

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"
# The broker gives the consumer 10 s to run its listener on the message.
CONSUME_DIRECTLY_WAIT_MS = 15_000


def _each_namesrv(admin, code: int, fields: dict | None = None, body: bytes = b"") -> dict[str, Command]:
    """The same request to every NameServer: endpoint -> its answer (a refusal raises)."""
    answers = {}
    for endpoint in admin.cfg.namesrv_endpoints:
        response = admin.rpc.call(endpoint, Command(code, dict(fields or {}), body), admin.cfg.request_timeout_ms)
        raise_for(response, endpoint)
        answers[endpoint] = response
    return answers


def _broker(admin, endpoint: str, code: int, fields: dict | None = None, timeout_ms: int | None = None) -> Command:
    response = admin.rpc.call(endpoint, Command(code, {k: str(v) for k, v in (fields or {}).items()}),
                              timeout_ms or admin.cfg.request_timeout_ms)
    raise_for(response, endpoint)
    return response


# ---------------------------------------------------------------- NameServers

def put_kv_config(admin, namespace: str, key: str, value: str) -> None:
    _each_namesrv(admin, RequestCode.PUT_KV_CONFIG, {"namespace": namespace, "key": key, "value": value})


def delete_kv_config(admin, namespace: str, key: str) -> None:
    _each_namesrv(admin, RequestCode.DELETE_KV_CONFIG, {"namespace": namespace, "key": key})


def kv_config(admin, namespace: str, key: str) -> str | None:
    """The value the first NameServer that answers holds; None when it holds none."""
    response = admin.routes.namesrv_call(lambda: Command(RequestCode.GET_KV_CONFIG, {"namespace": namespace, "key": key}))
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    raise_for(response, "namesrv")
    return response.fields.get("value")


def namesrv_configs(admin) -> dict[str, dict[str, str]]:
    """Each NameServer's settings, endpoint -> key -> value."""
    return {endpoint: parse_properties(answer.body.decode("utf-8", "replace"))
            for endpoint, answer in _each_namesrv(admin, RequestCode.GET_NAMESRV_CONFIG).items()}


def update_namesrv_config(admin, settings: dict[str, str]) -> None:
    _each_namesrv(admin, RequestCode.UPDATE_NAMESRV_CONFIG, body=properties_text(settings).encode())


def set_write_perm(admin, broker_name: str, writable: bool) -> dict[str, int]:
    """wipeWritePerm / addWritePerm on every NameServer: endpoint -> the topics it changed."""
    code, count = ((RequestCode.ADD_WRITE_PERM_OF_BROKER, "addTopicCount") if writable
                   else (RequestCode.WIPE_WRITE_PERM_OF_BROKER, "wipeTopicCount"))
    return {endpoint: int(answer.fields.get(count, "0"))
            for endpoint, answer in _each_namesrv(admin, code, {"brokerName": broker_name}).items()}


# ---------------------------------------------------------------- one broker

def producer_connections(admin, endpoint: str, group: str) -> list[dict]:
    """A producer group's online members there (clientId, clientAddr, language, version)."""
    return json.loads(_broker(admin, endpoint, RequestCode.GET_PRODUCER_CONNECTION_LIST,
                              {"producerGroup": group}).body)["connectionSet"]


def producer_table(admin, endpoint: str) -> dict[str, list[dict]]:
    return json.loads(_broker(admin, endpoint, RequestCode.GET_ALL_PRODUCER_INFO).body).get("data") or {}


def broker_consume_stats(admin, endpoint: str, only_orderly: bool = False) -> dict:
    """ConsumeStatsList: ``rows`` of (group, MessageQueue, offsets), and ``totalDiff``."""
    body = fastjson_loads(_broker(admin, endpoint, RequestCode.GET_BROKER_CONSUME_STATS,
                                  {"isOrder": str(only_orderly).lower()}).body)
    rows = []
    for entry in body.get("consumeStatsList") or []:
        for group, per_topic in entry.items():
            for stats in per_topic:
                for key, offsets in (stats.get("offsetTable") or {}).items():
                    mq = dict(key)
                    rows.append((group, MessageQueue(mq["topic"], mq["brokerName"], int(mq["queueId"])), offsets))
    return {"rows": sorted(rows, key=lambda r: (r[1].topic, r[0], r[1].queue_id)), "totalDiff": body.get("totalDiff", 0)}


def query_consume_queue(admin, endpoint: str, topic: str, queue_id: int, index: int, count: int,
                        group: str = "") -> dict:
    fields = {"topic": topic, "queueId": queue_id, "index": index, "count": count}
    if group:
        fields["consumerGroup"] = group
    return json.loads(_broker(admin, endpoint, RequestCode.QUERY_CONSUME_QUEUE, fields).body)


def clean_expired_consume_queue(admin, endpoint: str) -> str:
    return _broker(admin, endpoint, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE).remark


def clean_unused_topic(admin, endpoint: str) -> str:
    return _broker(admin, endpoint, RequestCode.CLEAN_UNUSED_TOPIC).remark


def clone_group_offset(admin, endpoint: str, source: str, target: str, topic: str = "", offline: bool = False) -> None:
    _broker(admin, endpoint, RequestCode.CLONE_GROUP_OFFSET,
            {"srcGroup": source, "destGroup": target, "topic": topic, "offline": str(offline).lower()})


def consume_message_directly(admin, offset_msg_id: str, group: str, client_id: str) -> dict:
    """Ask ``client_id`` of ``group`` to consume the message an offset id names, through the broker
    that stores it (RocketMQ's consumeMessageDirectly); its ConsumeMessageDirectlyResult."""
    parse_offset_msg_id(offset_msg_id)   # ValueError before any request
    message = admin.view_message(offset_msg_id)
    endpoint = admin.routes.store_host_endpoint(*parse_offset_msg_id(offset_msg_id)[:2])
    response = _broker(admin, endpoint, RequestCode.CONSUME_MESSAGE_DIRECTLY,
                       {"consumerGroup": group, "clientId": client_id, "msgId": offset_msg_id, "topic": message.topic},
                       CONSUME_DIRECTLY_WAIT_MS)
    if not response.body:
        raise BrokerError(response.code, "the consumer answered without a result", endpoint)
    return json.loads(response.body)
