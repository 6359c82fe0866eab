"""RocketMQ's C++ client (PyPI rocketmq 0.4.4), unchanged, against RocketBox's remoting door.

Each test runs the real client in child processes (tests/remoting/cpp_driver.py) and checks what
arrived, through either door: one store, every door.
"""

from __future__ import annotations

import collections
import json
import signal

import pytest

from rocketbox.cluster import Admin, Message, Producer, PullConsumer, PushConsumer, ConsumeStatus
from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import pull_until, wait_until
from tests.conftest import await_group_caught_up, client_config, fill_topic
from rocketbox.cluster.wire_format import Command
from tests.remoting.cpp_client import CppClient, require_cpp_client, run_cpp, sent_ok

# Retries come back after delay level 3 + reconsumeTimes: short levels keep the test quick.
SHORT_LEVELS = "100ms 200ms 300ms 400ms 500ms 600ms 700ms 800ms 900ms 1s 1s 1s 1s 1s 1s 1s 1s 1s"


@pytest.fixture(autouse=True)
def _cpp_client():
    require_cpp_client()


def _dispatched(admin, topic: str, at_least: int) -> int:
    """The messages of ``topic``'s queues when there are ``at_least`` of them, else 0."""
    stored = sum(row["maxOffset"] for row in admin.queue_offsets(topic))
    return stored if stored >= at_least else 0


def _pull_all(cfg, topic: str, expected: int) -> list:
    with PullConsumer("CheckCG", config=cfg) as consumer:
        return pull_until(consumer, topic, expected)


def test_cpp_sends_reach_a_native_consumer_unchanged(start_cluster, tmp_path):
    """Tagged sync sends (one body over 4 KiB, which the client compresses) to a topic the broker
    creates on first use (TBW102): the native consumer gets the same body, tags, keys and id."""
    cluster = start_cluster()
    messages = [{"topic": "CppToNative", "tags": f"Tag{i % 3}", "keys": f"key{i} all",
                 "body": f"body-{i}-" + ("z" * 6000 if i == 7 else "")} for i in range(30)]
    results = run_cpp("produce", {"namesrv": cluster.remoting_namesrv, "messages": messages}, tmp_path / "p")
    assert len(sent_ok(results)) == 30, results
    received = {m.msg_id: m for m in _pull_all(client_config(cluster), "CppToNative", 30)}
    assert len(received) == 30
    for result, sent in zip(results, messages):
        got = received[result["msg_id"]]
        assert got.body.decode() == sent["body"]
        assert (got.tags, got.keys) == (sent["tags"], sent["keys"].split())
        assert got.queue_offset == result["offset"]


def test_native_sends_reach_cpp_consumers_once_each_through_a_tag_filter(start_cluster, tmp_path):
    """Two C++ push consumers of one group subscribed to TagA share TagA's messages: each exactly
    once, none of TagB. Exactly once holds for a settled group (during a rebalance RocketMQ
    promises at least once: a queue handed over mid-batch is read again from its committed
    offset), so the messages are sent once each member reports (consumerStatus) its own half of
    the queues. The group is new: it starts at offset 0 of each queue (the new-group rule)."""
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("NativeToCpp", 4)
    spec = {"namesrv": cluster.remoting_namesrv, "group": "CID_CPP", "topic": "NativeToCpp",
            "expression": "TagA", "timeout_s": 60, "quiet_s": 3}
    members = [CppClient("consume", {**spec, "instance": f"m{n}"}, tmp_path / f"c{n}") for n in range(2)]
    for member in members:
        member.wait_for(lambda ls: any("started" in line for line in ls), 30, "start")
    with Admin(config=client_config(cluster, transport="remoting")) as remoting_admin:
        wait_until(lambda: _queue_split_settled(remoting_admin, "CID_CPP", "NativeToCpp", 4), 30, interval_s=0.2,
                   what="the two members hold two queues each")
    with Producer("PG", config=cfg) as producer:
        sent = {producer.send(Message("NativeToCpp", f"m{i}".encode(), tags="TagA" if i % 2 else "TagB")).msg_id: i
                for i in range(80)}
    tag_a = {msg_id for msg_id, i in sent.items() if i % 2}
    lines = []
    wait_until(lambda: sum(len(m.snapshot()) for m in members) >= len(tag_a) + 2, 60, interval_s=0.1,
               what="every TagA message delivered")
    for member in members:
        lines += member.finish(90)
    ids = [line["id"] for line in lines]
    assert sorted(ids) == sorted(tag_a), collections.Counter(ids).most_common(3)
    assert all(line["tags"] == "TagA" for line in lines)


