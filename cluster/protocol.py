"""The RPC surface: request and response codes, header fields, and who serves what.

The vocabulary is RocketMQ's (RequestCode / ResponseCode numbers and extFields
names), so the remoting and gRPC front doors of a later issue can map onto the same
handlers. Handlers take a ``wire_format.Command`` and know nothing of framing.

``SERVED_BY`` is the table of which process answers which request code; a test
checks that every code in it has exactly one handler in that process.
"""

from __future__ import annotations

import enum
import functools
import json
import logging
from dataclasses import dataclass

from rocketbox.cluster.config import name_problem
from rocketbox.cluster.fastjson_format import dumps as fastjson_dumps, loads as fastjson_loads, message_queue_key
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.wire_format import Command


class RequestCode(enum.IntEnum):
    SEND_MESSAGE = 10
    PULL_MESSAGE = 11
    QUERY_MESSAGE = 12
    QUERY_CONSUMER_OFFSET = 14
    UPDATE_CONSUMER_OFFSET = 15
    UPDATE_AND_CREATE_TOPIC = 17
    # mqadmin getBrokerConfig: the broker's settings as Java properties text, RocketMQ's keys.
    # mqadmin updateBrokerConfig: key=value lines of the settings a broker lets change live.
    UPDATE_BROKER_CONFIG = 25
    GET_BROKER_CONFIG = 26
    GET_ALL_TOPIC_CONFIG = 21
    GET_BROKER_RUNTIME_INFO = 28
    SEARCH_OFFSET_BY_TIMESTAMP = 29
    GET_MAX_OFFSET = 30
    GET_MIN_OFFSET = 31
    # The store time of a queue's oldest message (the admin API's earliestMsgStoreTime).
    GET_EARLIEST_MSG_STORETIME = 32
    VIEW_MESSAGE_BY_ID = 33
    HEART_BEAT = 34
    UNREGISTER_CLIENT = 35
    GET_CONSUMER_LIST_BY_GROUP = 38
    # Broker -> client, one-way: the member list of a consumer group changed (rebalance now).
    CONSUMER_SEND_MSG_BACK = 36
    END_TRANSACTION = 37
    CHECK_TRANSACTION_STATE = 39
    NOTIFY_CONSUMER_IDS_CHANGED = 40
    # Orderly consumers lock the queues they read (broker/locks.py).
    LOCK_BATCH_MQ = 41
    UNLOCK_BATCH_MQ = 42
    # A slave fetches its master's consumer offsets (RocketMQ's SlaveSynchronize).
    GET_ALL_CONSUMER_OFFSET = 43
    # mqadmin's ACL verbs (broker/admin_acl.py): edit the cluster's plain_acl.yml, read its version.
    UPDATE_AND_CREATE_ACL_CONFIG = 50
    DELETE_ACL_CONFIG = 51
    GET_BROKER_CLUSTER_ACL_INFO = 52
    UPDATE_GLOBAL_WHITE_ADDRS_CONFIG = 53
    # A slave (and exportMetrics) reads its master's delay-level progress (RocketMQ's ScheduleMessageService).
    GET_ALL_DELAY_OFFSET = 45
    # The NameServer's KV config (RocketMQ's KVConfigManager; mqadmin updateKvConfig, updateOrderConf).
    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    # A consumer asks whether the broker can serve its subscription before it starts (SQL92 needs
    # enablePropertyFilter and an expression that compiles).
    CHECK_CLIENT_CONFIG = 46
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    # mqadmin wipeWritePerm / addWritePerm: a NameServer's routes to a broker lose or regain the write bit.
    WIPE_WRITE_PERM_OF_BROKER = 205
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    # mqadmin updateNamesrvConfig / getNamesrvConfig: Java properties text.
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    # A broker asks whether the NameServer holds its current topic table (DataVersion).
    QUERY_DATA_VERSION = 322
    DELETE_TOPIC_IN_BROKER = 215
    DELETE_TOPIC_IN_NAMESRV = 216
    # Broker -> client, one-way: restart these queues from these offsets (resetOffsetByTime).
    RESET_CONSUMER_CLIENT_OFFSET = 220
    # Admin -> broker: reset a group's offsets of a topic to a time, telling its online members.
    INVOKE_BROKER_TO_RESET_OFFSET = 222
    # mqadmin updateSubGroup / deleteSubGroup, and the table a slave copies (SubscriptionGroupConfig).
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP = 200
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG = 201
    DELETE_SUBSCRIPTIONGROUP = 207
    # mqadmin topicStatus: per queue min/max offset and last store time (TopicStatsTable).
    GET_TOPIC_STATS_INFO = 202
    # mqadmin consumerConnection: a group's online members and subscriptions (ConsumerConnection).
    GET_CONSUMER_CONNECTION_LIST = 203
    # mqadmin consumerProgress: a group's offsets against the broker's, and its TPS (ConsumeStats).
    GET_CONSUME_STATS = 208
    # mqadmin producerConnection: a producer group's online members (ProducerConnection).
    GET_PRODUCER_CONNECTION_LIST = 204
    # mqadmin producer: every producer group's members (ProducerTableInfo).
    GET_ALL_PRODUCER_INFO = 328
    # mqadmin brokerConsumeStats: every group's ConsumeStats on this broker (ConsumeStatsList).
    GET_BROKER_CONSUME_STATS = 317
    # Per queue: the oldest, newest and last consumed message's store times (QueryConsumeTimeSpanBody).
    QUERY_CONSUME_TIME_SPAN = 303
    # The topics a broker keeps for itself (TopicList): exportMetadata leaves them out.
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER = 305
    # mqadmin cleanExpiredCQ / cleanUnusedTopic: drop ConsumeQueue files below the CommitLog's floor /
    # of topics the broker no longer has.
    CLEAN_EXPIRED_CONSUMEQUEUE = 306
    CLEAN_UNUSED_TOPIC = 316
    QUERY_CORRECTION_OFFSET = 308
    # mqadmin queryMsgById -g -d: admin -> broker, relayed broker -> client with the message: the
    # consumer runs its listener on it and answers ConsumeMessageDirectlyResult.
    CONSUME_MESSAGE_DIRECTLY = 309
    # mqadmin cloneGroupOffset: one group's committed offsets copied to another.
    CLONE_GROUP_OFFSET = 314
    # mqadmin queryCq: ConsumeQueue entries as stored (QueryConsumeQueueResponseBody).
    QUERY_CONSUME_QUEUE = 321
    # A half message written again so its transaction is checked again from zero.
    RESUME_CHECK_HALF_MESSAGE = 323
    # RocketMQ 5.3.2: cancel a timed message before it is due, by the recall handle its send answered.
    RECALL_MESSAGE = 370
    # The groups consuming a topic: those with offsets on it and those online subscribing to it.
    QUERY_TOPIC_CONSUME_BY_WHO = 300
    # mqadmin deleteExpiredCommitLog: delete expired CommitLog segments now, not at deleteWhen.
    DELETE_EXPIRED_COMMITLOG = 329
    # mqadmin consumerStatus: admin -> broker, relayed broker -> client (ConsumerRunningInfo).
    GET_CONSUMER_RUNNING_INFO = 307
    SEND_MESSAGE_V2 = 310
    # mqadmin statsAll: a topic's puts or a topic@group's gets over the last minute, hour and day.
    VIEW_BROKER_STATS_DATA = 315
    SEND_BATCH_MESSAGE = 320
    # Request-reply (broker/reply.py): a responder sends its reply; the broker stores it in
    # <cluster>_REPLY_TOPIC and pushes it to the requester's connection (reply.PUSH_REPLY_MESSAGE_TO_CLIENT).
    SEND_REPLY_MESSAGE = 324
    SEND_REPLY_MESSAGE_V2 = 325
    # One topic's config with its attributes (message.type), as RocketMQ 5's proxy reads it.
    GET_TOPIC_CONFIG = 351
    # Controller mode (RocketMQ 5; cluster/controller/): a replica's liveness and role, every interval.
    BROKER_HEARTBEAT = 904
    # mqadmin haStatus: a master's slaves and their acknowledged offsets, or a slave's view (HARuntimeInfo).
    GET_BROKER_HA_STATUS = 907
    CONTROLLER_REGISTER_BROKER = 1003
    # A broker group's master, epoch and in-sync replicas (admin, tests).
    CONTROLLER_GET_REPLICA_INFO = 1004
    # Every group's state and this controller node's Raft view (cluster status).
    CONTROLLER_GET_METADATA_INFO = 1005
    # A replica's epoch list: a returning replica truncates where its log left the master's.
    GET_BROKER_EPOCH_CACHE = 1007
    # ACL 2.0's users and ACLs (RocketMQ 5.3, broker/admin_auth.py).
    AUTH_CREATE_USER = 3001
    AUTH_UPDATE_USER = 3002
    AUTH_DELETE_USER = 3003
    AUTH_GET_USER = 3004
    AUTH_LIST_USER = 3005
    AUTH_CREATE_ACL = 3006
    AUTH_UPDATE_ACL = 3007
    AUTH_DELETE_ACL = 3008
    AUTH_GET_ACL = 3009
    AUTH_LIST_ACL = 3010
    # Codes RocketMQ defines that RocketBox refuses with the reason (cluster/refusals.py).
    QUERY_BROKER_OFFSET = 13
    GET_TOPIC_CONFIG_LIST = 22
    GET_TOPIC_NAME_LIST = 23
    TRIGGER_DELETE_FILES = 27
    SUSPEND_CONSUMER = 209
    RESUME_CONSUMER = 210
    RESET_CONSUMER_OFFSET_IN_CONSUMER = 211
    RESET_CONSUMER_OFFSET_IN_BROKER = 212
    ADJUST_CONSUMER_THREAD_POOL = 213
    WHO_CONSUME_THE_MESSAGE = 214
    INVOKE_BROKER_TO_GET_CONSUMER_STATUS = 223
    REGISTER_FILTER_SERVER = 301
    REGISTER_MESSAGE_FILTER_CLASS = 302
    # RocketBox's own (RocketMQ's broker exports its metrics itself): every number the cluster's
    # metrics exporter publishes about a broker, in one JSON answer (broker/metrics.py).
    GET_BROKER_METRICS = 9901
    # The same for a NameServer: what its access control refused (namesrv.py).
    GET_NAMESRV_METRICS = 9902
    # The gRPC proxy's acks of one read to one broker, consumer group and topic in one request
    # (ack_batch_format.py; RocketMQ 5's BATCH_ACK_MESSAGE carries a pop's bit sets instead).
    ACK_MESSAGES = 9903
    # RocketMQ 5's pop consumption (broker/pop.py): the broker keeps what each consumer holds.
    POP_MESSAGE = 200050
    ACK_MESSAGE = 200051
    CHANGE_MESSAGE_INVISIBLETIME = 200053


