"""Overload from the consuming side: a consumer far behind, a push consumer that
never finishes, a pop consumer that never acks. In each, what the consumer holds stays bounded,
and the broker keeps serving producers and other groups.

The backlog here is 1,000,000 messages (``OVERLOAD_BACKLOG`` sets it; 10,000,000 is the issue's
figure and the same mechanism, batches of 1,000, at ten times the time and disk).
"""

from __future__ import annotations

import os
import threading
import time

import psutil
import pytest

from rocketbox.cluster import Admin, Message, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.client.message import MessageQueue, SendStatus
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(600)

BACKLOG = int(os.environ.get("OVERLOAD_BACKLOG", "1000000"))
BATCH = 1000


def _fill(cfg, topic: str, count: int, body: bytes = b"b" * 100) -> None:
    """``count`` messages in batches of BATCH, spread over the topic's queues."""
    with Producer("OverloadFillPG", config=cfg) as producer:
        queues = [MessageQueue(topic, "broker-a", q) for q in range(4)]
        for i, start in enumerate(range(0, count, BATCH)):
            n = min(BATCH, count - start)
            producer.send_batch([Message(topic, body) for _ in range(n)], queue=queues[i % len(queues)])


def _stored(cfg, topic: str) -> int:
    with PullConsumer("OverloadCounter", config=cfg) as reader:
        return sum(reader.max_offset(MessageQueue(topic, "broker-a", q)) for q in range(4))


def _sends_all_ok(cfg, topic: str, count: int) -> list:
    """``count`` sync sends while the consumers work; the statuses."""
    with Producer("OverloadServedPG", config=cfg) as producer:
        return [producer.send(Message(topic, b"while-consuming")).status for _ in range(count)]


def test_a_consumer_a_million_behind_pulls_bounded_batches_and_producers_are_still_served(start_cluster):
    cluster = start_cluster(store_overrides={"commitlog_file_size_bytes": 256 << 20})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Behind", 4)
        admin.create_topic("Served", 4)
    _fill(cfg, "Behind", BACKLOG)
    wait_until(lambda: _stored(cfg, "Behind") == BACKLOG, 120, what="the backlog dispatched")

    # One pull asking for 100,000 messages gets at most the broker's batch bounds.
    endpoint = cluster.topology.brokers[0].endpoint
    rpc = RpcClient()
    try:
        answer = rpc.call(endpoint, broker_api.pull_request("BehindGroup", MessageQueue("Behind", "broker-a", 0), 0,
                                                            100_000, "*", 0), 10_000)
    finally:
        rpc.close()
    assert answer.code == ResponseCode.SUCCESS
    assert len(list(fmt.iter_records(answer.body))) <= cluster.topology.brokers[0].pull_batch_count_max
    assert len(answer.body) <= cluster.topology.brokers[0].pull_batch_bytes_max

    # A push consumer catching up holds at most its flow-control caps, while producers are served.
    consumed = [0]
    threshold = 1000
    consumer = PushConsumer("BehindGroup", config=cfg, cached_messages_max=threshold)
    consumer.subscribe("Behind")

    def listener(messages):
        consumed[0] += len(messages)
        time.sleep(0.01)   # slower than the pulls: the cache fills up to its cap
    consumer.register_listener(listener)
    peak_cached = [0]
    me = psutil.Process()
    rss_before = me.memory_info().rss
    peak_rss = [rss_before]
    stop = threading.Event()

    def watch():
        while not stop.wait(0.05):
            with consumer._queues_lock:
                queues = list(consumer._queues.values())
            peak_cached[0] = max([peak_cached[0]] + [pq.cached_count for pq in queues])
            peak_rss[0] = max(peak_rss[0], me.memory_info().rss)
    watcher = threading.Thread(target=watch, daemon=True)
    consumer.start()
    watcher.start()
    try:
        wait_until(lambda: consumed[0] >= 20_000, 120, what="the consumer under way")
        statuses = _sends_all_ok(cfg, "Served", 500)
        assert statuses == [SendStatus.SEND_OK] * 500
        wait_until(lambda: consumed[0] >= 50_000, 180, what="the consumer catching up")
    finally:
        stop.set()
        consumer.shutdown()
        watcher.join(5)
    stats = consumer.statistics()
    assert stats["flow_control_pauses"] > 0
    # The cap, plus the one pull that was in flight when it was reached.
    assert peak_cached[0] <= threshold + cfg.pull_batch_count, peak_cached[0]
    assert peak_rss[0] - rss_before < 200 << 20, (rss_before, peak_rss[0])