def _queue_split_settled(admin, group: str, topic: str, queue_count: int) -> bool:
    """Whether the group's online members hold disjoint queues of ``topic`` that cover all of them,
    as each member reports it (GET_CONSUMER_RUNNING_INFO)."""
    try:
        connection = admin.consumer_connection(group)
        endpoint = next(iter(admin.master_endpoints().values()))
        held = [[mq.queue_id for mq in admin.consumer_running_info(endpoint, group, c["clientId"])["mqTable"]
                 if mq.topic == topic] for c in connection["connectionSet"]]
    except BrokerError:
        return False
    flat = [queue for queues in held for queue in queues]
    return len(held) == 2 and sorted(flat) == list(range(queue_count))


def test_cpp_orderly_sends_and_orderly_consumer_keep_each_key_in_order(start_cluster, tmp_path):
    """Sends through the client's hashing selector (key % queues) and an orderly push consumer
    (queue locks, LOCK_BATCH_MQ): each key's messages arrive once each and in the order sent."""
    cluster = start_cluster()
    with Admin(config=client_config(cluster)) as admin:
        admin.create_topic("CppOrdered", 4)
    messages = [{"topic": "CppOrdered", "tags": "o", "body": f"{i % 5}:{i // 5}", "order_key": i % 5}
                for i in range(100)]
    results = run_cpp("produce", {"namesrv": cluster.remoting_namesrv, "messages": messages}, tmp_path / "p")
    assert len(sent_ok(results)) == 100, results
    lines = run_cpp("consume", {"namesrv": cluster.remoting_namesrv, "group": "CID_ORDERLY", "topic": "CppOrdered",
                                "orderly": True, "expect": 100, "timeout_s": 60}, tmp_path / "c", timeout_s=120)
    bodies = [line["body"] for line in lines]
    assert sorted(bodies) == sorted(m["body"] for m in messages)
    for key in range(5):
        sequence = [int(b.split(":")[1]) for b in bodies if b.startswith(f"{key}:")]
        assert sequence == list(range(20)), (key, sequence)
    queues = {line["queue_id"] for line in lines if line["body"].startswith("3:")}
    assert len(queues) == 1


def test_a_failed_cpp_delivery_comes_back_through_the_retry_topic(start_cluster, tmp_path):
    """The C++ listener fails every first delivery: the client sends the message back
    (CONSUMER_SEND_MSG_BACK to the STOREHOST in the record, i.e. this remoting door), and each
    returns through %RETRY%<group> with reconsumeTimes 1, under its original topic (RETRY_TOPIC)."""
    cluster = start_cluster(store_overrides={"message_delay_levels": SHORT_LEVELS})
    fill_topic(client_config(cluster), "CppRetry", 2, 6, tags="t", body_prefix="r")
    lines = run_cpp("consume", {"namesrv": cluster.remoting_namesrv, "group": "CID_RETRY", "topic": "CppRetry",
                                "fail_reconsume_times_below": 1, "expect": 6, "timeout_s": 90, "quiet_s": 2},
                    tmp_path / "c", timeout_s=150)
    assert all(line["reconsume_times"] == 0 for line in lines if line["failed"])
    again = [line for line in lines if not line["failed"]]
    assert sorted(line["body"] for line in again) == sorted(f"r{i}" for i in range(6))
    assert all(line["reconsume_times"] == 1 and line["topic"] == "CppRetry" for line in again)


def test_every_acknowledged_cpp_send_survives_a_broker_sigkill_in_sync_flush(start_cluster, tmp_path):
    """SYNC_FLUSH: the broker answers SEND_OK only once the record is msynced. The broker main
    is SIGKILLed while the C++ producer sends; after the supervisor restarts it, every message
    acknowledged SEND_OK is read back (failed sends may or may not be there)."""
    cluster = start_cluster(flush_mode=SYNC_FLUSH)
    with Admin(config=client_config(cluster)) as admin:
        admin.create_topic("CppDurable", 4)
    messages = [{"topic": "CppDurable", "tags": "d", "body": f"d{i}"} for i in range(600)]
    producer = CppClient("produce", {"namesrv": cluster.remoting_namesrv, "messages": messages,
                                     "timeout_ms": 3000}, tmp_path / "p")
    producer.wait_for(lambda ls: len(ls) >= 150, 60, "150 sends answered")
    pid = cluster.kill("broker-a", signal.SIGKILL)
    cluster.await_running("broker-a", not_pid=pid)
    results = producer.finish(600)
    acked = {r["msg_id"] for r in sent_ok(results)}
    assert len(acked) >= 150
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        # The restarted reput may still be dispatching what the CommitLog holds: every acknowledged
        # message must reach the queues (failed sends may add more), then they are read back.
        stored = wait_until(lambda: _dispatched(admin, "CppDurable", len(acked)), 60, interval_s=0.2,
                            what="every acknowledged message dispatched")
    received = {m.msg_id for m in _pull_all(cfg, "CppDurable", stored)}
    assert acked <= received, f"{len(acked - received)} acknowledged messages lost"


