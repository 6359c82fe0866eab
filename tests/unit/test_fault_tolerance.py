"""The producer's latency fault tolerance on a hand-driven clock: the table, expiry, queue choice."""

from __future__ import annotations

import dataclasses

import pytest

from rocketbox.cluster.client.fault_tolerance import (ISOLATION_LATENCY_MS, LATENCY_MAX_MS, NOT_AVAILABLE_DURATION_MS,
                                            LatencyFaultTolerance, not_available_duration_ms, select_round_robin)
from rocketbox.cluster.client.message import MessageQueue
from rocketbox.cluster.config import ClientConfig


class Clock:
    def __init__(self):
        self.now_s = 1000.0

    def __call__(self) -> float:
        return self.now_s

    def advance_ms(self, ms: float) -> None:
        self.now_s += ms / 1000


def queues(brokers=("broker-a", "broker-b"), per_broker=2):
    return [MessageQueue("T", b, i) for b in brokers for i in range(per_broker)]


def test_defaults_are_rocketmqs_table():
    assert LATENCY_MAX_MS == (50, 100, 550, 1000, 2000, 3000, 15000)
    assert NOT_AVAILABLE_DURATION_MS == (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
    assert ISOLATION_LATENCY_MS == 30_000
    assert ClientConfig().send_latency_fault_enabled is False  # RocketMQ's sendLatencyFaultEnable default


@pytest.mark.parametrize("latency_ms, duration_ms", [
    (0, 0), (49, 0), (50, 0), (99, 0), (100, 0), (549, 0), (549.9, 0),
    (550, 30_000), (999, 30_000), (1000, 60_000), (1999, 60_000), (2000, 120_000),
    (2999, 120_000), (3000, 180_000), (14_999, 180_000), (15_000, 600_000), (30_000, 600_000), (10**9, 600_000),
])
def test_table_boundaries(latency_ms, duration_ms):
    assert not_available_duration_ms(latency_ms) == duration_ms


def test_a_slow_answer_avoids_the_broker_until_its_time_ends():
    clock = Clock()
    faults = LatencyFaultTolerance(clock=clock)
    assert faults.update("broker-b", 600) == 30_000
    assert not faults.is_available("broker-b")
    assert faults.unavailable_for_ms("broker-b") == 30_000
    assert faults.is_available("broker-a")  # never heard of: available
    clock.advance_ms(29_999)
    assert not faults.is_available("broker-b")
    assert faults.unavailable_for_ms("broker-b") == 1
    clock.advance_ms(1)
    assert faults.is_available("broker-b")
    assert faults.snapshot() == {"broker-b": {"latency_ms": 600, "isolated": False, "available": True,
                                              "unavailable_for_ms": 0}}


def test_a_failure_counts_as_isolation_latency():
    clock = Clock()
    faults = LatencyFaultTolerance(clock=clock)
    assert faults.update("broker-b", 3, isolation=True) == 600_000
    state = faults.snapshot()["broker-b"]
    assert state == {"latency_ms": 30_000, "isolated": True, "available": False, "unavailable_for_ms": 600_000}
    clock.advance_ms(600_000)
    assert faults.is_available("broker-b")


def test_a_fast_answer_does_not_shorten_a_running_avoidance():
    clock = Clock()
    faults = LatencyFaultTolerance(clock=clock)
    faults.update("broker-b", 5, isolation=True)
    clock.advance_ms(1000)
    assert faults.update("broker-b", 2) == 0  # an answer to a request sent before the failure
    assert faults.unavailable_for_ms("broker-b") == 599_000
    assert faults.snapshot()["broker-b"]["latency_ms"] == 2
    faults.update("broker-b", 20_000)  # a longer avoidance does extend it
    assert faults.unavailable_for_ms("broker-b") == 600_000


def test_a_custom_table():
    clock = Clock()
    cfg = ClientConfig(send_latency_max_ms=(10, 100), send_not_available_duration_ms=(0, 250),
                       send_isolation_latency_ms=100)
    faults = LatencyFaultTolerance.from_config(cfg, clock)
    assert faults.update("b", 99) == 0
    assert faults.update("b", 100) == 250
    assert faults.update("c", 0, isolation=True) == 250


@pytest.mark.parametrize("changes", [
    {"send_latency_max_ms": (50, 100)},
    {"send_latency_max_ms": (), "send_not_available_duration_ms": ()},
    {"send_latency_max_ms": (100, 50), "send_not_available_duration_ms": (0, 0)},
    {"send_isolation_latency_ms": -1},
    {"send_timeout_ms": 0},
])
def test_bad_settings_are_refused(changes):
    cfg = dataclasses.replace(ClientConfig(), **changes)
    with pytest.raises(ValueError):
        cfg.validate()
    if "send_timeout_ms" not in changes:
        with pytest.raises(ValueError):
            LatencyFaultTolerance.from_config(cfg)


def test_selection_is_round_robin_while_every_broker_is_available():
    faults = LatencyFaultTolerance(clock=Clock())
    qs = queues()
    assert [faults.select(qs, start) for start in range(5)] == [qs[0], qs[1], qs[2], qs[3], qs[0]]


def test_selection_skips_an_avoided_broker_and_uses_it_again_after():
    clock = Clock()
    faults = LatencyFaultTolerance(clock=clock)
    qs = queues()
    faults.update("broker-b", 1000)
    picked = [faults.select(qs, start) for start in range(8)]
    assert {q.broker_name for q in picked} == {"broker-a"}
    assert {q.queue_id for q in picked} == {0, 1}
    clock.advance_ms(60_000)
    assert [faults.select(qs, start) for start in range(4)] == qs


def test_a_retry_avoids_the_last_broker_when_another_is_available():
    faults = LatencyFaultTolerance(clock=Clock())
    qs = queues(("broker-a", "broker-b", "broker-c"), per_broker=1)
    for start in range(6):
        assert faults.select(qs, start, avoid="broker-b").broker_name != "broker-b"
    # The last broker is still taken when it is the one available.
    faults.update("broker-a", 0, isolation=True)
    faults.update("broker-c", 0, isolation=True)
    assert faults.select(qs, 0, avoid="broker-b").broker_name == "broker-b"


def test_when_every_broker_is_avoided_the_least_bad_is_used():
    clock = Clock()
    faults = LatencyFaultTolerance(clock=clock)
    qs = queues(("broker-a", "broker-b", "broker-c"))
    faults.update("broker-a", 0, isolation=True)  # 600 s
    faults.update("broker-b", 700)                # 30 s: ends first
    faults.update("broker-c", 1500)               # 60 s
    picked = [faults.select(qs, start) for start in range(4)]
    assert {q.broker_name for q in picked} == {"broker-b"}
    assert {q.queue_id for q in picked} == {0, 1}
    # ... unless it is the broker the send just failed on.
    assert faults.select(qs, 0, avoid="broker-b").broker_name == "broker-c"
    # Ties in time go to the lower latency.
    faults2 = LatencyFaultTolerance(clock=clock)
    faults2.update("broker-a", 0, isolation=True)
    faults2.update("broker-b", 16_000)
    assert faults2.select(qs[:4], 0).broker_name == "broker-b"
    # With one broker, it is that broker, avoided or not.
    assert faults.select(queues(("broker-a",)), 1, avoid="broker-a") == MessageQueue("T", "broker-a", 1)


def test_without_fault_tolerance_a_retry_still_avoids_the_last_broker():
    qs = queues()
    assert [select_round_robin(qs, s) for s in range(4)] == qs
    assert {select_round_robin(qs, s, "broker-a").broker_name for s in range(4)} == {"broker-b"}
    assert select_round_robin(queues(("broker-a",)), 3, "broker-a") == MessageQueue("T", "broker-a", 1)
