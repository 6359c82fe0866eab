"""The requests Apache's Java client 4.9.8 makes, sent through RocketBox's own remoting client
(``RemotingRpcClient``, ``ClientConfig(transport="remoting")``) so they run where no Java client is
(tests/java/ runs the Java client itself): compressed sends with the compression type in sysFlag
bits 8-10, GET_EARLIEST_MSG_STORETIME (32), CHECK_CLIENT_CONFIG (46), pulls without FLAG_SUBSCRIPTION
(the heartbeat's subscription), request-reply (325 pushed as 326), QUERY_MESSAGE's answer header, and
what a delivered message carries (CLUSTER, no WAIT, no record CRC property, the born host's port, a
delayed message's REAL_TOPIC / REAL_QID / DELAY)."""

from __future__ import annotations

import json
import socket
import threading
import time
import zlib

import lz4.frame
import pytest
import zstandard

from rocketbox.cluster import Admin, Message, Producer, PullConsumer
from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.message import decode_messages
from rocketbox.cluster.protocol import PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND, RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import unpack_host
from rocketbox.cluster.message.properties import decode_properties, properties_text
from rocketbox.cluster.testing import LocalCluster, read_topic, wait_until
from rocketbox.cluster.wire_format import FLAG_ONEWAY, Command
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(120)
PUSH_REPLY_MESSAGE_TO_CLIENT = 326


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("java-paths")), broker_overrides={"enable_property_filter": True},
                      store_overrides={"message_delay_levels": "300ms 600ms"}) as started:
        yield started


@pytest.fixture(scope="module")
def remoting(cluster):
    return client_config(cluster, transport="remoting")


@pytest.fixture(scope="module")
def broker(remoting):
    """The remoting address of the one master."""
    with Admin(config=remoting) as admin:
        (endpoint,) = admin.master_endpoints().values()
    return endpoint


@pytest.fixture()
def rpc():
    client = RemotingRpcClient(default_timeout_ms=5000)
    yield client
    client.close()


def _topic(remoting, name: str, queues: int = 1) -> None:
    with Admin(config=remoting) as admin:
        admin.create_topic(name, queues)


def _send_v2(rpc, broker, topic: str, body: bytes, properties: dict, sys_flag: int = 0, group: str = "JavaLikePG",
             code: int = RequestCode.SEND_MESSAGE_V2) -> Command:
    """A send as the Java client writes it: SendMessageRequestHeaderV2's one-letter names, WAIT=true."""
    return rpc.call(broker, Command(code, {
        "a": group, "b": topic, "c": "TBW102", "d": "4", "e": "0", "f": str(sys_flag),
        "g": str(int(time.time() * 1000)), "h": "0",
        "i": properties_text([("WAIT", "true"), *properties.items()]), "j": "0", "k": "false", "m": "false"},
        body))


def _pull(rpc, broker, topic: str, group: str, sys_flag: int, fields: dict | None = None) -> Command:
    return rpc.call(broker, Command(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
        "sysFlag": str(sys_flag), "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0",
        **(fields or {})}))


@pytest.mark.parametrize("kind, compress", [(0x3, lambda b: zlib.compress(b, 5)), (0x1, lz4.frame.compress),
                                            (0x2, zstandard.ZstdCompressor().compress)])
def test_a_body_compressed_as_java_compresses_is_stored_and_inflated(cluster, remoting, broker, rpc, kind, compress):
    """sysFlag COMPRESSED | type << 8 (Java 4.9.8: 0x301 zlib, 0x101 LZ4, 0x201 ZSTD) is taken, stored as sent
    and inflated by our consumer; before, "sysFlag 769 has bits a send may not set"."""
    topic = f"Compressed{kind}"
    _topic(remoting, topic)
    body = b"java body " * 600
    sys_flag = 0x1 | kind << 8
    answer = _send_v2(rpc, broker, topic, compress(body), {"UNIQ_KEY": f"C{kind}"}, sys_flag)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    with PullConsumer("CompressedReader", config=remoting) as consumer:
        (message,) = wait_until(lambda: read_topic(consumer, topic), 10, what="the compressed message")
    assert message.body == body and message.sys_flag == sys_flag
    # The store's own bits (IPv6 hosts change a record's layout) are still refused.
    refused = _send_v2(rpc, broker, topic, b"x", {}, 0x10)
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL and "compression type 0x700" in refused.remark