class ResponseCode(enum.IntEnum):
    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    NO_PERMISSION = 16
    INVALID_PARAMETER = 29
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    # A pull that leaves its subscription to the broker (no FLAG_SUBSCRIPTION): the group registered none
    # for the topic, or an older one than the pull's subVersion.
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    CONSUMER_NOT_ONLINE = 206
    NO_MESSAGE = 208   # a pop ack whose message is acked already or was delivered again
    ILLEGAL_OPERATION = 604   # a recall whose handle is unreadable, or names another topic, broker or time
    # Ours, in a range RocketMQ does not use: the disk under the store is full.
    DISK_FULL = 1001


NAMESRV = "namesrv"
BROKER = "broker"
CLIENT = "client"

SERVED_BY: dict[RequestCode, str] = {
    RequestCode.SEND_MESSAGE: BROKER,
    RequestCode.SEND_MESSAGE_V2: BROKER,
    RequestCode.SEND_BATCH_MESSAGE: BROKER,
    RequestCode.PULL_MESSAGE: BROKER,
    RequestCode.QUERY_MESSAGE: BROKER,
    RequestCode.VIEW_MESSAGE_BY_ID: BROKER,
    RequestCode.GET_EARLIEST_MSG_STORETIME: BROKER,
    RequestCode.CHECK_CLIENT_CONFIG: BROKER,
    RequestCode.SEND_REPLY_MESSAGE: BROKER,
    RequestCode.SEND_REPLY_MESSAGE_V2: BROKER,
    RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: BROKER,
    RequestCode.QUERY_CONSUMER_OFFSET: BROKER,
    RequestCode.UPDATE_CONSUMER_OFFSET: BROKER,
    RequestCode.UPDATE_AND_CREATE_TOPIC: BROKER,
    RequestCode.DELETE_TOPIC_IN_BROKER: BROKER,
    RequestCode.GET_ALL_TOPIC_CONFIG: BROKER,
    RequestCode.GET_TOPIC_CONFIG: BROKER,
    RequestCode.GET_ALL_CONSUMER_OFFSET: BROKER,
    RequestCode.GET_BROKER_RUNTIME_INFO: BROKER,
    RequestCode.GET_BROKER_CONFIG: BROKER,
    RequestCode.UPDATE_BROKER_CONFIG: BROKER,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: BROKER,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: BROKER,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: BROKER,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: BROKER,
    RequestCode.GET_TOPIC_STATS_INFO: BROKER,
    RequestCode.GET_CONSUME_STATS: BROKER,
    RequestCode.GET_CONSUMER_RUNNING_INFO: BROKER,
    RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: BROKER,
    RequestCode.GET_MAX_OFFSET: BROKER,
    RequestCode.GET_MIN_OFFSET: BROKER,
    RequestCode.HEART_BEAT: BROKER,
    RequestCode.UNREGISTER_CLIENT: BROKER,
    RequestCode.GET_CONSUMER_LIST_BY_GROUP: BROKER,
    RequestCode.CONSUMER_SEND_MSG_BACK: BROKER,
    RequestCode.END_TRANSACTION: BROKER,
    RequestCode.LOCK_BATCH_MQ: BROKER,
    RequestCode.UNLOCK_BATCH_MQ: BROKER,
    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: BROKER,
    RequestCode.DELETE_EXPIRED_COMMITLOG: BROKER,
    RequestCode.VIEW_BROKER_STATS_DATA: BROKER,
    RequestCode.GET_BROKER_HA_STATUS: BROKER,
    RequestCode.GET_ALL_DELAY_OFFSET: BROKER,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: BROKER,
    RequestCode.GET_ALL_PRODUCER_INFO: BROKER,
    RequestCode.GET_BROKER_CONSUME_STATS: BROKER,
    RequestCode.QUERY_CONSUME_TIME_SPAN: BROKER,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: BROKER,
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: BROKER,
    RequestCode.CLEAN_UNUSED_TOPIC: BROKER,
    RequestCode.QUERY_CORRECTION_OFFSET: BROKER,
    # Served by the broker, which relays it to the consumer (the client answers it too).
    RequestCode.CONSUME_MESSAGE_DIRECTLY: BROKER,
    RequestCode.CLONE_GROUP_OFFSET: BROKER,
    RequestCode.QUERY_CONSUME_QUEUE: BROKER,
    RequestCode.RESUME_CHECK_HALF_MESSAGE: BROKER,
    RequestCode.RECALL_MESSAGE: BROKER,
    RequestCode.UPDATE_AND_CREATE_ACL_CONFIG: BROKER,
    RequestCode.DELETE_ACL_CONFIG: BROKER,
    RequestCode.GET_BROKER_CLUSTER_ACL_INFO: BROKER,
    **{code: BROKER for code in range(RequestCode.AUTH_CREATE_USER, RequestCode.AUTH_LIST_ACL + 1)},
    RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: BROKER,
    # Refused with the reason (cluster/refusals.py).
    **{code: BROKER for code in (
        RequestCode.QUERY_BROKER_OFFSET, RequestCode.GET_TOPIC_CONFIG_LIST, RequestCode.GET_TOPIC_NAME_LIST,
        RequestCode.TRIGGER_DELETE_FILES, RequestCode.SUSPEND_CONSUMER, RequestCode.RESUME_CONSUMER,
        RequestCode.RESET_CONSUMER_OFFSET_IN_CONSUMER, RequestCode.RESET_CONSUMER_OFFSET_IN_BROKER,
        RequestCode.ADJUST_CONSUMER_THREAD_POOL, RequestCode.WHO_CONSUME_THE_MESSAGE,
        RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, RequestCode.REGISTER_FILTER_SERVER,
        RequestCode.REGISTER_MESSAGE_FILTER_CLASS)},
    RequestCode.CHECK_TRANSACTION_STATE: CLIENT,
    RequestCode.RESET_CONSUMER_CLIENT_OFFSET: CLIENT,
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: CLIENT,
    RequestCode.REGISTER_BROKER: NAMESRV,
    RequestCode.UNREGISTER_BROKER: NAMESRV,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: NAMESRV,
    RequestCode.GET_BROKER_CLUSTER_INFO: NAMESRV,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: NAMESRV,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: NAMESRV,
    RequestCode.PUT_KV_CONFIG: NAMESRV,
    RequestCode.GET_KV_CONFIG: NAMESRV,
    RequestCode.DELETE_KV_CONFIG: NAMESRV,
    RequestCode.GET_KVLIST_BY_NAMESPACE: NAMESRV,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: NAMESRV,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: NAMESRV,
    RequestCode.GET_TOPICS_BY_CLUSTER: NAMESRV,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: NAMESRV,
    RequestCode.GET_UNIT_TOPIC_LIST: NAMESRV,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: NAMESRV,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: NAMESRV,
    RequestCode.UPDATE_NAMESRV_CONFIG: NAMESRV,
    RequestCode.GET_NAMESRV_CONFIG: NAMESRV,
    RequestCode.QUERY_DATA_VERSION: NAMESRV,
    RequestCode.BROKER_HEARTBEAT: NAMESRV,
    RequestCode.CONTROLLER_REGISTER_BROKER: NAMESRV,
    RequestCode.CONTROLLER_GET_REPLICA_INFO: NAMESRV,
    RequestCode.CONTROLLER_GET_METADATA_INFO: NAMESRV,
    RequestCode.GET_NAMESRV_METRICS: NAMESRV,
    RequestCode.GET_BROKER_EPOCH_CACHE: BROKER,
    RequestCode.GET_BROKER_METRICS: BROKER,
    RequestCode.POP_MESSAGE: BROKER,
    RequestCode.ACK_MESSAGE: BROKER,
    RequestCode.ACK_MESSAGES: BROKER,
    RequestCode.CHANGE_MESSAGE_INVISIBLETIME: BROKER,
}

