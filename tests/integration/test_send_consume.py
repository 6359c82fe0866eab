"""Send N, consume N through every send path: identical bodies, keys and tags."""

from __future__ import annotations

import os

from rocketbox.cluster import Admin, Message, NoRouteError, Producer, PullConsumer, PullStatus, SendStatus
from rocketbox.cluster.testing import pull_until, wait_until
from tests.conftest import client_config


def _drain(consumer: PullConsumer, topic: str, expected: int, timeout_s: float = 30.0):
    return pull_until(consumer, topic, expected, timeout_s)


def test_every_send_path_delivers_identical_messages(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("SendConsume", 4)
    sent = {}
    with Producer("PG", config=cfg) as producer:
        for i in range(200):
            msg = Message("SendConsume", os.urandom(50) + f"sync-{i}".encode(), tags=f"T{i % 3}", keys=[f"k{i}", "all"])
            result = producer.send(msg)
            assert result.status == SendStatus.SEND_OK
            sent[result.msg_id] = msg
        big = Message("SendConsume", os.urandom(1000) * 10, tags="big", keys="big")  # > 4 KiB: compressed
        sent[producer.send(big).msg_id] = big
        futures = []
        for i in range(100):
            msg = Message("SendConsume", f"async-{i}".encode(), tags="async")
            futures.append((producer.send_async(msg), msg))
        for future, msg in futures:
            sent[future.result(10).msg_id] = msg
        batch = [Message("SendConsume", f"batch-{i}".encode(), tags="batch", keys=f"b{i}") for i in range(300)]
        result = producer.send_batch(batch)
        assert result.status == SendStatus.SEND_OK
        for msg in batch:
            sent[msg.properties["UNIQ_KEY"]] = msg
        oneway = Message("SendConsume", b"oneway", tags="oneway")
        producer.send_oneway(oneway)
        sent[oneway.properties["UNIQ_KEY"]] = oneway
    with PullConsumer("CG", config=cfg) as consumer:
        got = _drain(consumer, "SendConsume", len(sent))
    by_id = {m.msg_id: m for m in got}
    assert len(got) == len(sent) == len(by_id)
    for msg_id, msg in sent.items():
        received = by_id[msg_id]
        assert received.body == msg.body
        assert received.tags == msg.tags
        expected_keys = msg.keys_text().split(" ") if msg.keys else []
        assert received.keys == expected_keys
    # Per queue, offsets are dense and increasing.
    per_queue = {}
    for m in got:
        per_queue.setdefault(m.queue_id, []).append(m.queue_offset)
    for offsets in per_queue.values():
        assert offsets == list(range(len(offsets)))


def test_pull_filters_by_tag_and_reports_offsets(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Tags", 1)
    with Producer("PG", config=cfg) as producer:
        for i in range(30):
            producer.send(Message("Tags", f"m{i}".encode(), tags="A" if i % 2 else "B"))
    with PullConsumer("CG", config=cfg) as consumer:
        mq = consumer.queues("Tags")[0]
        wait_until(lambda: consumer.max_offset(mq) == 30, 10, what="dispatch of 30 messages")
        result = consumer.pull(mq, 0, 64, "A")
        assert result.status == PullStatus.FOUND
        assert [m.body for m in result.messages] == [f"m{i}".encode() for i in range(1, 30, 2)]
        assert result.next_begin_offset == 30
        assert consumer.min_offset(mq) == 0
        caught_up = consumer.pull(mq, 30, 32)
        assert caught_up.status == PullStatus.NO_NEW_MSG
        moved = consumer.pull(mq, 1000, 32)
        assert moved.status == PullStatus.OFFSET_ILLEGAL and moved.next_begin_offset == 30
        consumer.commit_offset(mq, 12)
        assert consumer.committed_offset(mq) == 12


def test_long_poll_answers_as_soon_as_a_message_is_dispatched(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("LongPoll", 1)
    with PullConsumer("CG", config=cfg) as consumer, Producer("PG", config=cfg) as producer:
        mq = consumer.queues("LongPoll")[0]
        future_result = {}
        import threading
        t = threading.Thread(target=lambda: future_result.setdefault(
            "r", consumer.pull(mq, 0, 32, suspend_ms=20_000)))
        t.start()
        wait_until(lambda: Admin(config=cfg).broker_runtime_info(
            f"tcp://{cluster.topology.brokers[0].address}")["parkedPulls"] == 1, 10, what="pull parked")
        producer.send(Message("LongPoll", b"wake up"))
        t.join(10)
        assert not t.is_alive(), "the parked pull was not answered on dispatch"
        assert [m.body for m in future_result["r"].messages] == [b"wake up"]


def _route_or_none(admin: Admin, topic: str) -> dict | None:
    try:
        return admin.route(topic)
    except NoRouteError:
        return None


def test_auto_created_topic_and_query_by_id_and_key(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Producer("PG", config=cfg) as producer:
        result = producer.send(Message("AutoCreated", b"find me", keys="order-42"))
    with Admin(config=cfg) as admin:
        # The broker registers a topic it made with the NameServer without awaiting the answer before it
        # answers the send (RocketMQ's registerBrokerAll(oneway) too): the route shows up soon after.
        route = wait_until(lambda: _route_or_none(admin, "AutoCreated"), 10, what="auto-created topic's route")
        assert route["queueDatas"][0]["writeQueueNums"] == 4
        viewed = admin.view_message(result.offset_msg_id)
        assert viewed.body == b"find me" and viewed.msg_id == result.msg_id
        found = wait_until(lambda: admin.query_by_key("AutoCreated", "order-42"), 10, what="index lookup")
        assert [m.body for m in found] == [b"find me"]
        by_uniq = admin.query_by_key("AutoCreated", result.msg_id)
        assert [m.msg_id for m in by_uniq] == [result.msg_id]
        assert admin.query_by_key("AutoCreated", "no-such-key") == []


def test_records_carry_the_senders_address_as_born_host(start_cluster):
    """Sent from 127.0.0.2 (loopback, chosen as the source address), stored as 127.0.0.2."""
    from rocketbox.cluster.protocol import RequestCode, ResponseCode
    from rocketbox.cluster.message.ids import unpack_host
    from rocketbox.cluster.wire_format import Command
    from rocketbox.cluster.zmq_transport import RpcClient
    cluster = start_cluster()
    cfg = client_config(cluster)
    broker = cluster.topology.brokers[0].address
    rpc = RpcClient()
    try:
        answer = rpc.call(f"tcp://127.0.0.2:0;{broker}", Command(RequestCode.SEND_MESSAGE_V2, {
            "a": "PG", "b": "Born", "e": "0", "i": "UNIQ_KEY\x01B1\x02"}, b"where from"))
    finally:
        rpc.close()
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    with Admin(config=cfg) as admin:
        record = admin.view_message(answer.fields["msgId"])._record()
    assert unpack_host(record.born_host) == ("127.0.0.2", 0)


def test_one_send_engine_counts_sync_async_and_oneway_and_refuses_a_topic_without_route(start_cluster):
    """Sync, async and oneway sends go through one attempt-and-retry engine: each is counted in
    the producer's statistics (async sends were not), and a oneway send to a topic no broker
    serves fails with NoRouteError (it used to hand the transport an endpoint of None)."""
    from rocketbox.cluster.errors import NoRouteError

    cluster = start_cluster(broker_overrides={"auto_create_topic_enabled": False})
    cfg = client_config(cluster, send_retry_count=0)
    with Admin(config=cfg) as admin:
        admin.create_topic("Counted", 2)
    with Producer("CountingPG", config=cfg) as producer:
        assert producer.send(Message("Counted", b"sync")).status == SendStatus.SEND_OK
        assert producer.send_async(Message("Counted", b"async")).result(30).status == SendStatus.SEND_OK
        producer.send_oneway(Message("Counted", b"oneway"))
        assert producer.statistics() == {"sent_ok": 2, "sent_oneway": 1, "send_failures": 0, "busy_answers": 0}
        with PullConsumer("CountingCG", config=cfg) as consumer:
            assert sorted(m.body for m in _drain(consumer, "Counted", 3)) == [b"async", b"oneway", b"sync"]

        try:
            producer.send_oneway(Message("NoSuchTopic", b"lost"))
        except NoRouteError as exc:
            assert "NoSuchTopic" in str(exc)
        else:
            raise AssertionError("a oneway send to a topic without a route must fail")
        assert isinstance(producer.send_async(Message("NoSuchTopic", b"lost")).exception(30), NoRouteError)
        assert producer.statistics() == {"sent_ok": 2, "sent_oneway": 1, "send_failures": 2, "busy_answers": 0}
