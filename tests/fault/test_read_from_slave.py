"""Read from slave through real processes: a slave syncs its master's topic
configs and consumer offsets (broker/slave_sync.py) and serves the same messages; a master
steers a far-behind consumer to its slave and the slave steers it back (suggestWhichBrokerId);
a PushConsumer keeps consuming from the slave while the master is SIGSTOPped, and the offsets
it committed meanwhile reach the master once it runs again."""

from __future__ import annotations

import os
import signal
import threading
import time

from rocketbox.cluster import Admin, ConsumeStatus, Message, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config
from tests.fault.test_replication import _await_replicated, runtime_info

TOPIC = "FromSlave"
GROUP = "SlaveReaders"


def _await_synced(slave) -> None:
    """Two sync rounds begun after now: the slave has the master's current topics and offsets."""
    rounds = runtime_info(slave.address)["slaveSyncRounds"]
    wait_until(lambda: runtime_info(slave.address)["slaveSyncRounds"] >= rounds + 2, 10, interval_s=0.05,
               what="the slave synced topics and offsets")


def _read_all(consumer, mq, endpoint=None) -> list[tuple[int, bytes]]:
    if endpoint is not None:
        consumer._endpoint = lambda _mq: endpoint
    out, offset = [], 0
    while True:
        result = consumer.pull(mq, offset, 64)
        if not result.messages:
            return out
        out.extend((m.queue_offset, m.body) for m in result.messages)
        offset = result.next_begin_offset


def test_slave_serves_the_masters_topics_messages_and_offsets(start_cluster):
    cluster = start_cluster(slaves=1, broker_overrides={"slave_sync_interval_ms": 200})
    cfg = client_config(cluster)
    master, slave = cluster.topology.brokers[0], cluster.topology.slaves[0]
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 2)
    with Producer("SlavePG", config=cfg) as producer:
        for i in range(300):
            producer.send(Message(TOPIC, f"m{i}".encode(), tags="t"))
    _await_replicated(cluster)
    with PullConsumer(GROUP, config=cfg) as consumer:
        mqs = consumer.queues(TOPIC)
        consumer.commit_offset(mqs[0], 7)
        from_master = {mq.queue_id: _read_all(consumer, mq) for mq in mqs}
    assert sum(len(v) for v in from_master.values()) == 300
    _await_synced(slave)
    with PullConsumer(GROUP, config=cfg) as consumer:
        consumer._endpoint = lambda _mq: f"tcp://{slave.address}"
        from_slave = {mq.queue_id: _read_all(consumer, mq) for mq in mqs}
        wait_until(lambda: consumer.committed_offset(mqs[0]) == 7, 10, interval_s=0.05,
                   what="the master's committed offset on the slave")
    assert from_slave == from_master
    assert runtime_info(master.address)["brokerRole"] != runtime_info(slave.address)["brokerRole"]


def test_master_steers_far_behind_reads_to_the_slave_and_the_slave_back(start_cluster):
    # 20 KB: a consumer starting at offset 0 of ~300 KB of messages is "far behind".
    cluster = start_cluster(slaves=1, broker_overrides={"slave_sync_interval_ms": 200,
                                                        "slave_read_distance_bytes": 20_000})
    cfg = client_config(cluster)
    master, slave = cluster.topology.brokers[0], cluster.topology.slaves[0]
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 1)
    sent = [f"m{i}-".encode() + bytes(1000) for i in range(300)]
    with Producer("SlavePG", config=cfg) as producer:
        producer.send_batch([Message(TOPIC, body) for body in sent[:150]])
        producer.send_batch([Message(TOPIC, body) for body in sent[150:]])
    _await_replicated(cluster)
    _await_synced(slave)
    brokers_used = []
    with PullConsumer(GROUP, config=cfg) as consumer:
        mq = consumer.queues(TOPIC)[0]
        got, offset = [], 0
        # Bounded in count and time: 300 messages in pulls of 16 need 19; a stuck pull fails the test.
        deadline = time.monotonic() + 60
        for _ in range(10 * len(sent) // 16):
            if len(got) >= len(sent) or time.monotonic() > deadline:
                break
            brokers_used.append(consumer._pull_endpoint(mq)[1])
            result = consumer.pull(mq, offset, 16)
            got.extend(m.body for m in result.messages)
            offset = result.next_begin_offset
        assert len(got) == len(sent), f"{len(got)} of {len(sent)} pulled"
        # The last pulls were near the end: the slave sent the consumer back to the master.
        assert consumer._pull_endpoint(mq) == (f"tcp://{master.address}", 0)
        assert not consumer.pull(mq, offset, 16).messages
    assert got == sent
    assert brokers_used[0] == 0 and 1 in brokers_used, brokers_used
    assert runtime_info(master.address)["suggestedSlave"] >= 1
    assert runtime_info(slave.address)["suggestedMaster"] >= 1
    assert runtime_info(slave.address)["messagesServed"] > 0


def test_push_consumer_reads_from_the_slave_while_the_master_is_stopped(start_cluster):
    # The watchdog would kill (and restart) a master stopped for its heartbeat time-out.
    cluster = start_cluster(slaves=1, broker_overrides={"slave_sync_interval_ms": 200}, heartbeat_timeout_s=300)
    cfg = client_config(cluster, request_timeout_ms=1000, pull_suspend_ms=500, pull_batch_count=8,
                        consumer_offset_commit_interval_ms=200, slave_fallback_ms=5000)
    slave = cluster.topology.slaves[0]
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 2)
    sent = {f"m{i}".encode() for i in range(200)}
    with Producer("SlavePG", config=cfg) as producer:
        for body in sorted(sent):
            producer.send(Message(TOPIC, body))
    _await_replicated(cluster)
    _await_synced(slave)
    gate, got = threading.Event(), set()

    def listener(messages):
        gate.wait()
        got.update(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, config=cfg, cached_messages_max=8, consume_batch_max=8)
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    consumer.start()
    pid = cluster.pid("broker-a")
    try:
        wait_until(lambda: consumer.assigned_queues(), 10, interval_s=0.05, what="queues assigned")
        os.kill(pid, signal.SIGSTOP)
        try:
            gate.set()
            wait_until(lambda: got == sent, 60, interval_s=0.1, what="every message consumed from the slave")
            mqs = sorted(consumer.assigned_queues())
            slave_reader = PullConsumer(GROUP, config=cfg)
            slave_reader._endpoint = lambda _mq: f"tcp://{slave.address}"
            try:
                maxima = {mq: slave_reader.max_offset(mq) for mq in mqs}
                assert sum(maxima.values()) == len(sent)
                wait_until(lambda: all(slave_reader.committed_offset(mq) == maxima[mq] for mq in mqs), 30,
                           interval_s=0.1, what="offsets committed to the slave")
            finally:
                slave_reader.shutdown()
        finally:
            os.kill(pid, signal.SIGCONT)
        with PullConsumer(GROUP, config=cfg) as master_reader:
            def caught_up():
                try:
                    return all(master_reader.committed_offset(mq) == maxima[mq] for mq in mqs)
                except BrokerError as exc:
                    # Resumed after seconds, the master sheds what queued meanwhile (fast failure:
                    # a request's wait is bounded by when its door was last empty) until it drains.
                    if exc.code != ResponseCode.SYSTEM_BUSY:
                        raise
                    return False
            wait_until(caught_up, 30, interval_s=0.1, what="the offsets committed meanwhile reach the master")
    finally:
        consumer.shutdown()
