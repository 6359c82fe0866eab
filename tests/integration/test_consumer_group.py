"""A consumer group of three: every message once in steady state; rebalance when one leaves."""

from __future__ import annotations

import collections
import threading

from rocketbox.cluster import Admin, Message, Producer, PushConsumer
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config

TOPIC = "GroupTopic"
QUEUES = 6


def _settled(consumers) -> bool:
    """Every queue owned by exactly one member, and every member sees the same member count."""
    owned = [q for c in consumers for q in c.assigned_queues()]
    return len(owned) == QUEUES and len(set(owned)) == QUEUES and all(c.assigned_queues() for c in consumers)


def send_round(cfg, prefix: str, count: int) -> None:
    """``count`` messages with bodies ``<prefix>-<n>``, in batches of 50."""
    with Producer("PG", config=cfg) as producer:
        for start in range(0, count, 50):
            producer.send_batch([Message(TOPIC, f"{prefix}-{i}".encode()) for i in range(start, start + 50)])


def test_group_of_three_gets_each_message_once_then_rebalances(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, QUEUES)
    received = collections.Counter()
    lock = threading.Lock()

    def listener(messages):
        with lock:
            for m in messages:
                received[m.body] += 1

    consumers = []
    for _ in range(3):
        consumer = PushConsumer("G3", config=cfg)
        consumer.subscribe(TOPIC)
        consumer.register_listener(listener)
        consumer.start()
        consumers.append(consumer)
    try:
        wait_until(lambda: _settled(consumers) and all(len(c.assigned_queues()) == 2 for c in consumers), 20,
                   what="three members with two queues each")
        send_round(cfg, "first", 600)
        wait_until(lambda: len(received) == 600, 30, what="600 distinct messages consumed")
        assert set(received.values()) == {1}, "a message was delivered twice in steady state"

        leaving = consumers.pop()
        leaving.shutdown()
        wait_until(lambda: _settled(consumers) and all(len(c.assigned_queues()) == 3 for c in consumers), 20,
                   what="two members with three queues each")
        send_round(cfg, "second", 300)
        wait_until(lambda: len(received) == 900, 30, what="every message of the second round consumed")
        second = {body: n for body, n in received.items() if body.startswith(b"second-")}
        assert len(second) == 300
    finally:
        for consumer in consumers:
            consumer.shutdown()