def test_earliest_message_store_time(cluster, remoting, broker, rpc):
    _topic(remoting, "Earliest")
    empty = rpc.call(broker, Command(RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": "Earliest", "queueId": "0"}))
    assert empty.code == ResponseCode.SUCCESS and empty.fields["timestamp"] == "-1"
    before = int(time.time() * 1000)
    with Producer("EarliestPG", config=remoting) as producer:
        producer.send(Message("Earliest", b"first"))
        producer.send(Message("Earliest", b"second"))

    def earliest():
        answer = rpc.call(broker, Command(RequestCode.GET_EARLIEST_MSG_STORETIME, {"topic": "Earliest", "queueId": "0"}))
        return int(answer.fields["timestamp"]) if answer.fields["timestamp"] != "-1" else None

    stored = wait_until(earliest, 10, what="the first message dispatched")
    assert before - 1000 <= stored <= int(time.time() * 1000)


def test_check_client_config_validates_sql92(cluster, broker, rpc):
    def check(expression_type, expression):
        body = {"clientId": "c1", "group": "CheckCG", "subscriptionData": {
            "topic": "T", "subString": expression, "expressionType": expression_type, "subVersion": 1}}
        return rpc.call(broker, Command(RequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps(body).encode()))

    assert check("SQL92", "a BETWEEN 3 AND 5").code == ResponseCode.SUCCESS
    assert check("TAG", "TagA || TagB").code == ResponseCode.SUCCESS
    bad = check("SQL92", "a BETWEEN")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and bad.remark


def test_a_pull_without_its_subscription_uses_the_heartbeats(cluster, remoting, broker, rpc):
    """The Java push consumer's pulls carry no expression (PullSysFlag FLAG_SUBSCRIPTION unset): SQL92
    and tag consumers get only their messages, from the subscription their heartbeat registered."""
    _topic(remoting, "ByHeartbeat")
    for a in range(10):
        assert _send_v2(rpc, broker, "ByHeartbeat", b"a=%d" % a,
                        {"a": str(a), "TAGS": "TagB" if a % 2 else "TagA"}).code == ResponseCode.SUCCESS
    assert _pull(rpc, broker, "ByHeartbeat", "NoHeartbeatCG", PULL_FLAG_SUSPEND).code == \
        ResponseCode.SUBSCRIPTION_NOT_EXIST
    consumers = [{"groupName": "SqlCG", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                  "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [
                      {"topic": "ByHeartbeat", "subString": "a BETWEEN 3 AND 5", "expressionType": "SQL92",
                       "subVersion": 100}]},
                 {"groupName": "TagCG", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                  "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [
                      {"topic": "ByHeartbeat", "subString": "TagB", "expressionType": "TAG", "subVersion": 100}]}]
    broker_api.heartbeat(rpc, broker, "java-like-client", consumers, [])

    def values(group):
        answer = _pull(rpc, broker, "ByHeartbeat", group, PULL_FLAG_SUSPEND, {"expressionType": "SQL92"}
                       if group == "SqlCG" else None)
        assert answer.code == ResponseCode.SUCCESS, (group, answer.code, answer.remark)
        return sorted(int(m.properties["a"]) for m in decode_messages(answer.body))

    wait_until(lambda: values("TagCG") == [1, 3, 5, 7, 9] or None, 10, what="the tag pull")
    assert values("SqlCG") == [3, 4, 5]
    stale = _pull(rpc, broker, "ByHeartbeat", "SqlCG", 0, {"subVersion": "101"})
    assert stale.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    # With the flag the pull's own expression wins, as before.
    own = _pull(rpc, broker, "ByHeartbeat", "TagCG", PULL_FLAG_SUBSCRIPTION, {"subscription": "TagA"})
    assert sorted(int(m.properties["a"]) for m in decode_messages(own.body)) == [0, 2, 4, 6, 8]


def test_request_reply_is_pushed_to_the_requester(cluster, remoting, broker, rpc):
    """A reply (SEND_REPLY_MESSAGE_V2) goes to <cluster>_REPLY_TOPIC and to the requester's connection
    (PUSH_REPLY_MESSAGE_TO_CLIENT), found by its producer heartbeat's client id."""
    pushed: list[Command] = []
    arrived = threading.Event()

    def on_push(request: Command) -> Command:
        pushed.append(request)
        arrived.set()
        return request.response(ResponseCode.SUCCESS)

    requester = RemotingRpcClient(default_timeout_ms=5000)
    requester.server_request_handlers[PUSH_REPLY_MESSAGE_TO_CLIENT] = on_push
    try:
        broker_api.heartbeat(requester, broker, "requester-1", [], ["RequesterPG"])
        reply_topic = "DefaultCluster_REPLY_TOPIC"
        answer = _send_v2(rpc, broker, reply_topic, b"the reply", {
            "CORRELATION_ID": "corr-1", "REPLY_TO_CLIENT": "requester-1", "TTL": "3000", "CLUSTER": "DefaultCluster",
            "UNIQ_KEY": "reply-1"}, code=RequestCode.SEND_REPLY_MESSAGE_V2, group="ResponderPG")
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        assert arrived.wait(5)
        (push,) = pushed
        assert push.body == b"the reply" and push.fields["topic"] == reply_topic
        props = decode_properties(push.fields["properties"].encode())
        assert props["CORRELATION_ID"] == "corr-1" and int(props["PUSH_REPLY_TIME"]) > 0
        for name in ("bornHost", "storeHost", "storeTimestamp", "producerGroup", "defaultTopic", "queueId", "sysFlag",
                     "bornTimestamp", "flag"):   # ReplyMessageRequestHeader's required fields
            assert push.fields.get(name), name
        nobody = _send_v2(rpc, broker, reply_topic, b"lost", {"REPLY_TO_CLIENT": "gone-client"},
                          code=RequestCode.SEND_REPLY_MESSAGE_V2)
        assert nobody.code == ResponseCode.SYSTEM_ERROR and "channel of <gone-client> not found" in nobody.remark
        with PullConsumer("ReplyReader", config=remoting) as consumer:   # stored too (storeReplyMessageEnable)
            stored = wait_until(lambda: read_topic(consumer, reply_topic), 10, what="the stored reply")
        assert b"the reply" in [m.body for m in stored]
    finally:
        requester.close()


