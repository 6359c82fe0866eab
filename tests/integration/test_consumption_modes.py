"""Consumption modes: broadcasting with local offsets, allocation strategies settling
as members come and go, flow control in push consumers, resetOffsetByTime on a running group."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime

import pytest

from rocketbox.cluster import Admin, Message, MessageQueue, Producer, PushConsumer
from rocketbox.cluster.client.consumer import BROADCASTING
from rocketbox.cluster.client.orderly import ConsumeOrderlyStatus
from rocketbox.cluster.client.selectors import hash_selector
from rocketbox.cluster.errors import NoRouteError
from rocketbox.cluster.protocol import retry_topic
from rocketbox.cluster.testing import LocalCluster, wait_until
from tests.conftest import client_config
from tests.integration.test_consumer_group import _settled


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two brokers, so every topic has queues on two masters."""
    running = LocalCluster(str(tmp_path_factory.mktemp("modes")), brokers=2).start()
    yield running
    running.stop()


def _send(cfg, topic: str, bodies) -> None:
    with Producer("PG_MODES", config=cfg) as producer:
        bodies = list(bodies)
        for start in range(0, len(bodies), 50):
            producer.send_batch([Message(topic, b) for b in bodies[start:start + 50]])


class Recorder:
    """A listener that counts deliveries per body."""

    def __init__(self, delay_s: float = 0.0, during=None):
        self.received = collections.Counter()
        self.lock = threading.Lock()
        self.delay_s = delay_s
        self.during = during

    def __call__(self, messages):
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.during is not None:
            self.during()
        with self.lock:
            for m in messages:
                self.received[m.body] += 1

    def count(self, prefix: bytes = b"") -> int:
        with self.lock:
            return sum(1 for body in self.received if body.startswith(prefix))


def _consumer(cfg, group: str, topic: str, listener, **kwargs) -> PushConsumer:
    consumer = PushConsumer(group, config=cfg, **kwargs)
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    consumer.start()
    return consumer


# ------------------------------------------------------------------ broadcasting

def test_broadcasting_members_each_get_every_message_and_resume_from_local_offsets(cluster, tmp_path):
    topic, group = "Broadcast", "BG"
    base = client_config(cluster, local_offset_store_dir=str(tmp_path / "offsets"))
    with Admin(config=base) as admin:
        admin.create_topic(topic, 3)  # three queues on each of two brokers
    cfg_a = dataclasses.replace(base, instance_name="memberA")
    cfg_b = dataclasses.replace(base, instance_name="memberB")
    a, b = Recorder(), Recorder()
    first = _consumer(cfg_a, group, topic, a, message_model=BROADCASTING)
    second = _consumer(cfg_b, group, topic, b, message_model=BROADCASTING)
    try:
        assert len(first.assigned_queues()) == len(second.assigned_queues()) == 6
        assert retry_topic(group) not in first.subscriptions  # RocketMQ subscribes no retry topic
        _send(base, topic, [f"one-{i}".encode() for i in range(300)])
        wait_until(lambda: a.count(b"one-") == 300 and b.count(b"one-") == 300, 30,
                   what="both members consuming all 300 messages")
        assert set(a.received.values()) == set(b.received.values()) == {1}

        second.shutdown()  # its offsets go to its local file
        path = second.local_offsets.path
        assert path.startswith(str(tmp_path / "offsets")) and path.endswith(os.path.join(group, "offsets.json"))
        assert os.path.exists(path)
        _send(base, topic, [f"two-{i}".encode() for i in range(120)])
        wait_until(lambda: a.count(b"two-") == 120, 30, what="the remaining member consuming the second round")

        b_again = Recorder()
        second = _consumer(cfg_b, group, topic, b_again, message_model=BROADCASTING)
        wait_until(lambda: b_again.count(b"two-") == 120, 30,
                   what="the restarted member reading what it missed, from its local offsets")
        # Its local offsets at every queue's end: all it will ever read of what is stored has arrived.
        with Admin(config=base) as admin:
            ends = {MessageQueue(topic, r["broker"], r["queueId"]): r["maxOffset"] for r in admin.queue_offsets(topic)}
        wait_until(lambda: all(second.local_offsets.read(mq) == end for mq, end in ends.items()), 30,
                   what="the restarted member's local offsets at the end of every queue")
        assert b_again.count(b"one-") == 0, "the restarted member read again what it had consumed"
        assert set(b_again.received.values()) == {1}

        # A reset reaches every member of a broadcasting group; each moves its own offsets.
        with Admin(config=base) as admin:
            assert sum(admin.reset_offset_by_time(topic, group, 0).values()) == 0
        wait_until(lambda: set(a.received.values()) == {2} and b_again.count(b"one-") == 300
                   and all(b_again.received[f"two-{i}".encode()] == 2 for i in range(120)), 30,
                   what="both members reading the topic again from the start")
    finally:
        first.shutdown()
        second.shutdown()
    with Admin(config=base) as admin:
        with pytest.raises(NoRouteError):
            admin.route(retry_topic(group))  # the broker made none: the heartbeat said BROADCASTING
        # A broadcasting group's offsets stay on its members: the broker has none.
        assert all(row["consumerOffset"] is None or row["consumerOffset"] == 0
                   for row in admin.queue_offsets(topic, group))


