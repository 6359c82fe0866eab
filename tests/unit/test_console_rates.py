"""The console's per-queue rates and its one-time flashes, in process with a clock the test moves:
a queue seeded with its offset of a window ago has its rate at the first reading,
the rate spans the latest reading a window or more old, and a flash is shown once, then forgotten."""

from __future__ import annotations

from rocketbox.cluster.console.topics import QueueRates
from rocketbox.cluster.console.web import Flashes


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _row(max_offset: int) -> dict:
    return {"topic": "T", "broker": "b", "queueId": 0, "maxOffset": max_offset}


def test_a_seeded_queue_has_its_rate_at_the_first_reading_and_keeps_a_window_of_readings():
    clock = Clock()
    rates = QueueRates(window_s=30.0, clock=clock)
    first = _row(60)
    assert rates.unseen([first]) == [first]
    rates.observe([first], {("T", "b", 0): 0})   # 60 stored in the last 30 s
    assert first["tps"] == 2.0 and rates.unseen([first]) == []
    clock.now += 2
    second = _row(64)
    rates.observe([second], {("T", "b", 0): 999})   # a seed counts only for a queue never read
    assert second["tps"] == round(64 / 32, 2)   # since the seed: still the latest reading 30 s or more old
    clock.now += 29
    third = _row(70)
    rates.observe([third])
    assert third["tps"] == round((70 - 60) / 31, 2)   # the seed left: the first reading is 31 s old


def test_an_unseeded_queue_waits_for_a_second_reading_a_second_later():
    clock = Clock()
    rates = QueueRates(window_s=30.0, clock=clock)
    rows = [_row(5)]
    rates.observe(rows)
    assert rows[0]["tps"] is None
    clock.now += 0.5
    rates.observe(rows := [_row(6)])
    assert rows[0]["tps"] is None
    clock.now += 1.5
    rates.observe(rows := [_row(9)])
    assert rows[0]["tps"] == 2.0


def test_a_flash_is_taken_once_and_is_forgotten_when_old_or_pushed_out():
    clock = Clock()
    flashes = Flashes(limit=2, ttl_s=60.0, clock=clock)
    token = flashes.put({"notice": "sent"})
    assert flashes.take(token) == {"notice": "sent"} and flashes.take(token) == {}
    assert flashes.take(None) == {} and flashes.take("forged") == {}
    old = flashes.put({"notice": "old"})
    clock.now += 61
    assert flashes.take(old) == {}
    tokens = [flashes.put({"n": n}) for n in range(3)]
    assert flashes.take(tokens[0]) == {} and flashes.take(tokens[2]) == {"n": 2}
