"""The whole-record CRC property end to end (StoreConfig.record_crc_enabled, on by default): every
record a running broker writes (sends, batches, the schedule's and the retry path's copies, a
transaction's half and its commit) carries RocketMQ's ``__CRC32#`` property with the CRC of the
record's other bytes; a client's own ``__CRC32#`` is dropped; consumers never see the property, through
either door (RocketMQ 4 never delivers one; gRPC hides it too: test_proxy_messages.py)."""

from __future__ import annotations

import threading

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, Message, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.client.transaction import LocalTransactionState, TransactionProducer
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.shm.commitlog import CommitLog
from rocketbox.cluster.shm.commitlog_format import EndOfFile
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(120)

LEVELS = "300ms 600ms 900ms"


class Commit:
    def execute_local_transaction(self, message, arg):
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, message):
        return LocalTransactionState.COMMIT_MESSAGE


def test_every_record_a_broker_writes_is_sealed_and_consumers_never_see_the_property(start_cluster):
    cluster = start_cluster(store_overrides={"message_delay_levels": LEVELS})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Sealed", 1)
        admin.create_topic("Retried", 1)
    forged = Message("Sealed", b"forged", tags="A")
    forged.properties["__CRC32#"] = "0000000001"   # a client may send one: the broker's replaces it
    with Producer("SealProducer", config=cfg) as producer:
        producer.send(forged)
        producer.send_batch([Message("Sealed", b"batch-%d" % i, tags="B") for i in range(5)])
        producer.send(Message("Sealed", b"delayed", tags="C").set_delay_level(1))
        producer.send(Message("Retried", b"try again"))
    with TransactionProducer("SealTx", Commit(), config=cfg) as tx:
        tx.send_message_in_transaction(Message("Sealed", b"in a transaction"))
    attempts = []
    retried = threading.Event()

    def later_once(messages):
        attempts.extend(messages)
        if len(attempts) > 1:
            retried.set()
            return ConsumeStatus.CONSUME_SUCCESS
        return ConsumeStatus.RECONSUME_LATER

    push = PushConsumer("SealRetry", config=cfg, consume_batch_max=1)
    push.subscribe("Retried", "*")
    push.register_listener(later_once)
    push.start()
    try:
        assert retried.wait(60), "the message came back from the retry path"
    finally:
        push.shutdown()
    bodies = [b"forged", *(b"batch-%d" % i for i in range(5)), b"delayed", b"in a transaction"]
    for transport in ("native", "remoting"):
        door = client_config(cluster, transport="remoting") if transport == "remoting" else cfg
        with PullConsumer(f"SealCheck-{transport}", config=door) as consumer:
            got = wait_until(lambda: (lambda ms: ms if len(ms) == len(bodies) else None)(read_topic(consumer, "Sealed")),
                             30, what=f"every message through the {transport} door")
        assert sorted(m.body for m in got) == sorted(bodies)
        for m in got:
            assert "__CRC32#" not in m.properties, (transport, m.body)
    assert attempts[1].reconsume_times == 1 and "__CRC32#" not in attempts[1].properties

    # Every record in broker-a's CommitLog, the system topics' too, verifies and is sealed (read once
    # the cluster stopped: nothing writes any more).
    cluster.stop()
    commitlog = CommitLog(cluster.topology.brokers[0].store)
    try:
        topics, end = set(), None
        for _, item in commitlog.walk(commitlog.min_offset(), check_crc=True):
            if type(item) is fmt.Record:
                assert fmt.stored_record_crc(item.properties_raw) is not None, item
                topics.add(item.topic)
            elif type(item) is not EndOfFile:
                end = item
    finally:
        commitlog.close()
    assert end == fmt.Incomplete(), end   # the walk ended at the zeros after the last record
    assert {"Sealed", "Retried", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "%RETRY%SealRetry"} <= topics, topics