# ------------------------------------------------------------------ allocation strategies

@pytest.mark.parametrize("strategy", ["AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"])
def test_group_settles_as_members_join_one_at_a_time_and_one_leaves(cluster, strategy):
    topic, group = f"Settle{strategy.replace('_', '')}", f"SG_{strategy}"
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, 3)  # 6 queues in all, as test_consumer_group's helper expects

    def exactly_once(members) -> bool:
        owned = [q for c in members for q in c.assigned_queues()]
        return len(owned) == 6 and len(set(owned)) == 6

    settled = _settled if strategy != "CONSISTENT_HASH" else exactly_once  # a hash ring may leave one empty
    members: list[PushConsumer] = []
    try:
        for _ in range(3):
            members.append(_consumer(cfg, group, topic, lambda messages: None, allocate=strategy))
            wait_until(lambda: settled(members) and all(c._members.get(topic) and len(c._members[topic]) == len(members)
                                                         for c in members), 10,
                       what=f"{len(members)} members settled with {strategy}")
        leaving = members.pop(1)
        leaving.shutdown()
        wait_until(lambda: settled(members) and all(len(c._members.get(topic, ())) == 2 for c in members), 10,
                   what=f"two members settled with {strategy} after one left")
        # Settled means stable: no queue changes hands, none is read twice, over a few rebalance periods.
        snapshot = [c.assigned_queues() for c in members]
        for _ in range(10):
            time.sleep(0.1)
            assert [c.assigned_queues() for c in members] == snapshot
    finally:
        for c in members:
            c.shutdown()


# ------------------------------------------------------------------ flow control

@pytest.mark.parametrize("cap", ["messages", "bytes"])
def test_flow_control_pauses_pulls_and_everything_is_still_consumed(cluster, cap):
    topic, group = f"Flow{cap}", f"FG_{cap}"
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, 1)
    body = b"x" * 1000
    _send(cfg, topic, [b"%05d-" % i + body for i in range(800)])  # before the group exists: read from 0
    caps = {"cached_messages_max": 40} if cap == "messages" else {"cached_bytes_max": 8 * 1024}
    peak = {"cached": 0, "cached_bytes": 0}
    consumer = None

    def measure():  # the fullest queue's cache (the caps are per queue; the topic has one on each broker)
        for pq in list(consumer._queues.values()) if consumer is not None else []:
            peak["cached"] = max(peak["cached"], pq.cached_count)
            peak["cached_bytes"] = max(peak["cached_bytes"], pq.cached_bytes)

    recorder = Recorder(delay_s=0.005, during=measure)
    consumer = _consumer(cfg, group, topic, recorder, consume_batch_max=4, consume_threads=2, **caps)
    try:
        wait_until(lambda: recorder.count() == 800, 60, what="all 800 messages consumed under flow control")
        stats = consumer.statistics()
        assert stats["flow_control_pauses"] > 0, stats
        one_pull = cfg.pull_batch_count
        if cap == "messages":
            assert peak["cached"] <= 40 + one_pull, peak
        else:
            assert peak["cached_bytes"] <= 8 * 1024 + one_pull * len(body) + 6 * one_pull, peak
        wait_until(lambda: consumer.statistics()["cached"] == 0, 10, what="the cache drained")
    finally:
        consumer.shutdown()


