"""Retention against a live cluster: mqadmin deleteExpiredCommitLog deletes
expired segments, readers at deleted offsets (a push group, a Spark read, the delay and
transaction bookkeeping) go on from the new min offsets, and a SIGKILL of the allocate worker or
of the broker in the middle of a deletion leaves a store that serves every message it kept."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, Message, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.client.transaction import LocalTransactionState as State, TransactionProducer
from rocketbox.cluster.shm import paths
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.testing import read_topic, wait_until
from rocketbox.spark.datasource import Options, read_range
from rocketbox.spark.offsets import QueueRange
from tests.cli_helpers import run_cli
from tests.conftest import await_group_caught_up, client_config

pytestmark = pytest.mark.timeout(300)

SEGMENT = 256 * 1024
BODY_PAD = b"." * 2000  # ~120 records a segment


def _store(**changes) -> dict:
    """Small segments, expired as soon as closed, deleted only when asked: deleteWhen is an hour
    twelve hours away (the look at the disk ratio stays at RocketMQ's 75 %, or 95 % here)."""
    store = dict(commitlog_file_size_bytes=SEGMENT, message_size_bytes_max=64 * 1024,
                 consumequeue_entries_per_file=200, file_reserved_time_ms=1,
                 delete_when=f"{(time.localtime().tm_hour + 12) % 24:02d}", disk_max_used_space_ratio=95,
                 clean_resource_interval_ms=300, delete_commitlog_files_interval_ms=0,
                 message_delay_levels="1s 2s", preheat_enabled=False)
    store.update(changes)
    return store


def _cli(*args: str) -> str:
    return run_cli(*args).stdout


def _send(cfg, topic: str, count: int, first: int = 0) -> dict[tuple[int, int], bytes]:
    """(queue id, queue offset) -> body of each message sent, in batches of 20."""
    sent = {}
    with Producer("RetentionPG", config=cfg) as producer:
        for start in range(first, first + count, 20):
            batch = [Message(topic, b"%d|" % i + BODY_PAD) for i in range(start, min(start + 20, first + count))]
            result = producer.send_batch(batch)   # one queue, consecutive offsets from the first
            for i, message in enumerate(batch):
                sent[(result.queue.queue_id, result.queue_offset + i)] = message.body
    return sent


def _segments(cluster) -> list[int]:
    names = os.listdir(paths.commitlog_dir(os.path.join(cluster.data_dir, "broker-a", "store")))
    return sorted(int(n) for n in names if n.isdigit())


def _control(cluster) -> ControlBlock:
    return ControlBlock(paths.control_path(os.path.join(cluster.data_dir, "broker-a", "store")))


def _queue_rows(cfg, topic: str) -> list[dict]:
    with Admin(config=cfg) as admin:
        return admin.queue_offsets(topic)


def _min_offsets(cfg, topic: str) -> dict[int, int]:
    return {row["queueId"]: row["minOffset"] for row in _queue_rows(cfg, topic)}


def _kept(sent: dict, mins: dict[int, int]) -> dict[tuple[int, int], bytes]:
    return {key: body for key, body in sent.items() if key[1] >= mins[key[0]]}


def _everything_readable(cfg, topic: str, sent: dict) -> None:
    """Every queue serves each message it kept, from its min offset to its end, once and intact."""
    mins = _min_offsets(cfg, topic)
    with PullConsumer("RetentionCheck", config=cfg) as consumer:
        got = {(m.queue_id, m.queue_offset): m.body for m in read_topic(consumer, topic)}
    assert got == _kept(sent, mins)


def test_delete_expired_commitlog_and_readers_go_on_from_the_new_min(start_cluster):
    cluster = start_cluster(store_overrides=_store(),
                            broker_overrides={"transaction_check_interval_ms": 200, "transaction_timeout_ms": 300})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Kept", 4)
    consumed: list[bytes] = []
    lock = threading.Lock()

    def listener(messages):
        with lock:
            consumed.extend(m.body for m in messages)
        return ConsumeStatus.CONSUME_SUCCESS
    sent = _send(cfg, "Kept", 200)
    with PushConsumer("EarlyGroup", config=cfg) as consumer:   # commits 200, then goes away
        consumer.subscribe("Kept", "*")
        consumer.register_listener(listener)
        consumer.start()
        await_group_caught_up(cfg, "Kept", "EarlyGroup")
    with Producer("DelayPG", config=cfg) as producer:   # the schedule's progress moves past these
        for i in range(5):
            producer.send(Message("Kept", b"early-delayed-%d" % i).set_delay_level(1))
    # Delivered into Kept before the later sends, so they sit in the segments deleted below (on a
    # busy machine the schedule could otherwise deliver them among the kept ones).
    wait_until(lambda: sum(row["maxOffset"] for row in _queue_rows(cfg, "Kept")) >= 205, 30,
               what="the delayed messages delivered")
    sent.update(_send(cfg, "Kept", 3000, first=200))
    before = _segments(cluster)
    assert len(before) >= 20

    out = _cli("deleteExpiredCommitLog", "-n", cluster.namesrv, "-c", "DefaultCluster")
    assert "requested" in out
    control = _control(cluster)
    try:
        wait_until(lambda: len(_segments(cluster)) <= 2, 30, what="the expired segments deleted")
        floor = control.commitlog_min_pos
    finally:
        control.close()
    assert floor > 0 and _segments(cluster)[0] == floor
    status = _cli("brokerStatus", "-n", cluster.namesrv, "-c", "DefaultCluster", "--json")
    assert f'"commitLogMinOffset": "{floor}"' in status
    mins = _min_offsets(cfg, "Kept")
    assert all(low > 0 for low in mins.values())

    # The group resumes below the new min: it is moved up (OFFSET_TOO_SMALL) and gets the rest, once.
    consumed.clear()
    with PushConsumer("EarlyGroup", config=cfg) as consumer:
        consumer.subscribe("Kept", "*")
        consumer.register_listener(listener)
        consumer.start()
        await_group_caught_up(cfg, "Kept", "EarlyGroup", timeout_s=60)
        with lock:
            got = sorted(consumed)
    assert got == sorted(_kept(sent, mins).values())

    # A Spark read planned from offset 0 goes on from the min offset too.
    opts = Options.parse({"namesrv": cluster.namesrv, "topic": "Kept"})
    for queue_id, low in mins.items():
        rows = [row for batch in read_range(opts, QueueRange("broker-a", queue_id, 0, low + 5))
                for row in batch.to_pylist()]
        assert [row["queue_offset"] for row in rows] == list(range(low, low + 5))

    # Delay and transaction bookkeeping stayed consistent: new ones are delivered.
    listener_tx = type("Commit", (), {"execute_local_transaction": lambda self, m, a: State.COMMIT_MESSAGE,
                                      "check_local_transaction": lambda self, m: State.COMMIT_MESSAGE})()
    with Producer("DelayPG", config=cfg) as producer, \
            TransactionProducer("RetentionTx", listener_tx, config=cfg) as tx:
        producer.send(Message("Kept", b"late-delayed").set_delay_level(1))
        tx.send_message_in_transaction(Message("Kept", b"late-transaction"))
    with PullConsumer("LateCheck", config=cfg) as consumer:
        wait_until(lambda: {b"late-delayed", b"late-transaction"} <= {m.body for m in read_topic(consumer, "Kept")},
                   30, interval_s=0.2, what="the delayed and the transactional message delivered")


def test_sigkill_in_the_middle_of_a_deletion(start_cluster):
    # 300 ms between two unlinks: a deletion of ~25 segments takes seconds, and the kill lands in it.
    cluster = start_cluster(store_overrides=_store(delete_commitlog_files_interval_ms=300,
                                                   delete_file_batch_max=100))
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Cut", 4)
    sent = _send(cfg, "Cut", 3000)

    for victim in ("broker-a-reput", "broker-a"):   # the allocate worker runs in the reput process
        control = _control(cluster)
        try:
            # Read before asking: the worker may publish the new floor before this process looks.
            start = control.commitlog_min_pos
            _cli("deleteExpiredCommitLog", "-n", cluster.namesrv, "-b", _broker_addr(cfg))
            wait_until(lambda: control.commitlog_min_pos > start and 5 <= len(
                [s for s in _segments(cluster) if s < control.commitlog_min_pos]), 30,
                what="a deletion under way")
            floor_at_kill = control.commitlog_min_pos
            old_pid = cluster.kill(victim, signal.SIGKILL)
            cluster.await_running(victim, not_pid=old_pid)
            cluster.await_all_running()
            if victim == "broker-a-reput":
                # Restarted alone, the worker's first look finishes what the killed one began.
                wait_until(lambda: _segments(cluster)[0] >= floor_at_kill, 30, what="the deletion resumed")
            else:
                # The group restarted: recovery sets the floor back to the first segment left, whole.
                left = _segments(cluster)
                assert control.commitlog_min_pos == left[0] and len(left) > 2
        finally:
            control.close()
        _everything_readable(cfg, "Cut", sent)
        sent.update(_send(cfg, "Cut", 1200, first=len(sent)))

    # Asked again, the last deletion completes, and what is kept is still whole.
    _cli("deleteExpiredCommitLog", "-n", cluster.namesrv, "-b", _broker_addr(cfg))
    wait_until(lambda: len(_segments(cluster)) <= 2, 60, what="the remaining expired segments deleted")
    _everything_readable(cfg, "Cut", sent)


def _broker_addr(cfg) -> str:
    with Admin(config=cfg) as admin:
        return admin.master_endpoints()["broker-a"].removeprefix("tcp://")