# Header fields (extFields) per request, RocketMQ's names. Short V2 names map here.
SEND_FIELDS = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
               "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode",
               "maxReconsumeTimes", "batch", "brokerName")
SEND_V2_SHORT_NAMES = dict(zip("abcdefghijklmn", SEND_FIELDS))
SEND_V2_LONG_NAMES = {v: k for k, v in SEND_V2_SHORT_NAMES.items()}
PULL_FIELDS = ("consumerGroup", "topic", "queueId", "queueOffset", "maxMsgNums", "sysFlag",
               "commitOffset", "suspendTimeoutMillis", "subscription", "subVersion", "expressionType")

# Pull request sysFlag bits (RocketMQ PullSysFlag).
PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4

# Topic permission bits (RocketMQ PermName).
PERM_READ = 4
PERM_WRITE = 2
PERM_READ_WRITE = PERM_READ | PERM_WRITE

# A consumer group's retry and dead-letter topics (RocketMQ's MixAll prefixes).
RETRY_TOPIC_PREFIX = "%RETRY%"
DLQ_TOPIC_PREFIX = "%DLQ%"


def retry_topic(group: str) -> str:
    return RETRY_TOPIC_PREFIX + group


def pop_retry_topic(group: str, topic: str) -> str:
    """Where a pop group's unacknowledged messages of ``topic`` come back from (RocketMQ's retry topic v1
    for pop: one per group and topic, so a receive for one topic never yields another's)."""
    return f"{RETRY_TOPIC_PREFIX}{group}_{topic}"


