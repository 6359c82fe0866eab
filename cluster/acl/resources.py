"""What a request needs: the resources (topics, groups) and permissions it touches, and whether only
an admin may make it (RocketMQ's PlainAccessResource.parse and Permission.ADMIN_CODE). Pure.

| request | needs |
| --- | --- |
| SEND_MESSAGE 10 (``topic``), SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320 (``b``) | the topic PUB; a send to ``%RETRY%G`` needs the group G SUB instead (whatever group it names), one to ``%DLQ%G`` the group G SUB too |
| RECALL_MESSAGE 370 (``topic``) | the topic PUB (RocketMQ's RecallMessageRequestHeader) |
| PULL_MESSAGE 11, POP_MESSAGE, ACK_MESSAGE, ACK_MESSAGES, CHANGE_MESSAGE_INVISIBLETIME | the topic SUB and the group SUB (a pull of ``%DLQ%G``: the group G SUB too) |
| UPDATE_CONSUMER_OFFSET 15, QUERY_CONSUMER_OFFSET 14, GET_CONSUME_STATS 208 | the group SUB and the topic SUB (when named) |
| QUERY_MESSAGE 12, QUERY_TOPIC_CONSUME_BY_WHO 300 | the topic SUB |
| HEART_BEAT 34 | each consumer group's SUB and each topic it subscribes SUB (the JSON body) |
| LOCK_BATCH_MQ 41, UNLOCK_BATCH_MQ 42 | the body's group SUB and each of its queues' topics SUB |
| CONSUMER_SEND_MSG_BACK 36 (``group``), UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38, GET_CONSUMER_CONNECTION_LIST 203, GET_CONSUMER_RUNNING_INFO 307 (``consumerGroup``) | the group SUB |
| admin codes (below); PULL_MESSAGE and POP_MESSAGE of the broker's own topics | an admin account |
| anything else | an account (signature, or white address), nothing more |

A group is checked under its retry topic ``%RETRY%<group>`` (where groupPerms are kept). The pop
codes are RocketMQ 5's (its proxy checks them the same way). Admin codes: RocketMQ's five
(UPDATE_AND_CREATE_TOPIC 17, UPDATE_BROKER_CONFIG 25, DELETE_TOPIC_IN_BROKER 215,
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200, DELETE_SUBSCRIPTIONGROUP 207), plus what changes a
NameServer's routes (REGISTER_BROKER 103, UNREGISTER_BROKER 104, DELETE_TOPIC_IN_NAMESRV 216),
what deletes stored messages or moves a group's offsets (DELETE_EXPIRED_COMMITLOG 329,
INVOKE_BROKER_TO_RESET_OFFSET 222) and every group's offsets at once (GET_ALL_CONSUMER_OFFSET 43,
which slaves copy with the cluster's key): RocketBox serves ACL on its NameServers too, and these
are as destructive or revealing as a topic deletion. The broker's own topics (SCHEDULE_TOPIC_XXXX,
the transaction topics, the revive log) hold every topic's delayed and half messages: a pull
there is an admin's.

Beyond RocketMQ (whose ACL 1.0 reads the header only): a send to ``%RETRY%G`` is checked against G
itself (RocketMQ checks the group the request names), and the group requests above that RocketMQ
leaves open (14, 41, 42, 203, 208, 307) check the group. What a handler finds only in the store (a
record's real topic) is checked there: acl/records.py.
The failover controller's codes (BROKER_HEARTBEAT 904, CONTROLLER_REGISTER_BROKER 1003,
CONTROLLER_GET_REPLICA_INFO 1004, CONTROLLER_GET_METADATA_INFO 1005, GET_BROKER_EPOCH_CACHE 1007) are
admin codes too: a registration or heartbeat puts a replica into the replicated state and can make
it master; only the cluster's own brokers (its key) and admins send them.
And mqadmin's
other edits, which RocketMQ leaves to any account but which change the cluster for everyone: the ACL file's accounts
and white list (50, 51, 53), the NameServers' KV config, settings and routes' write bit (100, 102,
318, 205, 327), ConsumeQueue cleaning (306, 316), cloneGroupOffset (314), consumeMessageDirectly
(309: a consumer's listener runs), resumeCheckHalfMessage (323).
"""

