"""Delayed and timed messages, and the retry / dead-letter path, across real processes."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from rocketbox.cluster import MessageInvalid
from rocketbox.cluster import Admin, Message, Producer, PullConsumer, PushConsumer, ConsumeStatus
from rocketbox.cluster.client.message import MessageQueue
from rocketbox.cluster.protocol import dlq_topic
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config

# Short levels so the tests take seconds; the 18-level default is RocketMQ's.
LEVELS = "300ms 600ms 900ms 1200ms 1500ms 1800ms"


def _cluster(start_cluster):
    cluster = start_cluster(store_overrides={"message_delay_levels": LEVELS})
    return cluster, client_config(cluster)


def _topic(cfg, name: str, queues: int = 1) -> None:
    with Admin(config=cfg) as admin:
        admin.create_topic(name, queues)


def test_delayed_message_is_never_early_and_keeps_its_identity(start_cluster):
    cluster, cfg = _cluster(start_cluster)
    _topic(cfg, "Later")
    with Producer("DelayProducer", config=cfg) as producer, PullConsumer("DelayCheck", config=cfg) as consumer:
        sent_ms = int(time.time() * 1000)
        result = producer.send(Message("Later", b"wait for it", tags="T", keys="k1").set_delay_level(2))
        now = producer.send(Message("Later", b"right away"))
        visible = wait_until(lambda: [m for m in read_topic(consumer, "Later") if m.body == b"wait for it"], 20,
                             what="the delayed message delivered")
        assert len(visible) == 1
        delivered = visible[0]
        assert delivered.store_timestamp_ms >= sent_ms + 600   # level 2
        assert delivered.msg_id == result.msg_id and delivered.tags == "T" and delivered.keys == ["k1"]
        # As RocketMQ 4 delivers it: where it waited stays readable.
        assert delivered.properties["DELAY"] == "2" and delivered.properties["REAL_TOPIC"] == "Later"
        assert delivered.properties["REAL_QID"] == str(result.queue.queue_id)
        first = read_topic(consumer, "Later")
        assert [m.body for m in first] == [b"right away", b"wait for it"]   # the undelayed one came first
        assert now.queue_offset == 0 and result.queue_offset == -1


def test_timed_message_is_delivered_at_its_time_not_before(start_cluster):
    cluster, cfg = _cluster(start_cluster)
    _topic(cfg, "AtTime")
    with Producer("TimerProducer", config=cfg) as producer, PullConsumer("TimerCheck", config=cfg) as consumer:
        deliver_at = int(time.time() * 1000) + 2_300   # passes through the 1500 ms level, then the timer queue
        producer.send(Message("AtTime", b"on time").set_deliver_time_ms(deliver_at))
        delivered = wait_until(lambda: read_topic(consumer, "AtTime"), 20, what="the timed message")
        assert len(delivered) == 1 and delivered[0].body == b"on time"
        assert delivered[0].store_timestamp_ms >= deliver_at


def test_delayed_message_is_delivered_after_a_broker_restart(start_cluster):
    cluster, cfg = _cluster(start_cluster)
    _topic(cfg, "Survives")
    with Producer("RestartProducer", config=cfg) as producer:
        producer.send(Message("Survives", b"parked").set_delay_level(6))   # 1.8 s
    old = cluster.kill("broker-a", signal.SIGKILL)
    cluster.await_running("broker-a", not_pid=old)
    cluster.await_all_running()
    with PullConsumer("RestartCheck", config=cfg) as consumer:
        delivered = wait_until(lambda: read_topic(consumer, "Survives"), 30, what="delivery after the restart")
        assert [m.body for m in delivered] == [b"parked"]


def test_failed_consumption_returns_through_the_retry_topic(start_cluster):
    cluster, cfg = _cluster(start_cluster)
    _topic(cfg, "Work")
    attempts: dict[str, list] = {}
    lock = threading.Lock()

    def listener(messages):
        with lock:
            for m in messages:
                attempts.setdefault(m.body, []).append((m.topic, m.reconsume_times, m.msg_id))
            # Fail each message's first two deliveries.
            return (ConsumeStatus.RECONSUME_LATER if any(len(attempts[m.body]) <= 2 for m in messages)
                    else ConsumeStatus.CONSUME_SUCCESS)

    consumer = PushConsumer("WorkGroup", config=cfg, consume_batch_max=1)
    consumer.subscribe("Work")
    consumer.register_listener(listener)
    consumer.start()
    try:
        with Producer("WorkProducer", config=cfg) as producer:
            sent = producer.send(Message("Work", b"job-1"))
        wait_until(lambda: len(attempts.get(b"job-1", [])) >= 3, 30, what="three deliveries")
        deliveries = attempts[b"job-1"]
        assert [d[1] for d in deliveries[:3]] == [0, 1, 2]                 # reconsumeTimes grows
        assert all(d[0] == "Work" and d[2] == sent.msg_id for d in deliveries)   # topic and id as sent
        assert consumer.statistics()["sent_back"] == 2
    finally:
        consumer.shutdown()


def test_a_message_failing_every_time_ends_in_the_dead_letter_topic(start_cluster):
    cluster, cfg = _cluster(start_cluster)
    _topic(cfg, "Poison")
    seen = []
    consumer = PushConsumer("PoisonGroup", config=cfg, consume_batch_max=1, max_reconsume_times=2)
    consumer.subscribe("Poison")
    consumer.register_listener(lambda messages: seen.extend(messages) or ConsumeStatus.RECONSUME_LATER)
    consumer.start()
    try:
        with Producer("PoisonProducer", config=cfg) as producer:
            sent = producer.send(Message("Poison", b"never works"))
        with PullConsumer("DlqReader", config=cfg) as reader:
            dlq = dlq_topic("PoisonGroup")

            def dead_letters():
                try:
                    return reader.pull(MessageQueue(dlq, "broker-a", 0), 0, 32).messages
                except Exception:   # the topic is made on the first dead letter
                    return []
            letters = wait_until(dead_letters, 30, what="the message in the DLQ")
        assert len(seen) == 3   # the first delivery and two retries
        assert len(letters) == 1
        letter = letters[0]
        assert letter.body == b"never works" and letter.msg_id == sent.msg_id
        assert letter.properties["RETRY_TOPIC"] == "Poison" and letter.reconsume_times == 3
    finally:
        consumer.shutdown()


def test_delayed_messages_cannot_be_batched(start_cluster):
    cluster, cfg = _cluster(start_cluster)
    _topic(cfg, "NoBatch")
    with Producer("BatchDelay", config=cfg) as producer:
        with pytest.raises(MessageInvalid, match="cannot be batched"):
            producer.send_batch([Message("NoBatch", b"a"), Message("NoBatch", b"b").set_delay_level(1)])
