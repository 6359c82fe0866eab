"""Broker requests the consumers and the admin share: one function per request code.

Each builds the Command RocketMQ's vocabulary names, sends it, and turns the answer
into a value (or raises through ``errors.raise_for``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rocketbox.cluster.fastjson_format import body_json
from rocketbox.cluster.client.message import MessageExt, MessageQueue, decode_messages
from rocketbox.cluster.errors import raise_for
from rocketbox.cluster.protocol import (PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND, RequestCode,
                              ResponseCode, offset_table_from_reset_body, to_json_bytes)
from rocketbox.cluster.wire_format import Command
from concurrent.futures import TimeoutError as FutureTimeout

from rocketbox.cluster.zmq_transport import RequestTimeout, RpcClient


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {ResponseCode.SUCCESS: PullStatus.FOUND, ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
                ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
                ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


def pull_request(group: str, mq: MessageQueue, offset: int, max_nums: int, expression: str,
                 suspend_ms: int, commit_offset: int | None = None, expression_type: str = "TAG") -> Command:
    sys_flag = PULL_FLAG_SUBSCRIPTION
    if suspend_ms > 0:
        sys_flag |= PULL_FLAG_SUSPEND
    if commit_offset is not None and commit_offset >= 0:
        sys_flag |= PULL_FLAG_COMMIT_OFFSET
    fields = {
        "consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag),
        "commitOffset": str(commit_offset if commit_offset is not None else -1),
        "suspendTimeoutMillis": str(suspend_ms), "subscription": expression or "*", "subVersion": "0"}
    if expression_type != "TAG":  # absent means TAG: tag pulls keep their header as it was
        fields["expressionType"] = expression_type
    return Command(RequestCode.PULL_MESSAGE, fields)


def pull_result(response: Command, mq: MessageQueue, endpoint: str, tags: frozenset[str] | None) -> PullResult:
    """The answer to a pull; messages re-filtered by tag string (hash collisions)."""
    status = _PULL_STATUS.get(response.code)
    if status is None:
        raise_for(response, endpoint)
    fields = response.fields
    messages = decode_messages(response.body, mq.broker_name) if status == PullStatus.FOUND else []
    if tags is not None:
        messages = [m for m in messages if m.tags in tags]
    return PullResult(status, int(fields.get("nextBeginOffset", 0)), int(fields.get("minOffset", 0)),
                      int(fields.get("maxOffset", 0)), messages)


def _offset_call(rpc: RpcClient, endpoint: str, code: int, fields: dict, timeout_ms=None) -> int | None:
    response = rpc.call(endpoint, Command(code, fields), timeout_ms)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    raise_for(response, endpoint)
    return int(response.fields["offset"])


def query_consumer_offset(rpc, endpoint, group: str, mq: MessageQueue) -> int | None:
    return _offset_call(rpc, endpoint, RequestCode.QUERY_CONSUMER_OFFSET,
                        {"consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id)})


def update_consumer_offset(rpc, endpoint, group: str, mq: MessageQueue, offset: int) -> int:
    """Commit ``offset``; the id of the broker that took it (0: a master; brokers that do not say are)."""
    response = rpc.call(endpoint, Command(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id), "commitOffset": str(offset)}))
    raise_for(response, endpoint)
    try:
        return int(response.fields.get("brokerId") or 0)
    except ValueError:
        return 0


def max_offset(rpc, endpoint, mq: MessageQueue) -> int:
    return _offset_call(rpc, endpoint, RequestCode.GET_MAX_OFFSET, {"topic": mq.topic, "queueId": str(mq.queue_id)})


def min_offset(rpc, endpoint, mq: MessageQueue) -> int:
    return _offset_call(rpc, endpoint, RequestCode.GET_MIN_OFFSET, {"topic": mq.topic, "queueId": str(mq.queue_id)})


def search_offset(rpc, endpoint, mq: MessageQueue, timestamp_ms: int) -> int:
    """SEARCH_OFFSET_BY_TIMESTAMP: the first offset of ``mq`` stored at or after ``timestamp_ms``."""
    return _offset_call(rpc, endpoint, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                        {"topic": mq.topic, "queueId": str(mq.queue_id), "timestamp": str(timestamp_ms)})


def reset_offset(rpc, endpoint, topic: str, group: str, timestamp_ms: int,
                 force: bool = True) -> dict[MessageQueue, int] | None:
    """INVOKE_BROKER_TO_RESET_OFFSET: the broker's queues of ``topic`` and the offsets it reset
    ``group`` to (and told the group's online members); None when no member is online."""
    response = rpc.call(endpoint, Command(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
        "topic": topic, "group": group, "timestamp": str(timestamp_ms), "isForce": str(force).lower()}))
    if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
        return None
    raise_for(response, endpoint)
    return offset_table_from_reset_body(response.body)


def heartbeat(rpc, endpoint, client_id: str, consumer_groups: list[dict], producer_groups: list[str],
              timeout_ms=None) -> None:
    """Sent on the client's I/O-thread socket: the broker answers group changes to that
    peer with NOTIFY_CONSUMER_IDS_CHANGED, which only that socket reads."""
    body = {"clientID": client_id, "consumerDataSet": consumer_groups,
            "producerDataSet": [{"groupName": g} for g in producer_groups]}
    timeout_ms = timeout_ms or rpc.default_timeout_ms
    future = rpc.call_async(endpoint, Command(RequestCode.HEART_BEAT, {}, to_json_bytes(body)), timeout_ms)
    try:
        # The I/O thread fails the future at its deadline; the extra second only guards against a bug there.
        response = future.result(timeout_ms / 1000 + 1)
    except FutureTimeout:
        raise RequestTimeout(f"no heartbeat answer from {endpoint} within {timeout_ms} ms") from None
    raise_for(response, endpoint)


def unregister_client(rpc, endpoint, client_id: str, consumer_group: str = "", producer_group: str = "") -> None:
    raise_for(rpc.call(endpoint, Command(RequestCode.UNREGISTER_CLIENT, {
        "clientID": client_id, "consumerGroup": consumer_group, "producerGroup": producer_group}), 1000), endpoint)


def consumer_ids(rpc, endpoint, group: str) -> list[str]:
    response = rpc.call(endpoint, Command(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}))
    raise_for(response, endpoint)
    return list(body_json(response.body)["consumerIdList"])


def send_back(rpc, endpoint, group: str, message, max_reconsume_times: int) -> None:
    """CONSUMER_SEND_MSG_BACK for a message whose consumption failed (delay level 0: the broker's)."""
    raise_for(rpc.call(endpoint, Command(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "group": group, "offset": str(message.phys_offset), "delayLevel": "0", "originMsgId": message.msg_id,
        "originTopic": message.topic, "maxReconsumeTimes": str(max_reconsume_times)})), endpoint)


def query_topic_consume_by_who(rpc, endpoint, topic: str) -> list[str]:
    """QUERY_TOPIC_CONSUME_BY_WHO: the groups with an offset on ``topic`` or online subscribing to it."""
    response = rpc.call(endpoint, Command(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}))
    raise_for(response, endpoint)
    return sorted(body_json(response.body)["groupList"])
