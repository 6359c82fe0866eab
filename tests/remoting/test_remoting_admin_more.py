"""mqadmin's NameServer requests and its rarer broker requests through the remoting door,
with RocketBox's own remoting client: each request code with RocketMQ's header fields,
bodies and refusals, and what it changes (routes, offsets, files, a consumer's listener)."""

from __future__ import annotations

import json
import os
import threading

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, Message, Producer, PushConsumer
from rocketbox.cluster.client import admin_requests
from rocketbox.cluster.client.message import decode_messages
from rocketbox.cluster.client.transaction import TransactionProducer
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.fastjson_format import loads as fastjson_loads
from rocketbox.cluster.protocol import MessageQueue, RequestCode, ResponseCode, offset_table_from_reset_body
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.wire_format import Command
from tests.conftest import UndecidedTransactions, await_group_caught_up, client_config, fill_topic
from tests.java.apache_keys import APACHE_BROKER_STATUS_KEYS, APACHE_NAMESRV_CONFIG_KEYS

# Our Admin over the remoting door and the master's remoting endpoint, over this module's cluster.
from tests.remoting.test_remoting_admin import admin, broker  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("remoting-admin-more"))) as started:
        yield started


@pytest.fixture(scope="module")
def namesrv(cluster):
    return f"tcp://{cluster.remoting_namesrv}"


@pytest.fixture(scope="module")
def rpc():
    client = RemotingRpcClient(default_timeout_ms=5000)
    yield client
    client.close()


def _ok(answer: Command) -> Command:
    assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
    return answer


def _filled(cluster, admin, topic: str, queues: int, count: int) -> list:
    """``fill_topic``, then wait until every message is dispatched (visible to reads)."""
    results = fill_topic(client_config(cluster), topic, queues, count)
    wait_until(lambda: sum(r["maxOffset"] for r in admin.queue_offsets(topic)) == count, 10,
               what=f"{count} messages of {topic} dispatched")
    return results


def _route(rpc, namesrv: str, topic: str) -> dict:
    return json.loads(_ok(rpc.call(namesrv, Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))).body)


# ---------------------------------------------------------------- NameServer

