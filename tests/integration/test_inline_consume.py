"""A push consumer with no consume threads (``consume_threads=0``): the listener runs on the
client's I/O thread, which received the pull, and still gets everything, commits, and retries; and
with a pool, a quick listener runs there too while the pool is idle (a slow or failing one does not)."""

from __future__ import annotations

import threading

import pytest

from rocketbox.cluster import ConsumeStatus, PushConsumer
from rocketbox.cluster.client.orderly import ConsumeOrderlyStatus
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.testing import wait_until
from tests.conftest import await_group_caught_up, client_config, fill_topic

# The I/O thread of each client transport (client_transport.IoThreadBase.THREAD_NAME).
IO_THREAD = {"native": "rpc-io", "remoting": "remoting-io"}


def _consume_all(cfg, topic: str, count: int, listener_work, deliveries: int = 0, queues: int = 1,
                 **consumer_kwargs):
    """Consume ``count`` messages of a fresh ``topic`` (by default with a default pool, a message a
    batch; at least ``deliveries`` in all); the listener calls ``listener_work(messages)`` for its
    status. Which threads ran it, and the consumer's statistics."""
    fill_topic(cfg, topic, queues, count)
    seen: dict[bytes, int] = {}
    threads: set[str] = set()
    lock = threading.Lock()

    def listener(messages):
        with lock:
            threads.add(threading.current_thread().name)
            for m in messages:
                seen[m.body] = seen.get(m.body, 0) + 1
        return listener_work(messages)

    consumer = PushConsumer(f"{topic}Group", config=cfg, **{"consume_batch_max": 1, **consumer_kwargs})
    consumer.subscribe(topic)
    consumer.register_listener(listener)
    consumer.start()
    try:
        wait_until(lambda: len(seen) >= count and sum(seen.values()) >= deliveries, 30,
                   what="every message consumed")
        await_group_caught_up(cfg, topic, f"{topic}Group")
    finally:
        consumer.shutdown()
    assert set(seen) == {f"m{i}".encode() for i in range(count)}
    return seen, threads, consumer.statistics()


@pytest.mark.parametrize("transport", ["native", "remoting"])
def test_every_message_is_consumed_on_the_io_thread_and_committed(start_cluster, transport):
    cluster = start_cluster()
    cfg = client_config(cluster, transport=transport)
    _seen, threads, stats = _consume_all(cfg, "Inline", 200, lambda messages: None, queues=4,
                                         consume_threads=0, consume_batch_max=32)
    assert threads == {IO_THREAD[transport]}   # no hand-off to a pool
    assert stats["consumed"] >= 200


def test_failed_messages_go_back_through_the_retry_topic(start_cluster):
    cluster = start_cluster(store_overrides={"message_delay_levels": "300ms 600ms 900ms"})
    cfg = client_config(cluster)
    fill_topic(cfg, "InlineWork", 1, 1)
    deliveries: list[tuple[int, str]] = []

    def listener(messages):
        deliveries.extend((m.reconsume_times, threading.current_thread().name) for m in messages)
        return ConsumeStatus.RECONSUME_LATER if len(deliveries) <= 2 else ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer("InlineWorkGroup", config=cfg, consume_threads=0, consume_batch_max=1)
    consumer.subscribe("InlineWork")
    consumer.register_listener(listener)
    consumer.start()
    try:
        wait_until(lambda: len(deliveries) >= 3, 30, what="three deliveries")
        await_group_caught_up(cfg, "InlineWork", "InlineWorkGroup")
    finally:
        consumer.shutdown()
    assert [d[0] for d in deliveries[:3]] == [0, 1, 2]
    assert {d[1] for d in deliveries} == {"rpc-io"}
    assert consumer.statistics()["sent_back"] == 2


def test_orderly_consumption_needs_consume_threads(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    fill_topic(cfg, "InlineOrdered", 1, 1)
    consumer = PushConsumer("InlineOrderedGroup", config=cfg, consume_threads=0)
    consumer.subscribe("InlineOrdered")
    consumer.register_message_listener_orderly(lambda messages, context: ConsumeOrderlyStatus.SUCCESS)
    with pytest.raises(ClientError, match="consume_threads must be >= 1"):
        consumer.start()
    consumer.shutdown()
    with pytest.raises(ValueError, match="consume_threads must be >= 0"):
        PushConsumer("InlineOrderedGroup", config=cfg, consume_threads=-1)


def test_a_listener_on_the_io_thread_may_shut_its_consumer_down(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    fill_topic(cfg, "InlineStop", 1, 5)
    outcome: list = []

    def listener(messages):
        if not outcome:
            try:
                consumer.shutdown()
                outcome.append("stopped")
            except Exception as exc:   # noqa: BLE001 - what the test reports
                outcome.append(exc)

    consumer = PushConsumer("InlineStopGroup", config=cfg, consume_threads=0)
    consumer.subscribe("InlineStop")
    consumer.register_listener(listener)
    consumer.start()
    try:
        wait_until(lambda: outcome, 30, what="the listener called shutdown")
    finally:
        consumer.shutdown()
    assert outcome == ["stopped"]


@pytest.mark.parametrize("transport", ["native", "remoting"])
def test_a_quick_listener_runs_on_the_io_thread_while_the_pool_is_idle(start_cluster, transport):
    cluster = start_cluster()
    cfg = client_config(cluster, transport=transport)
    _seen, threads, stats = _consume_all(cfg, "QuickPool", 60, lambda messages: ConsumeStatus.CONSUME_SUCCESS)
    # The first calls go to the pool (the listener's speed is not known yet), then no hand-off.
    assert IO_THREAD[transport] in threads
    assert any(name.startswith("consume-") for name in threads)
    assert stats["inline_batches"] >= 1
    assert stats["consumed"] >= 60


def test_a_slow_listener_stays_on_the_pool(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)

    def slow(messages):
        threading.Event().wait(0.005)   # longer than consume_service.QUICK_LISTENER_S
        return ConsumeStatus.CONSUME_SUCCESS

    _seen, threads, stats = _consume_all(cfg, "SlowPool", 30, slow)
    assert threads and all(name.startswith("consume-") for name in threads)
    assert stats["inline_batches"] == 0


def test_a_failure_on_the_io_thread_goes_back_from_the_pool(start_cluster):
    cluster = start_cluster(store_overrides={"message_delay_levels": "300ms 600ms 900ms"})
    cfg = client_config(cluster)
    failed: list[tuple[int, str]] = []
    lock = threading.Lock()

    def fail_m40_once(messages):
        with lock:
            if messages[0].body == b"m40" and not failed:
                failed.append((messages[0].reconsume_times, threading.current_thread().name))
                return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    seen, threads, stats = _consume_all(cfg, "FailPool", 60, fail_m40_once, deliveries=61)
    assert seen[b"m40"] == 2                 # once failed, once again through the retry topic
    assert stats["sent_back"] == 1 and stats["consume_failures"] == 1
    assert stats["inline_batches"] >= 1 and "rpc-io" in threads
