"""mqadmin's broker requests through the remoting door: topicStatus (202),
consumerProgress (208), brokerStatus (28 as a KVTable), updateSubGroup / deleteSubGroup
(200 / 201 / 207), with RocketMQ's bodies (maps keyed by MessageQueue objects, as fastjson
writes them) and what the broker enforces from a subscription group."""

from __future__ import annotations

import json
import socket
import time

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, Message, Producer, PushConsumer
from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.errors import BrokerError, NoRouteError
from rocketbox.cluster.protocol import MessageQueue, RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.wire_format import Command
from tests.conftest import client_config, fill_topic

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("remoting-admin"))) as started:
        yield started


@pytest.fixture(scope="module")
def admin(cluster):
    """Our Admin speaking remoting to the remoting doors (as mqadmin would reach them)."""
    with Admin(config=client_config(cluster, transport="remoting")) as remoting_admin:
        yield remoting_admin


@pytest.fixture(scope="module")
def broker(cluster, admin):
    """The remoting endpoint of the one master."""
    (endpoint,) = admin.master_endpoints().values()
    return endpoint


def _produce(cluster, topic: str, count: int, queues: int = 2) -> list:
    cfg = client_config(cluster)
    results = fill_topic(cfg, topic, queues, count, tags="T")
    with Admin(config=cfg) as native_admin:   # dispatched: visible to consumers and to the stats
        wait_until(lambda: sum(r["maxOffset"] for r in native_admin.queue_offsets(topic)) == count, 10,
                   what=f"{count} messages of {topic} dispatched")
    return results


def _stored(admin, topic: str) -> int:
    """Messages stored in ``topic`` (0 while its route is not registered yet)."""
    try:
        return sum(row["maxOffset"] for row in admin.queue_offsets(topic))
    except NoRouteError:
        return 0


def _call(endpoint: str, command: Command) -> Command:
    rpc = RemotingRpcClient(default_timeout_ms=5000)
    try:
        return rpc.call(endpoint, command)
    finally:
        rpc.close()