def test_one_group_two_doors(start_cluster, tmp_path):
    """A native PushConsumer and a C++ push consumer in one group split the queues between them
    (one member list, whichever door each heartbeats through) and together get every message once."""
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("TwoDoors", 4)
    native_got = []

    def listener(msgs):
        native_got.extend(m.msg_id for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS
    with PushConsumer("CID_MIXED", config=cfg) as native:
        native.subscribe("TwoDoors", "*")
        native.register_listener(listener)
        native.start()
        cpp = CppClient("consume", {"namesrv": cluster.remoting_namesrv, "group": "CID_MIXED", "topic": "TwoDoors",
                                    "timeout_s": 60, "quiet_s": 4, "expect": 1}, tmp_path / "c")
        cpp.wait_for(lambda ls: any("started" in line for line in ls), 30, "start")
        with Admin(config=cfg) as admin:
            wait_until(lambda: len(admin.consumer_ids("TwoDoors", "CID_MIXED")) == 2, 30, what="two members")
        # Sent once each member reports its own half of the queues: sent while the native member still
        # held all four, some were read by both (a fresh-clone run saw 8 twice).
        with Admin(config=client_config(cluster, transport="remoting")) as remoting_admin:
            wait_until(lambda: _queue_split_settled(remoting_admin, "CID_MIXED", "TwoDoors", 4), 30,
                       interval_s=0.2, what="the two members hold two queues each")
        # mqadmin consumerConnection's request, through the remoting door: both members, each
        # with the language its client declared.
        rpc = RemotingRpcClient()
        try:
            answer = rpc.call(f"tcp://{cluster.topology.brokers[0].remoting_address}",
                              Command(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CID_MIXED"}))
            missing = rpc.call(f"tcp://{cluster.topology.brokers[0].remoting_address}",
                               Command(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "NoSuchGroup"}))
        finally:
            rpc.close()
        connection = json.loads(answer.body)
        assert sorted(c["language"] for c in connection["connectionSet"]) == ["CPP", "PYTHON"]
        assert connection["messageModel"] == "CLUSTERING" and "TwoDoors" in connection["subscriptionTable"]
        assert missing.code == ResponseCode.CONSUMER_NOT_ONLINE and "not online" in missing.remark
        # mqadmin consumerStatus: the broker relays the request to each member over its own
        # connection and door, and each answers ConsumerRunningInfo for itself (the C++ client
        # writes its mqTable keyed by MessageQueue objects, as fastjson does).
        with Admin(config=client_config(cluster, transport="remoting")) as remoting_admin:
            endpoint = f"tcp://{cluster.topology.brokers[0].remoting_address}"
            for member in connection["connectionSet"]:
                info = remoting_admin.consumer_running_info(endpoint, "CID_MIXED", member["clientId"])
                assert info["properties"]["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY", member
                assert "TwoDoors" in {sub["topic"] for sub in info["subscriptionSet"]}, member
                assert {mq.topic for mq in info["mqTable"]} <= {"TwoDoors", "%RETRY%CID_MIXED"}, member
            with pytest.raises(BrokerError, match="not online"):
                remoting_admin.consumer_running_info(endpoint, "CID_MIXED", "127.0.0.1@1@gone@1")
        with Producer("PG", config=cfg) as producer:
            sent = {producer.send(Message("TwoDoors", f"x{i}".encode())).msg_id for i in range(100)}
        wait_until(lambda: len(native_got) + len(cpp.snapshot()) - 1 >= 100, 60, interval_s=0.1,
                   what="every message delivered")
        cpp_got = [line["id"] for line in cpp.finish(90)]
        await_group_caught_up(cfg, "TwoDoors", "CID_MIXED")
    assert sorted(native_got + cpp_got) == sorted(sent)
    assert native_got and cpp_got, (len(native_got), len(cpp_got))