from __future__ import annotations

import json

from rocketbox.cluster.acl.permissions import PUB, SUB
from rocketbox.cluster.protocol import DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX, RequestCode
from rocketbox.cluster.message.system_topics import is_not_sendable_topic
from rocketbox.cluster.wire_format import Command

ADMIN_CODES = frozenset({
    RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.UPDATE_BROKER_CONFIG, RequestCode.DELETE_TOPIC_IN_BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
    RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER, RequestCode.DELETE_TOPIC_IN_NAMESRV,
    RequestCode.DELETE_EXPIRED_COMMITLOG, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, RequestCode.GET_ALL_CONSUMER_OFFSET,
    RequestCode.BROKER_HEARTBEAT, RequestCode.CONTROLLER_REGISTER_BROKER, RequestCode.CONTROLLER_GET_REPLICA_INFO,
    RequestCode.CONTROLLER_GET_METADATA_INFO, RequestCode.GET_BROKER_EPOCH_CACHE,
    # mqadmin's edits beyond RocketMQ's five, admin-only since they change the cluster for everyone: the ACL file itself, the NameServers' KV config,
    # settings and routes' write permission, ConsumeQueues, a group's offsets, a consumer's listener, a half message.
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, RequestCode.DELETE_ACL_CONFIG, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
    RequestCode.PUT_KV_CONFIG, RequestCode.DELETE_KV_CONFIG, RequestCode.UPDATE_NAMESRV_CONFIG,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER, RequestCode.ADD_WRITE_PERM_OF_BROKER, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE,
    RequestCode.CLEAN_UNUSED_TOPIC, RequestCode.CLONE_GROUP_OFFSET, RequestCode.CONSUME_MESSAGE_DIRECTLY,
    RequestCode.RESUME_CHECK_HALF_MESSAGE,
    # ACL 2.0's users and ACLs (Apache: Update, or Get for the reading four, on the cluster).
    *range(RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_LIST_ACL + 1),
})
# Codes that return a topic's stored records as they lie in its queues.
_QUEUE_READS = frozenset({RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE})


class UnreadableRequest(ValueError):
    """The request does not say what it touches (a heartbeat body that is not JSON, ...)."""


def group_resource(group: str) -> str:
    return RETRY_TOPIC_PREFIX + group


def _send(fields: dict, topic_key: str) -> dict[str, int]:
    topic = fields.get(topic_key)
    if topic is None:
        return {}
    if topic.startswith(RETRY_TOPIC_PREFIX):
        return {topic: SUB}   # the group's own resource: %RETRY%G is where G's permission is kept
    return {topic: PUB, **_dead_letters_group(topic)}


def _dead_letters_group(topic: str) -> dict[str, int]:
    """A group's dead-letter topic is its group's too."""
    return {group_resource(topic[len(DLQ_TOPIC_PREFIX):]): SUB} if topic.startswith(DLQ_TOPIC_PREFIX) else {}


def _topic_and_group(fields: dict, topic_key: str = "topic", group_key: str = "consumerGroup") -> dict[str, int]:
    needed = {}
    topic = fields.get(topic_key)
    if topic:
        needed[topic] = SUB
        needed.update(_dead_letters_group(topic))
    if fields.get(group_key):
        needed[group_resource(fields[group_key])] = SUB
    return needed


def _group(fields: dict, key: str) -> dict[str, int]:
    """An empty group names none (a producer-only UNREGISTER_CLIENT from the C++ client sends "")."""
    return {group_resource(fields[key]): SUB} if fields.get(key) else {}


