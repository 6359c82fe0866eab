"""The producer's latency fault tolerance against real processes: two masters, one stopped or slow.

A SIGSTOPped broker keeps its TCP connections (the kernel answers for it) but never replies:
each attempt on it costs one request time-out, then the send goes on to the other broker, and
the producer avoids the stopped one for the isolation time of SPEC §2's table. Assertions are
on where messages land and on the producer's fault state, not on how long sends took.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest

from rocketbox.cluster import Admin, Message, MessageQueue, Producer, PullConsumer, SendStatus
from rocketbox.cluster.client.fault_tolerance import not_available_duration_ms
from rocketbox.cluster.errors import BrokerUnreachable
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config

TOPIC = "FaultTolerant"
ISOLATION_MS = 4000  # a failed broker's avoidance in these tests (RocketMQ: 600 s)
DEFAULT_DURATIONS_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)


@contextlib.contextmanager
def stopped(cluster, name: str):
    """SIGSTOP ``name``'s process for the block; SIGCONT whatever happens."""
    pid = cluster.kill(name, signal.SIGSTOP)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGCONT)


def two_masters(start_cluster, **overrides):
    # The watchdog would SIGKILL a broker silent for 30 s; these tests stop one on purpose.
    cluster = start_cluster(brokers=2, heartbeat_timeout_s=300, **overrides)
    with Admin(config=client_config(cluster)) as admin:
        admin.create_topic(TOPIC, 2)
    return cluster


def fault_config(cluster, **changes):
    base = dict(request_timeout_ms=1000, send_timeout_ms=30_000, send_latency_fault_enabled=True,
                send_not_available_duration_ms=DEFAULT_DURATIONS_MS[:-1] + (ISOLATION_MS,))
    base.update(changes)
    return client_config(cluster, **base)


def send(producer: Producer, kind: str, label: str):
    """One send of ``kind``; returns (its SendResult, the UNIQ_KEYs it carried)."""
    if kind == "send_batch":
        batch = [Message(TOPIC, f"{label}-{j}".encode()) for j in range(3)]
        result = producer.send_batch(batch)
        return result, [m.properties["UNIQ_KEY"] for m in batch]
    if kind == "send_async":
        result = producer.send_async(Message(TOPIC, label.encode())).result(30)
    else:
        result = producer.send(Message(TOPIC, label.encode()))
    return result, [result.msg_id]


def record_updates(producer: Producer, monkeypatch) -> list:
    """Every (broker, isolation) the producer records from now on."""
    calls = []
    update = producer.faults.update

    def spy(broker, latency_ms, isolation=False):
        calls.append((broker, isolation))
        return update(broker, latency_ms, isolation)
    monkeypatch.setattr(producer.faults, "update", spy)
    return calls


@pytest.mark.parametrize("kind", ["send", "send_batch", "send_async"])
def test_a_stopped_broker_is_retried_around_then_avoided_then_used_again(start_cluster, monkeypatch, kind):
    cluster = two_masters(start_cluster)
    acknowledged = []
    with Producer("PG", config=fault_config(cluster)) as producer:
        landed = set()
        for i in range(8):
            result, ids = send(producer, kind, f"warm-{i}")
            landed.add(result.queue.broker_name)
            acknowledged += ids
        assert landed == {"broker-a", "broker-b"}  # round-robin over both
        assert not any(s["isolated"] or not s["available"] for s in producer.fault_state().values())

        with stopped(cluster, "broker-b"):
            calls = record_updates(producer, monkeypatch)
            # Round-robin reaches broker-b within one pass over the 4 queues: that attempt times
            # out, the send is retried on broker-a and succeeds.
            for i in range(4):
                result, ids = send(producer, kind, f"stopped-{i}")
                assert result.status == SendStatus.SEND_OK
                assert result.queue.broker_name == "broker-a"
                acknowledged += ids
            assert ("broker-b", True) in calls
            state = producer.fault_state()["broker-b"]
            assert state["isolated"] and not state["available"]
            assert producer.send_failures == 0

            # From now on sends go straight to broker-a: no attempt on broker-b at all.
            calls.clear()
            for i in range(10):
                result, ids = send(producer, kind, f"avoided-{i}")
                assert result.queue.broker_name == "broker-a"
                acknowledged += ids
            assert {broker for broker, _ in calls} == {"broker-a"}, calls
            assert not producer.fault_state()["broker-b"]["available"]

        # Running again; once its avoidance ends, round-robin takes broker-b again.
        def lands_on_b():
            result, ids = send(producer, kind, "after")
            acknowledged.extend(ids)
            return result.queue.broker_name == "broker-b"
        wait_until(lands_on_b, 60, interval_s=0.05, what="a send on broker-b after its avoidance")
        assert not producer.fault_state()["broker-b"]["isolated"]

    # Every acknowledged message is stored (the timed-out attempt's copy on broker-b may be too).
    with PullConsumer("CG", config=client_config(cluster)) as consumer:
        wait_until(lambda: {m.msg_id for m in read_topic(consumer, TOPIC)} >= set(acknowledged), 20,
                   what="every acknowledged message readable")