def test_query_message_answers_the_java_header(cluster, remoting, broker, rpc):
    """QueryMessageResponseHeader's two required fields, found or not; a unique-key query."""
    _topic(remoting, "Queried")
    assert _send_v2(rpc, broker, "Queried", b"find me", {"UNIQ_KEY": "UNIQ-FIND-ME", "KEYS": "k1"}).code == 0

    def query(key, unique):
        fields = {"topic": "Queried", "key": key, "maxNum": "1", "beginTimestamp": "0",
                  "endTimestamp": str((1 << 63) - 1)}
        if unique:
            fields["_UNIQUE_KEY_QUERY"] = "true"
        return rpc.call(broker, Command(RequestCode.QUERY_MESSAGE, fields))

    found = wait_until(lambda: (lambda a: a if a.code == ResponseCode.SUCCESS else None)(query("UNIQ-FIND-ME", True)),
                       10, what="the message indexed")
    assert int(found.fields["indexLastUpdateTimestamp"]) > 0 and int(found.fields["indexLastUpdatePhyoffset"]) >= 0
    (message,) = decode_messages(found.body)
    assert message.body == b"find me" and "__CRC32#" not in message.properties
    assert query("k1", False).code == ResponseCode.SUCCESS
    missing = query("no-such-key", False)
    assert missing.code == ResponseCode.QUERY_NOT_FOUND and "indexLastUpdateTimestamp" in missing.fields


def test_delivered_messages_carry_what_apache_delivers(cluster, remoting, broker, rpc):
    _topic(remoting, "Delivered")
    assert _send_v2(rpc, broker, "Delivered", b"plain", {"UNIQ_KEY": "plain-1", "u": "1"}).code == 0
    assert _send_v2(rpc, broker, "Delivered", b"later", {"UNIQ_KEY": "later-1", "DELAY": "1"}).code == 0
    with PullConsumer("DeliveredReader", config=remoting) as consumer:
        got = wait_until(lambda: (lambda ms: ms if len(ms) == 2 else None)(read_topic(consumer, "Delivered")), 20,
                         what="both messages delivered")
    by_body = {m.body: m for m in got}
    plain, later = by_body[b"plain"].properties, by_body[b"later"].properties
    assert plain == {"UNIQ_KEY": "plain-1", "u": "1", "CLUSTER": "DefaultCluster"}
    assert later == {"WAIT": "true", "UNIQ_KEY": "later-1", "DELAY": "1", "CLUSTER": "DefaultCluster",
                     "REAL_TOPIC": "Delivered", "REAL_QID": "0"}
    for m in got:
        raw = m._raw[m._pos:]
        record = fmt.decode_at(raw, 0, check_crc=False)
        _ip, port = unpack_host(record.born_host)
        assert port > 0   # the sender's port, as RocketMQ stores its channel's remote address


def test_a_one_way_offset_update_before_closing_is_kept(cluster, remoting, broker):
    """DefaultMQPullConsumer.persist: UPDATE_CONSUMER_OFFSET one-way, then shutdown closes the connection
    at once; a new member of the group reads the offset back (QUERY_CONSUMER_OFFSET)."""
    _topic(remoting, "OneWayOffsets")
    with Producer("OneWayPG", config=remoting) as producer:
        for i in range(5):
            producer.send(Message("OneWayOffsets", b"m%d" % i))
    # A bare socket, as the Java client's channel: the frame written, the connection closed at once.
    host, port = broker.removeprefix("tcp://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as leaving:
        leaving.sendall(rf.encode_frame(Command(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "OneWayCG", "topic": "OneWayOffsets", "queueId": "0", "commitOffset": "5"},
            flag=FLAG_ONEWAY), rf.SERIALIZE_JSON))
    reader = RemotingRpcClient(default_timeout_ms=5000)
    try:
        def committed():
            answer = reader.call(broker, Command(RequestCode.QUERY_CONSUMER_OFFSET, {
                "consumerGroup": "OneWayCG", "topic": "OneWayOffsets", "queueId": "0"}))
            return answer.fields.get("offset") == "5" or None
        wait_until(committed, 10, what="the one-way offset applied")
    finally:
        reader.close()
