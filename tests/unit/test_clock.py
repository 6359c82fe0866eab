"""cluster/clock.py: the system clock reads real time; the manual clock moves only when advanced."""

import threading

import pytest

from rocketbox.cluster.clock import SYSTEM_CLOCK, ManualClock


def test_system_clock_reads_wall_and_monotonic_time():
    import time
    before = time.time_ns() // 1_000_000
    now = SYSTEM_CLOCK.now_ms()
    assert before <= now <= time.time_ns() // 1_000_000
    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first


def test_manual_clock_moves_only_when_advanced():
    clock = ManualClock(now_ms=1_000, monotonic=5.0)
    assert (clock.now_ms(), clock.monotonic()) == (1_000, 5.0)
    clock.advance(1.5)
    assert (clock.now_ms(), clock.monotonic()) == (2_500, 6.5)
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_manual_sleep_wakes_when_time_reaches_it():
    clock = ManualClock()
    woke = threading.Event()
    sleeper = threading.Thread(target=lambda: (clock.sleep(10), woke.set()), daemon=True)
    sleeper.start()
    clock.advance(9)
    assert not woke.wait(0.2)
    clock.advance(1)
    assert woke.wait(10)
    clock.sleep(0)  # a non-positive sleep returns at once


def test_a_producer_times_its_sends_and_fault_windows_by_its_clock():
    """The client's deadlines and latency-fault windows follow the clock it is given, so a test
    can move time instead of waiting for it (no broker needed: nothing is sent)."""
    from rocketbox.cluster.client.producer import Producer
    from rocketbox.cluster.config import ClientConfig

    clock = ManualClock()
    cfg = ClientConfig(namesrv_endpoints=("tcp://127.0.0.1:9",), request_timeout_ms=3000, send_timeout_ms=5000,
                       send_latency_fault_enabled=True)
    producer = Producer("ClockPG", config=cfg, clock=clock)
    try:
        _, deadline = producer._send_deadline(None)
        assert producer._attempt_timeout_ms(deadline) == 3000
        clock.advance(4.5)
        assert producer._attempt_timeout_ms(deadline) == 500
        clock.advance(1)
        assert producer._attempt_timeout_ms(deadline) <= 0
        producer._record("broker-x", clock.monotonic(), failed=True)   # isolated: a failed attempt
        assert not producer.faults.is_available("broker-x")
        clock.advance(producer.faults.unavailable_for_ms("broker-x") / 1000 + 0.001)
        assert producer.faults.is_available("broker-x")
    finally:
        producer.shutdown()