def test_a_push_consumer_that_never_finishes_holds_its_cap_and_others_are_served(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Stuck", 4)
    _fill(cfg, "Stuck", 20_000)
    release = threading.Event()
    stuck = PushConsumer("StuckGroup", config=cfg, consume_threads=2, cached_messages_max=500)
    stuck.subscribe("Stuck")
    stuck.register_listener(lambda messages: release.wait(120))   # never acknowledges while the test runs
    healthy_seen = [0]
    healthy = PushConsumer("HealthyGroup", config=cfg)
    healthy.subscribe("Stuck")
    healthy.register_listener(lambda messages: healthy_seen.__setitem__(0, healthy_seen[0] + len(messages)))
    stuck.start()
    healthy.start()
    try:
        wait_until(lambda: healthy_seen[0] >= 20_000, 120, what="the healthy group reading everything")
        wait_until(lambda: stuck.statistics()["flow_control_pauses"] > 0, 60, what="the stuck group paused")
        assert _sends_all_ok(cfg, "Stuck", 200) == [SendStatus.SEND_OK] * 200
        cached = stuck.statistics()["cached"]
        # Four queues, each stopped at its cap plus the pull in flight when it got there.
        assert cached <= 4 * (500 + cfg.pull_batch_count), cached
    finally:
        release.set()
        stuck.shutdown()
        healthy.shutdown()


def test_a_pop_consumer_that_never_acks_ends_in_the_dead_letter_queue_not_in_endless_revives(start_cluster):
    """Every pop comes back after its invisible time, at most retryMaxTimes + 1 deliveries, then goes
    to %DLQ%: the revive work is bounded by the messages, not by how long the consumer ignores them."""
    cluster = start_cluster()
    cfg = client_config(cluster)
    group, topic, count = "NeverAcks", "PopIgnored", 50
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, 2)
        admin.update_subscription_group(group, retryMaxTimes=1)
    _fill(cfg, topic, count)
    endpoint = cluster.topology.brokers[0].endpoint
    deliveries: dict[str, int] = {}
    rpc = RpcClient(default_timeout_ms=5000)
    try:
        def pop_round() -> int:
            answer = rpc.call(endpoint, Command(RequestCode.POP_MESSAGE, {
                "consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": "32",
                "invisibleTime": "1000", "pollTime": "300", "initMode": "0"}))
            if answer.code != ResponseCode.SUCCESS:
                return 0
            records = list(fmt.iter_records(answer.body))
            for record in records:
                key = record.properties[PROPERTY_UNIQ_KEY]
                deliveries[key] = deliveries.get(key, 0) + 1
            return len(records)

        with PullConsumer("DlqReader", config=cfg) as reader:
            def dead_letters() -> int:
                try:
                    return reader.pull(MessageQueue(f"%DLQ%{group}", "broker-a", 0), 0, 1024).next_begin_offset
                except Exception:   # noqa: BLE001 - the DLQ topic does not exist before the first dead letter
                    return 0

            def all_dead() -> bool:
                pop_round()
                return dead_letters() >= count
            wait_until(all_dead, 120, interval_s=0.05, what="every ignored message in the dead-letter queue")
            assert len(deliveries) == count
            assert max(deliveries.values()) <= 2, deliveries   # retryMaxTimes 1: two deliveries at most
            # Nothing is revived any more: pops find nothing.
            assert sum(pop_round() for _ in range(5)) == 0
            assert dead_letters() == count
    finally:
        rpc.close()
