"""Topic changes while clients run: queues added by updateTopic reach producers and the
group's rebalance at their next route refresh; a deleted topic loses its routes and files."""

from __future__ import annotations

import os
import threading

import pytest

from rocketbox.cluster import Admin, Message, Producer, PushConsumer
from rocketbox.cluster.errors import NoRouteError
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config


def test_added_queues_are_used_without_restarting_clients(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster, route_refresh_interval_ms=300)
    with Admin(config=cfg) as admin:
        admin.create_topic("Growing", 2)
    seen_queues: set[int] = set()
    lock = threading.Lock()

    def listener(messages):
        with lock:
            seen_queues.update(m.queue_id for m in messages)

    consumers = []
    for _ in range(2):
        consumer = PushConsumer("GrowingGroup", config=cfg)
        consumer.subscribe("Growing")
        consumer.register_listener(listener)
        consumer.start()
        consumers.append(consumer)
    try:
        with Producer("GrowingProducer", config=cfg) as producer:
            producer.send(Message("Growing", b"before"))   # the producer has the 2-queue route now
            with Admin(config=cfg) as admin:
                admin.update_topic("Growing", 6)
            stored: set[int] = set()

            def all_queues_written():
                stored.add(producer.send(Message("Growing", b"after")).queue.queue_id)
                return stored >= set(range(6))
            wait_until(all_queues_written, 30, interval_s=0.05, what="sends reaching the new queues")
        wait_until(lambda: sorted(q.queue_id for c in consumers for q in c.assigned_queues()) == list(range(6)),
                   30, what="the group owning all six queues, each once")
        wait_until(lambda: seen_queues >= set(range(6)), 30, what="messages consumed from the new queues")
    finally:
        for consumer in consumers:
            consumer.shutdown()


def test_deleted_topic_loses_its_route_and_files(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin, Producer("GoneProducer", config=cfg) as producer:
        admin.create_topic("Gone", 2)
        producer.send(Message("Gone", b"soon gone"))
        store_dir = cluster.topology.brokers[0].store.store_dir
        queue_dir = os.path.join(store_dir, "consumequeue", "Gone")
        wait_until(lambda: os.path.isdir(queue_dir) and os.listdir(queue_dir), 10, what="queue files")
        admin.delete_topic("Gone")
        assert "Gone" not in admin.topic_list()
        with pytest.raises(NoRouteError):
            admin.route("Gone")
        assert not os.path.exists(queue_dir)