def dlq_topic(group: str) -> str:
    return DLQ_TOPIC_PREFIX + group


# Consumer groups of the tools and the brokers, not of an application: RocketMQ's (MixAll's names;
# rocketmq-dashboard lists these only when asked) and this project's (the CLI's `consume` default).
# DEFAULT_CONSUMER stays an application's: it is the group of a consumer that named none.
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
CLI_CONSUMER_GROUP = "CLI_CONSUMER"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"
SYSTEM_GROUPS = frozenset({TOOLS_CONSUMER_GROUP, "SCHEDULE_CONSUMER", "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER",
                           "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER",
                           "CID_ONSAPI_PULL", CLI_CONSUMER_GROUP})


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)


MASTER_ID = 0


class ProtocolError(ValueError):
    """A request whose header is missing or has a bad field; answered, never raised out."""

    def __init__(self, message: str, code: int = ResponseCode.SYSTEM_ERROR):
        super().__init__(message)
        self.code = code


class AccessDenied(ProtocolError):
    """Access control refused what a handler found the request touches (a stored record's topic):
    answered NO_PERMISSION with the reason; the check counted and logged it already."""

    def __init__(self, reason: str):
        super().__init__(reason, ResponseCode.NO_PERMISSION)


def answers_refusals(handler):
    """A handler whose ProtocolError becomes an error response with its reason, logged (a burst
    per window: every refusal is a peer's doing, ``log_limit``)."""
    limited = RateLimitedLog(logging.getLogger(handler.__module__))
    refused, malformed = f"refused:{handler.__qualname__}", f"malformed:{handler.__qualname__}"

    @functools.wraps(handler)
    def wrapper(self, request: Command, reply=None) -> Command:
        try:
            return handler(self, request, reply)
        except AccessDenied as exc:
            return request.response(exc.code, remark=str(exc))
        except ProtocolError as exc:
            limited.warning(refused, "request %d refused: %s", request.code, exc)
            return request.response(exc.code, remark=str(exc))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            # A JSON body of the wrong shape: answered as malformed, not as a crash.
            limited.warning(malformed, "request %d malformed: %s: %s", request.code, type(exc).__name__, exc)
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    remark=f"malformed request: {type(exc).__name__}: {exc}")
    return wrapper


