"""Ordered messages: a key's messages go to one queue (hash selector or the application's own),
orderly consumers lock their queues at the broker and consume each queue on one thread in order;
a failure is retried in place; per-key order holds across a rebalance and a SIGKILLed member.

Order is checked per key on the sequence of deliveries: repeats of a seq already delivered are
allowed (at-least-once), but every first delivery must come after all smaller seqs of its key.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
import signal
import threading
import time

from rocketbox.cluster import Admin, Message, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.client.orderly import ConsumeOrderlyStatus
from rocketbox.cluster.client.selectors import hash_selector
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config

TOPIC = "Ordered"
QUEUES = 4
KEYS = [f"order-{n}" for n in range(8)]


def assert_per_key_order(deliveries, expected_count: int) -> None:
    """``deliveries``: (key, seq) in delivery order. Every seq 0..expected_count-1 of every key
    arrived, and per key, once repeats of seen seqs are dropped, the seqs strictly increase."""
    by_key = collections.defaultdict(list)
    for key, seq in deliveries:
        by_key[key].append(seq)
    assert sorted(by_key) == sorted(KEYS)
    for key, seqs in by_key.items():
        seen: set[int] = set()
        first = []
        for seq in seqs:
            if seq not in seen:
                seen.add(seq)
                first.append(seq)
        assert first == list(range(expected_count)), f"{key}: first deliveries out of order: {first}"


def send_ordered(cfg, seqs: range) -> None:
    """Every key's messages ``seqs``, keys interleaved, each key on its hash's queue."""
    with Producer("OrderedProducer", config=cfg) as producer:
        for seq in seqs:
            for key in KEYS:
                producer.send(Message(TOPIC, f"{key}|{seq}".encode(), keys=key), selector=hash_selector, arg=key)


def decode(message) -> tuple[str, int]:
    key, seq = message.body.decode().split("|")
    return key, int(seq)


def ordered_cluster(start_cluster, broker_overrides=None, **client_changes):
    """A cluster with the 4-queue topic; the client settings for it."""
    cfg = client_config(start_cluster(broker_overrides=broker_overrides), **client_changes)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, QUEUES)
    return cfg


def orderly_consumer(cfg, listener, holding: int | None = QUEUES, batch: int = 4, **kwargs) -> PushConsumer:
    """A started orderly member of OrderedGroup, once it has locked ``holding`` queues."""
    consumer = PushConsumer("OrderedGroup", config=cfg, consume_threads=4, consume_batch_max=batch)
    consumer.subscribe(TOPIC)
    consumer.register_message_listener_orderly(listener, **kwargs)
    consumer.start()
    try:
        if holding is not None:
            wait_until(lambda: len(consumer.assigned_queues()) == holding, 30,
                       what=f"{holding} queues locked and assigned")
    except TimeoutError:
        consumer.shutdown()
        raise
    return consumer


class Recorder:
    """An orderly listener that records deliveries and checks one thread per queue at a time."""

    def __init__(self, name: str = "", work_s: float = 0.0, out: list | None = None):
        self.name = name
        self.work_s = work_s
        self.deliveries: list = [] if out is None else out
        self.lock = threading.Lock()
        self.active: collections.Counter = collections.Counter()
        self.overlaps = 0
        self.queues_of_key: dict[str, set[int]] = collections.defaultdict(set)

    def __call__(self, messages, context):
        with self.lock:
            self.active[context.mq] += 1
            self.overlaps += self.active[context.mq] > 1
        started = time.monotonic()
        if self.work_s:
            time.sleep(self.work_s * len(messages))  # the application's work
        with self.lock:
            for m in messages:
                key, seq = decode(m)
                self.queues_of_key[key].add(m.queue_id)
                self.deliveries.append((key, seq, self.name, m.queue_id, started, time.monotonic()))
            self.active[context.mq] -= 1
        return ConsumeOrderlyStatus.SUCCESS

    def pairs(self):
        with self.lock:
            return [(key, seq) for key, seq, *_ in self.deliveries]

    def distinct(self) -> int:
        with self.lock:
            return len({(key, seq) for key, seq, *_ in self.deliveries})


def test_hash_selector_and_an_orderly_consumer_keep_each_keys_order(start_cluster):
    cfg = ordered_cluster(start_cluster)
    recorder = Recorder()
    consumer = orderly_consumer(cfg, recorder)
    try:
        send_ordered(cfg, range(40))
        wait_until(lambda: recorder.distinct() == 40 * len(KEYS), 30, what="every message consumed")
        assert_per_key_order(recorder.pairs(), 40)
        assert len(recorder.pairs()) == 40 * len(KEYS), "no redelivery in steady state"
        assert all(len(queues) == 1 for queues in recorder.queues_of_key.values()), "a key spread over queues"
        assert len({q for queues in recorder.queues_of_key.values() for q in queues}) > 1
        assert recorder.overlaps == 0, "two threads consumed one queue at once"
        assert consumer.sent_back == 0
    finally:
        consumer.shutdown()

    # The application's own selector: every send of this key lands on the queue it picks.
    with Producer("OrderedProducer", config=cfg) as producer:
        for n in range(8):
            result = producer.send(Message(TOPIC, b"x"), selector=lambda queues, msg, arg: queues[arg % len(queues)],
                                   arg=n)
            assert result.queue.queue_id == n % QUEUES


def test_a_failed_batch_is_retried_in_place_and_its_queue_waits(start_cluster):
    cfg = ordered_cluster(start_cluster)
    attempts = collections.Counter()
    log: list = []  # (queue id, seq, attempt, time)
    committed_while_suspended: list = []
    reader = PullConsumer("OrderedGroup", config=cfg)
    failing = (0, 1)  # queue 0, seq 1

    def listener(messages, context):
        for m in messages:
            seq = int(m.body)
            attempts[(m.queue_id, seq)] += 1
            log.append((m.queue_id, seq, attempts[(m.queue_id, seq)], time.monotonic()))
            if (m.queue_id, seq) == failing and attempts[failing] <= 2:
                if attempts[failing] == 2:
                    committed_while_suspended.append(reader.committed_offset(context.mq))
                return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return ConsumeOrderlyStatus.SUCCESS

    consumer = orderly_consumer(cfg, listener, batch=1)
    try:
        queues = sorted(consumer.queues(TOPIC))
        with Producer("OrderedProducer", config=cfg) as producer:
            for seq in range(5):
                for queue in queues[:2]:
                    producer.send(Message(TOPIC, str(seq).encode()), queue=queue)
        wait_until(lambda: len({(q, s) for q, s, *_ in log}) == 10, 30, what="every message consumed")
        queue0 = [(seq, attempt) for q, seq, attempt, _ in log if q == 0]
        assert queue0 == [(0, 1), (1, 1), (1, 2), (1, 3), (2, 1), (3, 1), (4, 1)]
        times = {(q, seq, attempt): t for q, seq, attempt, t in log}
        # RocketMQ's suspendCurrentQueueTimeMillis (1000 ms) between attempts, nothing overtaking.
        assert times[(0, 1, 2)] - times[(0, 1, 1)] >= 0.9
        assert times[(0, 1, 3)] - times[(0, 1, 2)] >= 0.9
        assert times[(0, 2, 1)] > times[(0, 1, 3)]
        # The other queue did not wait for queue 0.
        assert max(t for q, _, _, t in log if q == 1) < times[(0, 1, 2)]
        assert committed_while_suspended[0] is not None and committed_while_suspended[0] <= 1
        assert consumer.sent_back == 0 and consumer._orderly.suspended == 2
        with Admin(config=cfg) as admin:
            info = admin.broker_runtime_info(consumer._endpoint(queues[0]))
        assert info["sentBackToRetry"] == 0 and info["sentToDeadLetters"] == 0
        wait_until(lambda: reader.committed_offset(queues[0]) == 5, 10, what="queue 0 committed to its end")
    finally:
        consumer.shutdown()
        reader.shutdown()


def test_past_max_reconsume_times_a_batch_goes_to_the_dead_letter_topic(start_cluster):
    cfg = ordered_cluster(start_cluster)
    seen: list = []

    def listener(messages, context):
        seen.extend(m.body for m in messages)
        return messages[0].body != b"poison"  # False: suspend

    consumer = orderly_consumer(cfg, listener, batch=1, suspend_current_queue_time_ms=50, max_reconsume_times=2)
    try:
        queue = sorted(consumer.queues(TOPIC))[0]
        with Producer("OrderedProducer", config=cfg) as producer:
            for body in (b"poison", b"after"):
                producer.send(Message(TOPIC, body), queue=queue)
        wait_until(lambda: b"after" in seen, 20, what="the queue moving past the poison message")
        assert seen == [b"poison"] * 3 + [b"after"]
        with PullConsumer("DlqReader", config=cfg) as reader:
            def dead_letters():
                try:
                    return [m.body for mq in reader.queues("%DLQ%OrderedGroup") for m in reader.pull(mq, 0).messages]
                except Exception:
                    return []
            assert wait_until(dead_letters, 20, what="the dead-letter topic") == [b"poison"]
    finally:
        consumer.shutdown()


def test_per_key_order_holds_when_a_second_consumer_joins(start_cluster):
    cfg = ordered_cluster(start_cluster)
    shared: list = []
    first_recorder = Recorder("first", work_s=0.002, out=shared)
    second_recorder = Recorder("second", work_s=0.002, out=shared)
    second_recorder.lock = first_recorder.lock  # one log, one lock
    first = orderly_consumer(cfg, first_recorder)
    second = None
    total = 120
    try:
        sender = threading.Thread(target=send_ordered, args=(cfg, range(total)))
        sender.start()
        wait_until(lambda: first_recorder.distinct() >= 150, 30, what="the first member consuming")
        second = orderly_consumer(cfg, second_recorder, holding=None)
        wait_until(lambda: len(first.assigned_queues()) == 2 and len(second.assigned_queues()) == 2, 30,
                   what="two members with two queues each")
        sender.join(60)
        wait_until(lambda: first_recorder.distinct() == total * len(KEYS), 60, what="every message consumed")
        with first_recorder.lock:
            deliveries = sorted(shared, key=lambda d: d[4])  # by the start of their batch
        assert_per_key_order([(key, seq) for key, seq, *_ in deliveries], total)
        assert {name for *_, name, _, _, _ in deliveries} == {"first", "second"}
        # One consumer per queue at a time: on each queue, one member's batches never overlap the other's.
        by_queue = collections.defaultdict(list)
        for _, _, name, queue, started, ended in deliveries:
            by_queue[queue].append((started, ended, name))
        for spans in by_queue.values():
            spans.sort()
            for (s1, e1, n1), (s2, _, n2) in zip(spans, spans[1:]):
                assert n1 == n2 or s2 >= e1, "two members consumed one queue at once"
    finally:
        first.shutdown()
        if second is not None:
            second.shutdown()


# ------------------------------------------------------------------ a member killed

KILL_BROKER = {"rebalance_lock_max_live_ms": 3000, "client_expiry_ms": 4000, "client_scan_interval_ms": 500}
KILL_CLIENT = dict(rebalance_lock_interval_ms=500, rebalance_lock_max_live_ms=2000)


def consume_in_child(cfg, path: str) -> None:
    """A member in a process of its own: writes ``t key seq`` per delivery, then ``ready``."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def listener(messages, context):
        started = time.monotonic()
        time.sleep(0.002 * len(messages))
        lines = "".join(f"{started} {key} {seq}\n" for key, seq in map(decode, messages))
        os.write(fd, lines.encode())  # before SUCCESS: whatever is committed is on record
        return ConsumeOrderlyStatus.SUCCESS

    consumer = orderly_consumer(cfg, listener, holding=None)
    os.write(fd, b"ready\n")
    threading.Event().wait()  # until SIGKILLed
    consumer.shutdown()