def test_flow_control_caps_default_to_rocketmqs_thresholds(cluster):
    consumer = PushConsumer("FG_DEFAULTS", config=client_config(cluster))
    try:
        assert consumer.cached_messages_max == 1000
        assert consumer.cached_bytes_max == 100 * 1024 * 1024
    finally:
        consumer.shutdown()


# ------------------------------------------------------------------ resetOffsetByTime

def test_reset_offset_by_time_makes_a_running_group_read_again(cluster):
    topic, group = "ResetTopic", "RG"
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, 2)
    recorder = Recorder()
    consumer = _consumer(cfg, group, topic, recorder)
    try:
        _send(cfg, topic, [f"old-{i}".encode() for i in range(100)])
        wait_until(lambda: recorder.count(b"old-") == 100, 30, what="the first round consumed")
        time.sleep(0.05)
        mark_ms = int(time.time() * 1000)
        time.sleep(0.05)
        _send(cfg, topic, [f"new-{i}".encode() for i in range(60)])
        wait_until(lambda: recorder.count(b"new-") == 60, 30, what="the second round consumed")
        assert set(recorder.received.values()) == {1}

        with Admin(config=cfg) as admin:
            offsets = admin.reset_offset_by_time(topic, group, mark_ms)
            assert len(offsets) == 4 and {mq.broker_name for mq in offsets} == {"broker-a", "broker-b"}
            assert sum(offsets.values()) == 100, offsets  # each queue back to its first message after the mark
        wait_until(lambda: all(n == 2 for body, n in recorder.received.items() if body.startswith(b"new-")), 30,
                   what="every message after the mark consumed again")
        assert all(n == 1 for body, n in recorder.received.items() if body.startswith(b"old-"))
        # One notice per broker; the second may land after the re-reads the first one caused.
        wait_until(lambda: consumer.statistics()["offset_resets"] == 2, 10, what="both brokers' reset notices")
        with Admin(config=cfg) as admin:
            wait_until(lambda: sum(r["consumerOffset"] for r in admin.queue_offsets(topic, group)) == 160, 10,
                       what="the group's committed offsets back at the end")

        # The same through the CLI, with an ISO 8601 time.
        iso = datetime.fromtimestamp(mark_ms / 1000).astimezone().isoformat(timespec="milliseconds")
        proc = subprocess.run([sys.executable, "-m", "rocketbox.cluster.cli", "--namesrv", cluster.namesrv, "group",
                               "reset-offset", group, topic, "--to-time", iso, "--json"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        rows = [json.loads(line) for line in proc.stdout.splitlines()]   # JSON Lines
        assert len(rows) == 4 and sum(r["offset"] for r in rows) == 100
        wait_until(lambda: all(n == 3 for body, n in recorder.received.items() if body.startswith(b"new-")), 30,
                   what="every message after the mark consumed a third time")
    finally:
        consumer.shutdown()
    # With no member online the admin sets the committed offsets itself.
    with Admin(config=cfg) as admin:
        offsets = admin.reset_offset_by_time(topic, group, 0)
        assert sum(offsets.values()) == 0
        assert sum(r["consumerOffset"] for r in admin.queue_offsets(topic, group)) == 0


def test_reset_offset_of_an_orderly_consumer_replays_each_queue_in_order(cluster):
    topic, group = "ResetOrderly", "ROG"
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, 1)
    with Producer("PG_MODES", config=cfg) as producer:
        for seq in range(200):
            producer.send(Message(topic, b"%d" % seq), selector=hash_selector, arg="one-key")
    deliveries: list[int] = []

    def listener(messages, context):
        time.sleep(0.01)
        deliveries.extend(int(m.body) for m in messages)
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer(group, config=cfg, consume_batch_max=4)
    consumer.subscribe(topic)
    consumer.register_message_listener_orderly(listener)
    consumer.start()
    try:
        wait_until(lambda: len(deliveries) >= 60, 30, what="the orderly consumer part-way through")
        with Admin(config=cfg) as admin:
            admin.reset_offset_by_time(topic, group, 0)  # mid-stream: a batch may be running
        wait_until(lambda: deliveries.count(199) >= 1 and len(deliveries) >= 260, 30, what="the replay finished")
        restart = len(deliveries) - 1 - deliveries[::-1].index(0)
        assert deliveries[:restart] == list(range(restart)), "first pass out of order"
        assert deliveries[restart:] == list(range(200)), "the replay after the reset is not the queue in order"
    finally:
        consumer.shutdown()