def test_kv_config_round_trip_in_apaches_file_and_the_order_conf_in_routes(cluster, rpc, namesrv):
    put = {"namespace": "ORDER_TOPIC_CONFIG", "key": "KvOrdered", "value": "broker-a:4"}
    _ok(rpc.call(namesrv, Command(RequestCode.PUT_KV_CONFIG, put)))
    got = _ok(rpc.call(namesrv, Command(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG",
                                                                    "key": "KvOrdered"})))
    assert got.fields["value"] == "broker-a:4"
    listing = _ok(rpc.call(namesrv, Command(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"})))
    assert json.loads(listing.body) == {"table": {"KvOrdered": "broker-a:4"}}
    path = os.path.join(cluster.topology.namesrvs[0].data_dir, "kvConfig.json")
    with open(path) as f:   # RocketMQ's KVConfigSerializeWrapper: either NameServer reads the other's
        assert json.load(f) == {"configTable": {"ORDER_TOPIC_CONFIG": {"KvOrdered": "broker-a:4"}}}

    # Routes carry the topic's order config once orderMessageEnable is on (RocketMQ's default: off).
    fill_topic(client_config(cluster), "KvOrdered", 2, 1)
    assert _route(rpc, namesrv, "KvOrdered")["orderTopicConf"] is None
    _ok(rpc.call(namesrv, Command(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true\n")))
    try:
        assert _route(rpc, namesrv, "KvOrdered")["orderTopicConf"] == "broker-a:4"
    finally:
        _ok(rpc.call(namesrv, Command(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=false\n")))

    _ok(rpc.call(namesrv, Command(RequestCode.DELETE_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "KvOrdered"})))
    missing = rpc.call(namesrv, Command(RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "KvOrdered"}))
    assert (missing.code, missing.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                              "No config item, Namespace: ORDER_TOPIC_CONFIG Key: KvOrdered")
    no_key = rpc.call(namesrv, Command(RequestCode.PUT_KV_CONFIG, {"namespace": "N"}))
    assert (no_key.code, no_key.remark) == (ResponseCode.SYSTEM_ERROR, "namespace or key is null")
    too_big = rpc.call(namesrv, Command(RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "x" * 70_000}))
    assert too_big.code == ResponseCode.SYSTEM_ERROR and "at most 65536 bytes" in too_big.remark


def test_namesrv_config_answers_every_apache_key_and_changes_only_live_ones(cluster, rpc, namesrv):
    text = _ok(rpc.call(namesrv, Command(RequestCode.GET_NAMESRV_CONFIG))).body.decode()
    config = dict(line.split("=", 1) for line in text.splitlines())
    assert not APACHE_NAMESRV_CONFIG_KEYS - set(config)
    assert config["listenPort"] == cluster.remoting_namesrv.rsplit(":", 1)[1]
    assert config["kvConfigPath"].endswith("/kvConfig.json")

    black = rpc.call(namesrv, Command(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"kvConfigPath=/etc/passwd\n"))
    assert (black.code, black.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
    fixed = rpc.call(namesrv, Command(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"listenPort=1\n"))
    assert fixed.code == ResponseCode.SYSTEM_ERROR and "cannot change while the NameServer runs" in fixed.remark
    bad = rpc.call(namesrv, Command(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"brokerExpiryMs=soon\n"))
    assert bad.code == ResponseCode.SYSTEM_ERROR and "brokerExpiryMs" in bad.remark
    _ok(rpc.call(namesrv, Command(RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"brokerExpiryMs=150000\n")))
    text = _ok(rpc.call(namesrv, Command(RequestCode.GET_NAMESRV_CONFIG))).body.decode()
    assert "brokerExpiryMs=150000" in text.splitlines()
    with open(config["configStorePath"]) as f:   # what the next boot starts with
        assert "brokerExpiryMs=150000" in f.read().splitlines()


def test_wipe_and_add_write_perm_hold_through_registrations(cluster, rpc, namesrv, admin):
    fill_topic(client_config(cluster), "PermTopic", 2, 1)
    wiped = _ok(rpc.call(namesrv, Command(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})))
    try:
        assert int(wiped.fields["wipeTopicCount"]) >= 1
        assert _route(rpc, namesrv, "PermTopic")["queueDatas"][0]["perm"] == 4
        # A registration (the broker's, after a topic change) keeps the write bit off.
        admin.create_topic("PermTopicAfter", 1)
        wait_until(lambda: _route_or_none(rpc, namesrv, "PermTopicAfter"), 10, what="the new topic routed")
        assert _route(rpc, namesrv, "PermTopicAfter")["queueDatas"][0]["perm"] == 4
        assert _route(rpc, namesrv, "PermTopic")["queueDatas"][0]["perm"] == 4
    finally:
        added = _ok(rpc.call(namesrv, Command(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})))
    assert int(added.fields["addTopicCount"]) >= 2
    assert _route(rpc, namesrv, "PermTopic")["queueDatas"][0]["perm"] == 6


def _route_or_none(rpc, namesrv: str, topic: str):
    answer = rpc.call(namesrv, Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
    return json.loads(answer.body) if answer.code == ResponseCode.SUCCESS else None


def test_topic_lists_by_cluster_system_and_unit_flags(cluster, rpc, namesrv, broker):
    for topic, flag in (("UnitTopic", 1), ("UnitSubTopic", 2), ("UnitBothTopic", 3)):
        _ok(rpc.call(broker, Command(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6", "topicSysFlag": str(flag)})))
    wait_until(lambda: _route_or_none(rpc, namesrv, "UnitBothTopic"), 10, what="the topics routed")

    def listed(code: int, fields: dict | None = None) -> dict:
        return json.loads(_ok(rpc.call(namesrv, Command(code, fields or {}))).body)

    assert {"UnitTopic", "UnitSubTopic"} <= set(listed(RequestCode.GET_TOPICS_BY_CLUSTER,
                                                       {"cluster": "DefaultCluster"})["topicList"])
    assert listed(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "NoSuchCluster"})["topicList"] == []
    system = listed(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    assert {"DefaultCluster", "broker-a"} <= set(system["topicList"])
    assert system["brokerAddr"] == broker.removeprefix("tcp://")   # the door's address
    assert {"UnitTopic", "UnitBothTopic"} == set(listed(RequestCode.GET_UNIT_TOPIC_LIST)["topicList"])
    assert {"UnitSubTopic", "UnitBothTopic"} == set(listed(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)["topicList"])
    assert {"UnitSubTopic"} == set(listed(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)["topicList"])


def test_query_data_version_of_a_broker_that_sends_none(rpc, namesrv, broker):
    answer = _ok(rpc.call(namesrv, Command(RequestCode.QUERY_DATA_VERSION, {"brokerAddr": broker.removeprefix("tcp://")},
                                           b'{"counter":1,"timestamp":2}')))
    assert answer.fields["changed"] == "true" and answer.body == b""


# ---------------------------------------------------------------- broker: clients

def test_producer_connection_and_producer_table_name_the_client_address_with_its_port(cluster, admin, broker):
    fill_topic(client_config(cluster), "ProducerTopic", 1, 1)
    remoting = client_config(cluster, transport="remoting")
    with TransactionProducer("AdmTxPG", UndecidedTransactions(), config=remoting) as producer:
        producer.send_message_in_transaction(Message("ProducerTopic", b"half"))
        (member,) = admin_requests.producer_connections(admin, broker, "AdmTxPG")
        assert member["clientId"] == producer.client_id and member["language"] == "PYTHON"
        host, port = member["clientAddr"].split(":")
        assert host == "127.0.0.1" and 0 < int(port) < 65536
        table = admin_requests.producer_table(admin, broker)
        assert [m["remoteIP"] for m in table["AdmTxPG"]] == [f"/{member['clientAddr']}"]
    with pytest.raises(BrokerError, match=r"the producer group\[NoSuchPG\] not exist"):
        admin_requests.producer_connections(admin, broker, "NoSuchPG")


def test_consume_message_directly_runs_the_consumers_listener(cluster, admin, broker):
    results = _filled(cluster, admin, "DirectTopic", 1, 2)
    seen, refused = [], threading.Event()

    def listener(messages):
        for m in messages:
            seen.append(m.body)
            if m.body == b"m1" and len(seen) > 2:
                refused.set()
                raise RuntimeError("cannot take m1 twice")
        return ConsumeStatus.CONSUME_SUCCESS

    cfg = client_config(cluster, transport="remoting")
    with PushConsumer("DirectCG", config=cfg) as consumer:
        consumer.subscribe("DirectTopic")
        consumer.register_listener(listener)
        consumer.start()
        await_group_caught_up(client_config(cluster), "DirectTopic", "DirectCG")
        assert sorted(seen) == [b"m0", b"m1"]
        result = admin_requests.consume_message_directly(admin, results[0].offset_msg_id, "DirectCG", consumer.client_id)
        assert (result["consumeResult"], result["order"], result["autoCommit"]) == ("CR_SUCCESS", False, True)
        assert seen[-1] == b"m0" and len(seen) == 3
        failed = admin_requests.consume_message_directly(admin, results[1].offset_msg_id, "DirectCG", consumer.client_id)
        assert failed["consumeResult"] == "CR_THROW_EXCEPTION" and "cannot take m1 twice" in failed["remark"]
        assert refused.is_set()
        with pytest.raises(BrokerError, match="not online"):
            admin_requests.consume_message_directly(admin, results[0].offset_msg_id, "DirectCG", "10.0.0.9@1@nobody")
        wrong_group = admin.rpc.call(broker, Command(RequestCode.CONSUME_MESSAGE_DIRECTLY, {
            "consumerGroup": "DirectCG", "clientId": consumer.client_id, "msgId": "not an id"}))
        assert wrong_group.code == ResponseCode.SYSTEM_ERROR and "not an offset message id" in wrong_group.remark


def test_reset_offset_answers_resetoffsetbody_and_our_consumer_applies_it(cluster, admin, broker):
    fill_topic(client_config(cluster), "ResetTopic", 2, 6)
    seen = []
    cfg = client_config(cluster, transport="remoting")
    with PushConsumer("ResetCG", config=cfg) as consumer:
        consumer.subscribe("ResetTopic")
        consumer.register_listener(lambda msgs: seen.extend(m.body for m in msgs) or ConsumeStatus.CONSUME_SUCCESS)
        consumer.start()
        await_group_caught_up(client_config(cluster), "ResetTopic", "ResetCG")
        wait_until(lambda: len(seen) == 6, 10, what="six consumed")
        answer = _ok(admin.rpc.call(broker, Command(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": "ResetTopic", "group": "ResetCG", "timestamp": "0", "isForce": "true"})))
        # RocketMQ's ResetOffsetBody: a map keyed by MessageQueue objects, as fastjson writes it.
        assert answer.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"ResetTopic"}:0')
        assert offset_table_from_reset_body(answer.body) == {MessageQueue("ResetTopic", "broker-a", 0): 0,
                                                             MessageQueue("ResetTopic", "broker-a", 1): 0}
        wait_until(lambda: len(seen) == 12, 15, what="the six consumed again after the reset")
    assert sorted(seen) == sorted(seen[:6] * 2)


def test_one_queue_reset_of_rocketmq_5_with_no_member_online(cluster, admin, broker):
    _filled(cluster, admin, "ResetOneTopic", 2, 4)
    answer = _ok(admin.rpc.call(broker, Command(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
        "topic": "ResetOneTopic", "group": "ResetOneCG", "timestamp": "0", "queueId": "1", "offset": "1"})))
    assert offset_table_from_reset_body(answer.body) == {MessageQueue("ResetOneTopic", "broker-a", 1): 1}
    assert admin.consume_stats(broker, "ResetOneCG", "ResetOneTopic")["offsetTable"][
        MessageQueue("ResetOneTopic", "broker-a", 1)]["consumerOffset"] == 1
    beyond = admin.rpc.call(broker, Command(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
        "topic": "ResetOneTopic", "group": "ResetOneCG", "timestamp": "0", "queueId": "1", "offset": "99"}))
    assert beyond.code == ResponseCode.SYSTEM_ERROR and "not in consume queue range [0-2]" in beyond.remark
    everyone = admin.rpc.call(broker, Command(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
        "topic": "ResetOneTopic", "group": "ResetOneCG", "timestamp": "0"}))
    assert everyone.code == ResponseCode.CONSUMER_NOT_ONLINE   # the tool then commits offsets itself


# ---------------------------------------------------------------- broker: queues, offsets, store

def test_broker_consume_stats_query_cq_clone_and_time_span(cluster, admin, broker):
    cfg = client_config(cluster)
    results = fill_topic(cfg, "StatsTopic", 2, 6, tags="S")
    with PushConsumer("StatsCG", config=cfg) as consumer:
        consumer.subscribe("StatsTopic")
        consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
        consumer.start()
        await_group_caught_up(cfg, "StatsTopic", "StatsCG")
    stats = admin_requests.broker_consume_stats(admin, broker)
    rows = {(mq.topic, mq.queue_id): o for group, mq, o in stats["rows"] if group == "StatsCG" and mq.topic == "StatsTopic"}
    assert {key: (o["brokerOffset"], o["consumerOffset"]) for key, o in rows.items()} == \
        {("StatsTopic", 0): (3, 3), ("StatsTopic", 1): (3, 3)}
    assert all(o["lastTimestamp"] > 0 for o in rows.values())
    assert all(mq.topic != "StatsTopic" for _, mq, _ in admin_requests.broker_consume_stats(admin, broker, True)["rows"])

    entries = admin_requests.query_consume_queue(admin, broker, "StatsTopic", 0, 1, 5, "StatsCG")
    assert (entries["minQueueIndex"], entries["maxQueueIndex"]) == (0, 3)
    first_q0 = [r for r in results if r.queue.queue_id == 0]
    assert [e["physicOffset"] for e in entries["queueData"]] == [
        admin.view_message(r.offset_msg_id).phys_offset for r in first_q0[1:]]
    assert (entries["subscriptionData"], entries["filterData"]) == (None, "StatsCG@StatsTopic is not online!")
    outside = admin.rpc.call(broker, Command(RequestCode.QUERY_CONSUME_QUEUE, {
        "topic": "StatsTopic", "queueId": "0", "index": "7", "count": "1"}))
    assert outside.code == ResponseCode.SUCCESS and outside.remark == "Index 7 of 0@StatsTopic is not exist!"
    missing = admin.rpc.call(broker, Command(RequestCode.QUERY_CONSUME_QUEUE, {
        "topic": "StatsTopic", "queueId": "9", "index": "0", "count": "1"}))
    assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "9@StatsTopic is not exist!")

    admin_requests.clone_group_offset(admin, broker, "StatsCG", "StatsCopyCG", "StatsTopic", offline=True)
    copied = admin.consume_stats(broker, "StatsCopyCG", "StatsTopic")["offsetTable"]
    assert sorted(o["consumerOffset"] for o in copied.values()) == [3, 3]

    spans = json.loads(_ok(admin.rpc.call(broker, Command(RequestCode.QUERY_CONSUME_TIME_SPAN, {
        "topic": "StatsTopic", "group": "StatsCG"}))).body)["consumeTimeSpanSet"]
    assert [s["messageQueue"]["queueId"] for s in spans] == [0, 1]
    assert all(0 < s["minTimeStamp"] <= s["maxTimeStamp"] == s["consumeTimeStamp"] and s["delayTime"] == 0
               for s in spans)
    correction = fastjson_loads(_ok(admin.rpc.call(broker, Command(RequestCode.QUERY_CORRECTION_OFFSET, {
        "topic": "StatsTopic", "compareGroup": "StatsCG", "filterGroups": "StatsCopyCG"}))).body)
    assert correction == {"correctionOffsets": {0: 3, 1: 3}}


def test_clean_expired_cq_and_unused_topic(cluster, admin, broker):
    store_dir = cluster.topology.brokers[0].store.store_dir
    orphan = os.path.join(store_dir, "consumequeue", "OrphanTopic", "0")
    os.makedirs(orphan)   # a topic's ConsumeQueue left without its config (a crash mid-deletion)
    assert "0 ConsumeQueue files deleted" in _ok(admin.rpc.call(broker, Command(
        RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE))).remark
    cleaned = _ok(admin.rpc.call(broker, Command(RequestCode.CLEAN_UNUSED_TOPIC)))
    assert cleaned.remark == "1 unused topics cleaned" and not os.path.exists(os.path.dirname(orphan))
    system = json.loads(_ok(admin.rpc.call(broker, Command(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))).body)
    assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "DefaultCluster", "broker-a"} <= \
        set(system["topicList"])


def test_delete_topic_answers_success_for_a_missing_topic_and_refuses_a_system_one(admin, broker):
    gone = admin.rpc.call(broker, Command(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "%RETRY%NeverHadOne"}))
    assert gone.code == ResponseCode.SUCCESS
    system = admin.rpc.call(broker, Command(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"}))
    assert (system.code, system.remark) == (ResponseCode.SYSTEM_ERROR,
                                            "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic.")


def test_delay_offsets_and_broker_status_answer_every_apache_key(cluster, admin, broker):
    cfg = client_config(cluster)
    with Admin(config=cfg) as native_admin:
        native_admin.create_topic("DelayTopic", 1)
    with Producer("DelayPG", config=cfg) as producer:
        producer.send(Message("DelayTopic", b"later", properties={"DELAY": "1"}))
    wait_until(lambda: admin.queue_offsets("DelayTopic")[0]["maxOffset"] == 1, 15, what="the delayed message delivered")
    delays = fastjson_loads(_ok(admin.rpc.call(broker, Command(RequestCode.GET_ALL_DELAY_OFFSET))).body)
    assert delays == {"offsetTable": {1: 1}}
    status = admin.broker_status(broker)
    assert not APACHE_BROKER_STATUS_KEYS - set(status)
    assert status["scheduleMessageOffset_1"] == "1,1"
    assert int(status["putMessageTimesTotal"]) >= 2 and float(status["putMessageAverageSize"]) > 0
    assert status["commitLogDirCapacity"].startswith("Total : ") and status["remainHowManyDataToFlush"].endswith("B")
    assert status[f"commitLogDiskRatio_{os.path.join(cluster.topology.brokers[0].store.store_dir, 'commitlog')}"]


def test_resume_check_half_message_only_while_the_transaction_is_open(cluster, admin, broker):
    fill_topic(client_config(cluster), "HalfTopic", 1, 1)
    with TransactionProducer("HalfPG", UndecidedTransactions(), config=client_config(cluster)) as producer:
        half = producer.send_message_in_transaction(Message("HalfTopic", b"pending")).send_result

    def halves() -> int:   # the half queue has no topic config: queryCq reads its ConsumeQueue (once there is one)
        try:
            return admin_requests.query_consume_queue(admin, broker, "RMQ_SYS_TRANS_HALF_TOPIC", 0, 0, 1)["maxQueueIndex"]
        except BrokerError:
            return 0

    wait_until(lambda: halves() >= 1, 10, what="the half dispatched")
    before = halves()
    _ok(admin.rpc.call(broker, Command(RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": half.offset_msg_id})))

    def resumed() -> bool:   # a copy of the half after ``before``, its check count back at 0
        entries = admin_requests.query_consume_queue(admin, broker, "RMQ_SYS_TRANS_HALF_TOPIC", 0, before, 32)
        for entry in entries["queueData"]:
            raw = admin.rpc.call(broker, Command(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(entry["physicOffset"])}))
            (copy,) = decode_messages(raw.body)
            if copy.msg_id == half.msg_id and copy.properties.get("TRANSACTION_CHECK_TIMES") == "0":
                return True
        return False

    wait_until(resumed, 10, what="the half written again")
    (plain,) = fill_topic(client_config(cluster), "HalfTopic", 1, 1)
    refused = admin.rpc.call(broker, Command(RequestCode.RESUME_CHECK_HALF_MESSAGE, {"msgId": plain.offset_msg_id}))
    assert refused.code == ResponseCode.SYSTEM_ERROR and "names no half message" in refused.remark


def test_acl_verbs_without_access_control_say_there_is_no_file_to_edit(admin, broker):
    for code, fields, failed in ((RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "someone1", "secretKey": "x" * 8},
                                  209), (RequestCode.DELETE_ACL_CONFIG, {"accessKey": "someone1"}, 210),
                                 (RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.1.1.1"}, 211),
                                 (RequestCode.GET_BROKER_CLUSTER_ACL_INFO, {}, ResponseCode.SYSTEM_ERROR)):
        answer = admin.rpc.call(broker, Command(code, fields))
        assert answer.code == failed and "access control is off on this broker (aclEnable=false)" in answer.remark


def test_codes_refused_on_purpose_say_why(admin, broker):
    filters = admin.rpc.call(broker, Command(RequestCode.REGISTER_FILTER_SERVER))
    assert filters.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "filter servers" in filters.remark
    status = admin.rpc.call(broker, Command(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "T", "group": "G"}))
    assert status.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "consumerStatus" in status.remark