def require_name(kind: str, name: str, code: int = ResponseCode.SYSTEM_ERROR) -> str:
    """``name`` when it is a valid topic/group/broker name, else ProtocolError with the reason."""
    problem = name_problem(kind, name)
    if problem:
        raise ProtocolError(problem, code)
    return name


def send_fields_short(fields: dict[str, str]) -> dict[str, str]:
    return {SEND_V2_LONG_NAMES.get(k, k): v for k, v in fields.items()}


def field_str(cmd: Command, name: str, default: str | None = None) -> str:
    value = cmd.fields.get(name, default)
    if value is None:
        raise ProtocolError(f"the header field {name!r} is missing")
    return value


def field_int(cmd: Command, name: str, default: int | None = None, key: str | None = None) -> int:
    """The header field ``name`` as an int (carried under ``key`` when that differs: SEND_MESSAGE_V2's
    one-letter names); ``default`` when absent or empty, ProtocolError when absent without one."""
    raw = cmd.fields.get(key or name)
    if raw is None or raw == "":
        if default is None:
            raise ProtocolError(f"the header field {name!r} is missing")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ProtocolError(f"the header field {name!r} is not an integer: {raw[:40]!r}") from None


def field_bool(cmd: Command, name: str, default: bool = False) -> bool:
    raw = cmd.fields.get(name)
    if raw is None:
        return default
    # C++ 1.2.x sends batch as "1"; Java as "true" (rocketmq-protocol.md 4.2).
    return raw.lower() in ("true", "1")


