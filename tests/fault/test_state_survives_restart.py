"""Topic config and committed consumer offsets survive broker restarts.

A clean stop (SIGTERM) persists offsets at shutdown; after a SIGKILL the offsets written by
the last periodic persist (every consumer_offset_persist_interval_ms, RocketMQ's 5 s) remain.
"""

from __future__ import annotations

import json
import os
import signal

from rocketbox.cluster import Admin, Message, Producer, PullConsumer
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config


def test_offsets_and_topics_survive_sigterm_and_sigkill(start_cluster):
    cluster = start_cluster(broker_overrides={"consumer_offset_persist_interval_ms": 200})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Kept", 3)
    with Producer("PG", config=cfg) as producer:
        producer.send_batch([Message("Kept", b"m%d" % i) for i in range(30)])
    offsets_file = os.path.join(cluster.topology.brokers[0].store.store_dir, "config", "consumerOffset.json")
    with PullConsumer("KeptGroup", config=cfg) as consumer:
        queues = consumer.queues("Kept")
        # A batch goes to one queue: the one holding all 30 once dispatched.
        mq = wait_until(lambda: next((q for q in queues if consumer.max_offset(q) == 30), None), 10,
                        what="the batch dispatched")
        consumer.commit_offset(mq, 11)
        old = cluster.kill("broker-a", signal.SIGTERM)
        cluster.await_running("broker-a", not_pid=old)
        cluster.await_all_running()
        assert consumer.committed_offset(mq) == 11
        consumer.commit_offset(mq, 17)
        # Wait for a periodic persist to hold 17, then kill without any chance to persist again.
        wait_until(lambda: "17" in json.dumps(json.load(open(offsets_file))), 10, what="offset 17 persisted")
        old = cluster.kill("broker-a", signal.SIGKILL)
        cluster.await_running("broker-a", not_pid=old)
        cluster.await_all_running()
        assert consumer.committed_offset(mq) == 17
        assert consumer.max_offset(mq) == 30
    with Admin(config=cfg) as admin:
        route = admin.route("Kept")
        assert route["queueDatas"][0]["writeQueueNums"] == 3


def test_offsets_committed_just_before_a_sigkill_are_kept(start_cluster):
    """No periodic persist runs in this test: what the restarted broker answers comes from
    the shared-memory slots the killed one wrote at each commit."""
    cluster = start_cluster(broker_overrides={"consumer_offset_persist_interval_ms": 600_000})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("KeptNow", 2)
    with Producer("PG", config=cfg) as producer:
        producer.send_batch([Message("KeptNow", b"m%d" % i) for i in range(40)])
    with PullConsumer("KeptNowGroup", config=cfg) as consumer, \
            PullConsumer("OtherGroup", config=cfg) as other:
        mq = wait_until(lambda: next((q for q in consumer.queues("KeptNow") if consumer.max_offset(q) == 40), None),
                        10, what="the batch dispatched")
        for offset in (5, 12, 31):
            consumer.commit_offset(mq, offset)
        other.commit_offset(mq, 7)
        old = cluster.kill("broker-a", signal.SIGKILL)
        cluster.await_running("broker-a", not_pid=old)
        cluster.await_all_running()
        assert consumer.committed_offset(mq) == 31
        assert other.committed_offset(mq) == 7
        consumer.commit_offset(mq, 33)   # slots keep working after the restart
        old = cluster.kill("broker-a", signal.SIGKILL)
        cluster.await_running("broker-a", not_pid=old)
        cluster.await_all_running()
        assert consumer.committed_offset(mq) == 33