def test_topic_status_and_consumer_progress_carry_rocketmq_bodies(cluster, admin, broker):
    results = _produce(cluster, "AdmStats", 10)
    before_ms = int(time.time() * 1000)
    mq0 = MessageQueue("AdmStats", results[0].queue.broker_name, 0)
    broker_api.update_consumer_offset(admin.rpc, broker, "AdmGroup", mq0, 2)

    raw = _call(broker, Command(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "AdmStats"}))
    assert raw.code == ResponseCode.SUCCESS
    # fastjson's form: the MessageQueue object itself stands where a key would be.
    assert raw.body.startswith(b'{"offsetTable":{{"brokerName":"')
    stats = admin.topic_stats(broker, "AdmStats")
    per_queue = {mq.queue_id: sum(1 for r in results if r.queue.queue_id == mq.queue_id) for mq in stats}
    assert sorted(per_queue) == [0, 1]
    for mq, offsets in stats.items():
        assert (offsets["minOffset"], offsets["maxOffset"]) == (0, per_queue[mq.queue_id])
        assert 0 < offsets["lastUpdateTimestamp"] <= before_ms + 1000

    progress = admin.consume_stats(broker, "AdmGroup", "AdmStats")
    assert progress["offsetTable"][mq0]["consumerOffset"] == 2
    assert progress["offsetTable"][mq0]["brokerOffset"] == per_queue[0]
    assert progress["offsetTable"][mq0]["lastTimestamp"] > 0
    rows = admin.queue_offsets("AdmStats", "AdmGroup")
    assert [(r["queueId"], r["consumerOffset"], r["lag"]) for r in rows] == \
        [(0, 2, per_queue[0] - 2), (1, 0, per_queue[1])]

    # The group's consume TPS: what this broker served it, sampled once a second.
    pulled = broker_api.pull_result(admin.rpc.call(broker, broker_api.pull_request("AdmGroup", mq0, 2, 32, "*", 0)),
                                    mq0, broker, None)
    assert len(pulled.messages) == per_queue[0] - 2 > 0, per_queue
    wait_until(lambda: admin.consume_stats(broker, "AdmGroup")["consumeTps"] > 0, 10, what="consume TPS seen")

    unknown = _call(broker, Command(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "AdmNoSuchTopic"}))
    assert (unknown.code, unknown.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[AdmNoSuchTopic] not exist")


def test_broker_status_is_a_kv_table_of_strings(cluster, admin, broker):
    _produce(cluster, "AdmStatus", 3, queues=1)
    table = admin.broker_status(broker)
    assert all(isinstance(value, str) for value in table.values())
    assert len(table["putTps"].split()) == 3
    detail = admin.broker_runtime_info(broker)
    assert int(table["commitLogMaxOffset"]) <= detail["writePos"]
    assert int(table["msgPutTotalTodayNow"]) >= 3
    assert table["brokerRole"] == "ASYNC_MASTER" and table["brokerActive"] == "true"
    assert int(table["bootTimestamp"]) == detail["bootTimestamp"]
    assert 0 < float(table["commitLogDiskRatio"]) < 1
    # A remoting request without ``detail`` gets the KVTable, as mqadmin brokerStatus sends it.
    plain = _call(broker, Command(RequestCode.GET_BROKER_RUNTIME_INFO, {}))
    assert set(json.loads(plain.body)) == {"table"}


def test_a_disabled_group_may_not_pull_until_deleted(cluster, admin, broker):
    results = _produce(cluster, "AdmLockedTopic", 4, queues=1)
    mq = results[0].queue
    broker_api.update_consumer_offset(admin.rpc, broker, "AdmLocked", mq, 1)
    admin.update_subscription_group("AdmLocked", consumeEnable=False, retryMaxTimes=5)
    stored = admin.subscription_groups(broker)["AdmLocked"]
    assert (stored["consumeEnable"], stored["retryMaxTimes"], stored["consumeBroadcastEnable"]) == (False, 5, True)

    refused = admin.rpc.call(broker, broker_api.pull_request("AdmLocked", mq, 0, 32, "*", 0))
    assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION, "subscription group no permission, AdmLocked")

    admin.delete_subscription_group("AdmLocked", clean_offset=True)
    assert "AdmLocked" not in admin.subscription_groups(broker)
    assert admin.consume_stats(broker, "AdmLocked", "AdmLockedTopic")["offsetTable"][mq]["consumerOffset"] == 0
    # Deleted, the group is made again with the defaults on its next pull (autoCreateSubscriptionGroup).
    served = admin.rpc.call(broker, broker_api.pull_request("AdmLocked", mq, 0, 32, "*", 0))
    assert served.code == ResponseCode.SUCCESS
    assert admin.subscription_groups(broker)["AdmLocked"]["consumeEnable"] is True


def test_a_groups_retry_max_times_sends_to_dead_letters_when_the_client_names_none(cluster, admin, broker):
    results = _produce(cluster, "AdmRetryTopic", 1, queues=1)
    admin.update_subscription_group("AdmNoRetry", retryMaxTimes=0)
    (message,) = admin.pull(results[0].queue, 0).messages
    # A Java client before 3.4.9 sends no maxReconsumeTimes: the group's retryMaxTimes decides.
    answer = admin.rpc.call(broker, Command(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "group": "AdmNoRetry", "offset": str(message.phys_offset), "delayLevel": "0",
        "originTopic": "AdmRetryTopic", "originMsgId": message.msg_id}))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    wait_until(lambda: _stored(admin, "%DLQ%AdmNoRetry") == 1, 10, what="the message in the group's dead-letter topic")
    assert _stored(admin, "%RETRY%AdmNoRetry") == 0