def json_body(cmd: Command) -> dict:
    try:
        value = json.loads(cmd.body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"the body is not JSON: {exc}") from None
    except RecursionError:   # json's decoder recurses per nesting level
        raise ProtocolError("the body nests too deep") from None
    if not isinstance(value, dict):
        raise ProtocolError("the body must be a JSON object")
    return value


def to_json_bytes(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# Queues and offset tables as requests and answers carry them (client and broker alike).
@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int


def offset_table_rows(offsets: dict[MessageQueue, int]) -> list[dict]:
    return [{"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": offset}
            for mq, offset in sorted(offsets.items())]


def offset_table_from_rows(rows) -> dict[MessageQueue, int]:
    """The inverse of ``offset_table_rows``; also what RESET_CONSUMER_CLIENT_OFFSET carries to a C++ client."""
    return {MessageQueue(str(r["topic"]), str(r["brokerName"]), int(r["queueId"])): int(r["offset"])
            for r in rows or []}


def reset_offset_body(offsets: dict[MessageQueue, int], rows: bool = False) -> bytes:
    """RocketMQ's ResetOffsetBody, the answer to INVOKE_BROKER_TO_RESET_OFFSET and what
    RESET_CONSUMER_CLIENT_OFFSET carries: ``offsetTable`` keyed by MessageQueue objects in
    fastjson's dialect (what Java reads); ``rows``: ResetOffsetBodyForC's list of
    {topic, brokerName, queueId, offset}, what the C++ client reads."""
    if rows:
        return to_json_bytes({"offsetTable": offset_table_rows(offsets)})
    table = {message_queue_key(mq.topic, mq.broker_name, mq.queue_id): offset for mq, offset in sorted(offsets.items())}
    return fastjson_dumps({"offsetTable": table}).encode()


def offset_table_from_reset_body(body: bytes) -> dict[MessageQueue, int]:
    """The offsets of a ResetOffsetBody in either form (``reset_offset_body``); ValueError when it is neither."""
    try:
        table = fastjson_loads(body or b"{}").get("offsetTable")
        if isinstance(table, dict):
            keys = {key: dict(key) for key in table}
            return {MessageQueue(str(k["topic"]), str(k["brokerName"]), int(k["queueId"])): int(table[key])
                    for key, k in keys.items()}
        return offset_table_from_rows(table)
    except (AttributeError, KeyError, TypeError) as exc:
        raise ValueError(f"not a ResetOffsetBody: {type(exc).__name__}: {exc}") from None