def test_a_slow_broker_is_avoided_for_the_tables_time(start_cluster):
    # A broker stopped this long answers the sends that waited SYSTEM_BUSY once it runs again
    # (fast failure, tests/fault/test_overload.py); here the slow answer itself is what is measured.
    cluster = two_masters(start_cluster, broker_overrides={"broker_fast_failure_enabled": False})
    # RocketMQ's own table; the request time-out is long enough for the slow answer to arrive.
    cfg = client_config(cluster, request_timeout_ms=10_000, send_latency_fault_enabled=True)
    with Producer("PG", config=cfg) as producer:
        producer.send(Message(TOPIC, b"warm"), queue=MessageQueue(TOPIC, "broker-b", 0))
        assert producer.fault_state()["broker-b"]["available"]

        outcome = {}

        def slow_send():
            outcome["result"] = producer.send(Message(TOPIC, b"slow"), queue=MessageQueue(TOPIC, "broker-b", 0))
        with stopped(cluster, "broker-b"):
            sender = threading.Thread(target=slow_send)
            sender.start()
            time.sleep(1.2)  # the slowness itself: broker-b answers once it runs again
        sender.join(15)
        assert outcome["result"].status == SendStatus.SEND_OK
        state = producer.fault_state()["broker-b"]
        assert state["latency_ms"] >= 550 and not state["isolated"]  # slow, not failed
        duration_ms = not_available_duration_ms(state["latency_ms"])
        assert duration_ms >= 30_000
        assert duration_ms - 10_000 < state["unavailable_for_ms"] <= duration_ms

        for i in range(8):
            assert producer.send(Message(TOPIC, b"after-%d" % i)).queue.broker_name == "broker-a"

        # The avoidance ends with the table's time: move the producer's clock past it.
        real_clock = producer.faults.clock
        producer.faults.clock = lambda: real_clock() + duration_ms / 1000
        assert producer.fault_state()["broker-b"]["available"]
        brokers = {producer.send(Message(TOPIC, b"later-%d" % i)).queue.broker_name for i in range(4)}
        assert brokers == {"broker-a", "broker-b"}


def test_stopped_brokers_cost_a_bounded_time_never_a_hang(start_cluster):
    cluster = two_masters(start_cluster)
    # Fault tolerance off (RocketMQ's default): a retry still goes to another broker.
    cfg = client_config(cluster, request_timeout_ms=800, send_timeout_ms=5000)
    with Producer("PG", config=cfg) as producer:
        for i in range(4):
            producer.send(Message(TOPIC, b"warm-%d" % i))
        with stopped(cluster, "broker-b"):
            for i in range(4):
                assert producer.send(Message(TOPIC, b"one-stopped-%d" % i)).queue.broker_name == "broker-a"
            assert producer.fault_state() == {}
            with stopped(cluster, "broker-a"):
                # Every attempt fails: the error comes back to the caller (sync, batch and async alike).
                with pytest.raises(BrokerUnreachable):
                    producer.send(Message(TOPIC, b"both-stopped"))
                with pytest.raises(BrokerUnreachable):
                    producer.send_batch([Message(TOPIC, b"both-stopped-batch")], timeout_ms=1500)
                future = producer.send_async(Message(TOPIC, b"both-stopped-async"), timeout_ms=1500)
                with pytest.raises(BrokerUnreachable):
                    future.result(30)
        assert producer.send(Message(TOPIC, b"running-again")).status == SendStatus.SEND_OK