def _child_deliveries(path: str) -> list:
    with open(path) as f:
        lines = [line.split() for line in f.read().splitlines() if line != "ready"]
    return [(float(t), key, int(seq)) for t, key, seq in lines]


def test_per_key_order_holds_when_a_member_is_killed(start_cluster, tmp_path):
    cfg = ordered_cluster(start_cluster, KILL_BROKER, **KILL_CLIENT)
    path = str(tmp_path / "child.log")
    child = multiprocessing.get_context("spawn").Process(target=consume_in_child, args=(cfg, path), daemon=True)
    child.start()
    survivor = None
    try:
        wait_until(lambda: os.path.exists(path) and "ready" in open(path).read(), 60, what="the child member")
        recorder = Recorder("survivor", work_s=0.002)
        survivor = orderly_consumer(cfg, recorder, holding=2)
        half = 60
        send_ordered(cfg, range(half))
        wait_until(lambda: len(_child_deliveries(path)) >= 40, 30, what="the child consuming")
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
        send_ordered(cfg, range(half, 2 * half))

        def everything():
            seen = {(key, seq) for _, key, seq in _child_deliveries(path)} | set(recorder.pairs())
            return len(seen) == 2 * half * len(KEYS)
        wait_until(everything, 60, what="every message consumed after the kill")
        assert survivor.assigned_queues() == set(survivor.queues(TOPIC))
        with recorder.lock:
            mine = [(started, key, seq) for key, seq, _, _, started, _ in recorder.deliveries]
        merged = sorted(_child_deliveries(path) + mine)  # one machine: one monotonic clock
        assert_per_key_order([(key, seq) for _, key, seq in merged], 2 * half)
        assert recorder.overlaps == 0
    finally:
        if child.is_alive():
            child.kill()
        if survivor is not None:
            survivor.shutdown()
