"""cluster/clock.py: the system clock reads real time; the manual clock moves only when advanced."""

import threading

import pytest

from cluster.clock import SYSTEM_CLOCK, ManualClock


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