@pytest.mark.parametrize("body, reason", [
    (b'{"groupName": 5}', "groupName"),
    (b'{"groupName": "AdmBad", "retryMaxTimes": "many"}', "retryMaxTimes"),
    (b'{"groupName": "AdmBad", "consumeEnable": 1}', "consumeEnable"),
    (b'{"groupName": "bad name!"}', "bad name!"),
    (b'not json', "JSON"),
])
def test_a_bad_subscription_group_is_refused_with_its_reason(broker, body, reason):
    answer = _call(broker, Command(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert reason in answer.remark


def test_consumer_status_is_answered_by_a_native_consumer_through_the_native_door(cluster):
    """GET_CONSUMER_RUNNING_INFO relayed over ZeroMQ: a native admin asks, our PushConsumer answers."""
    cfg = client_config(cluster)
    _produce(cluster, "AdmRunning", 2, queues=2)
    with PushConsumer("AdmRunningCG", config=cfg) as consumer, Admin(config=cfg) as native_admin:
        consumer.subscribe("AdmRunning", "TagA || TagB")
        consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
        consumer.start()
        (endpoint,) = native_admin.master_endpoints().values()
        wait_until(lambda: len(native_admin.consumer_running_info(endpoint, "AdmRunningCG", consumer.client_id)
                               ["mqTable"]) == 3, 15, what="both queues and the retry queue assigned")
        info = native_admin.consumer_running_info(endpoint, "AdmRunningCG", consumer.client_id)
    assert info["properties"]["consumerGroup"] == "AdmRunningCG"
    assert {(s["topic"], s["subString"]) for s in info["subscriptionSet"]} >= {("AdmRunning", "TagA || TagB")}
    assert sorted(mq.queue_id for mq in info["mqTable"] if mq.topic == "AdmRunning") == [0, 1]


def _raw_consumer(port: int, group: str, client_id: str) -> socket.socket:
    """A 'consumer' that heartbeats over a raw remoting connection and never answers the broker."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    heartbeat = {"clientID": client_id, "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "subscriptionDataSet": []}], "producerDataSet": []}
    sock.sendall(rf.encode_frame(Command(RequestCode.HEART_BEAT, {}, json.dumps(heartbeat).encode(), opaque=1)))
    decoder = rf.FrameDecoder()
    for _ in range(100):   # the group-changed notice may come before the answer
        for payload in decoder.feed(sock.recv(65536)):
            command = rf.decode_frame_payload(payload)[0]
            if command.is_response:
                assert command.code == ResponseCode.SUCCESS, command.remark
                return sock
    raise AssertionError("no answer to the heartbeat")


def test_consumer_status_of_a_silent_or_vanished_consumer_is_an_error_not_a_hang(cluster, admin, broker):
    port = int(broker.rsplit(":", 1)[1])
    silent = _raw_consumer(port, "AdmSilent", "10.0.0.1@1@silent@1")
    try:
        started = time.monotonic()
        with pytest.raises(BrokerError, match="did not answer within"):
            admin.consumer_running_info(broker, "AdmSilent", "10.0.0.1@1@silent@1")
        assert time.monotonic() - started < 5.5   # the broker's 3 s (+ its 1 s check), not the admin's own time-out
    finally:
        silent.close()
    vanishing = _raw_consumer(port, "AdmVanish", "10.0.0.1@1@vanish@1")
    future = admin.rpc.call_async(broker, Command(RequestCode.GET_CONSUMER_RUNNING_INFO, {
        "consumerGroup": "AdmVanish", "clientId": "10.0.0.1@1@vanish@1"}))
    vanishing.recv(65536)   # the relayed request reached the 'consumer'
    vanishing.close()       # ... which goes away: the call ends now, with an error
    answer = future.result(timeout=4)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "did not answer" in answer.remark


def test_queries_by_id_key_unique_key_and_offset_through_the_remoting_door(cluster, admin):
    """mqadmin queryMsgById / ByKey / ByUniqueKey / ByOffset, all through the remoting door."""
    cfg = client_config(cluster)
    with Admin(config=cfg) as native_admin:
        native_admin.create_topic("AdmQuery", 1)
    with Producer("AdminQueryPG", config=cfg) as producer:
        sent = producer.send(Message("AdmQuery", b"find me", tags="Q", keys=["order-42"]))
    wait_until(lambda: _stored(admin, "AdmQuery") == 1, 10, what="the message dispatched")
    by_id = admin.view_message(sent.offset_msg_id)
    (by_key,) = admin.query_by_key("AdmQuery", "order-42")
    (by_unique_key,) = admin.query_by_unique_key("AdmQuery", sent.msg_id)
    by_offset = admin.message_at(sent.queue, sent.queue_offset)
    for found in (by_id, by_key, by_unique_key, by_offset):
        assert (found.msg_id, found.body, found.tags, found.keys) == (sent.msg_id, b"find me", "Q", ["order-42"])