def _locks(body: bytes) -> dict[str, int]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise UnreadableRequest(f"the lock request body is not JSON: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise UnreadableRequest("the lock request body is not an object")
    needed = {group_resource(str(data.get("consumerGroup", ""))): SUB}
    queues = data.get("mqSet")
    for queue in queues if isinstance(queues, list) else ():
        if isinstance(queue, dict) and queue.get("topic") is not None:
            needed[str(queue["topic"])] = SUB
    return needed


def _heartbeat(body: bytes) -> dict[str, int]:
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:   # RecursionError: nested too deep
        raise UnreadableRequest(f"the heartbeat body is not JSON: {type(exc).__name__}") from None
    needed = {}
    consumers = data.get("consumerDataSet") if isinstance(data, dict) else None
    for consumer in consumers if isinstance(consumers, list) else ():
        if not isinstance(consumer, dict):
            raise UnreadableRequest("a heartbeat's consumerDataSet entry is not an object")
        needed[group_resource(str(consumer.get("groupName", "")))] = SUB
        subscriptions = consumer.get("subscriptionDataSet")
        for sub in subscriptions if isinstance(subscriptions, list) else ():
            if isinstance(sub, dict) and sub.get("topic") is not None:
                needed[str(sub["topic"])] = SUB
    return needed


_READERS = {
    RequestCode.SEND_MESSAGE: lambda cmd: _send(cmd.fields, "topic"),
    RequestCode.SEND_MESSAGE_V2: lambda cmd: _send(cmd.fields, "b"),
    RequestCode.SEND_BATCH_MESSAGE: lambda cmd: _send(cmd.fields, "b"),
    RequestCode.RECALL_MESSAGE: lambda cmd: {cmd.fields["topic"]: PUB} if cmd.fields.get("topic") else {},
    RequestCode.PULL_MESSAGE: lambda cmd: _topic_and_group(cmd.fields),
    RequestCode.POP_MESSAGE: lambda cmd: _topic_and_group(cmd.fields),
    RequestCode.ACK_MESSAGE: lambda cmd: _topic_and_group(cmd.fields),
    RequestCode.ACK_MESSAGES: lambda cmd: _topic_and_group(cmd.fields),
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: lambda cmd: _topic_and_group(cmd.fields),
    RequestCode.UPDATE_CONSUMER_OFFSET: lambda cmd: _topic_and_group(cmd.fields),
    RequestCode.QUERY_CONSUMER_OFFSET: lambda cmd: _topic_and_group(cmd.fields),
    RequestCode.GET_CONSUME_STATS: lambda cmd: _topic_and_group(cmd.fields),
    RequestCode.QUERY_MESSAGE: lambda cmd: _topic_and_group(cmd.fields, group_key=""),
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: lambda cmd: _topic_and_group(cmd.fields, group_key=""),
    RequestCode.HEART_BEAT: lambda cmd: _heartbeat(cmd.body),
    RequestCode.LOCK_BATCH_MQ: lambda cmd: _locks(cmd.body),
    RequestCode.UNLOCK_BATCH_MQ: lambda cmd: _locks(cmd.body),
    RequestCode.CONSUMER_SEND_MSG_BACK: lambda cmd: _group(cmd.fields, "group"),
    RequestCode.UNREGISTER_CLIENT: lambda cmd: _group(cmd.fields, "consumerGroup"),
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: lambda cmd: _group(cmd.fields, "consumerGroup"),
    RequestCode.GET_CONSUMER_CONNECTION_LIST: lambda cmd: _group(cmd.fields, "consumerGroup"),
    RequestCode.GET_CONSUMER_RUNNING_INFO: lambda cmd: _group(cmd.fields, "consumerGroup"),
}


def needed_resources(cmd: Command) -> dict[str, int]:
    """resource -> permission bits ``cmd`` needs (empty: none beyond an account); UnreadableRequest
    when it cannot be told."""
    reader = _READERS.get(cmd.code)
    return reader(cmd) if reader is not None else {}


def needs_admin(cmd: Command) -> bool:
    if cmd.code in _QUEUE_READS:
        return is_not_sendable_topic(cmd.fields.get("topic") or "")
    return cmd.code in ADMIN_CODES
