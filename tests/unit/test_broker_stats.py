"""The broker's stats windows (RocketMQ's StatsItem behind VIEW_BROKER_STATS_DATA, mqadmin statsAll)
on made-up sample times, and the request answered by a broker service run in process."""

from __future__ import annotations

import json

from rocketbox.cluster.broker.stats import BYTES, MESSAGES, CounterWindows, KeyedStats, Rate
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import Command
from tests.in_process import InProcessBroker

TOPIC = "InProcess"


def test_each_window_counts_growth_since_its_start_and_ends_at_the_latest_sample():
    windows = CounterWindows()
    # 10 messages (1 KiB) a second in 2 puts, for two hours; then one more second.
    for second in range(2 * 3600 + 1):
        windows.sample(float(second), (10 * second, 1024 * second, 2 * second))
    stats = windows.stats(MESSAGES)
    assert stats["statsMinute"] == {"sum": 600, "tps": 10.0, "avgpt": 5.0}
    assert stats["statsHour"] == {"sum": 36_000, "tps": 10.0, "avgpt": 5.0}
    # The day window has seen only two hours: all of them.
    assert stats["statsDay"] == {"sum": 72_000, "tps": 10.0, "avgpt": 5.0}
    assert windows.stats(BYTES)["statsMinute"]["sum"] == 60 * 1024
    # Samples are thinned: a minute of seconds, an hour of minutes, a day of ten minutes.
    assert [len(ring) for ring in windows.rings] == [61, 61, 13]


def test_a_burst_shows_in_every_window_at_once_and_leaves_the_minute_after_a_minute():
    windows = CounterWindows()
    windows.sample(0.0, (0, 0, 0))
    windows.sample(1.0, (50, 5000, 1))   # one put of 50 messages
    assert {name: s["sum"] for name, s in windows.stats(MESSAGES).items()} == \
        {"statsMinute": 50, "statsHour": 50, "statsDay": 50}
    for second in range(2, 63):
        windows.sample(float(second), (50, 5000, 1))
    stats = windows.stats(MESSAGES)
    assert stats["statsMinute"] == {"sum": 0, "tps": 0.0, "avgpt": 0.0}
    assert stats["statsHour"]["sum"] == stats["statsDay"]["sum"] == 50


def test_a_key_new_since_the_last_sample_starts_from_zero_then():
    table = KeyedStats()
    table.sample(0.0, {})
    table.sample(1.0, {("T", "G"): (30, 300, 3)})
    assert table.minute_tps(("T", "G")) == 30.0
    assert table.get(("T", "G")).stats(MESSAGES)["statsMinute"]["avgpt"] == 10.0
    assert table.minute_tps(("T", "other")) == 0.0 and table.get(("T", "other")) is None


def test_rate_keeps_its_windows():
    rate = Rate()
    for second in range(700):
        rate.sample(float(second), 3 * second)
    assert rate.tps_text() == "3.00 3.00 3.00"


def test_view_broker_stats_data_answers_puts_and_gets_and_refuses_unknown_items(tmp_path):
    broker = InProcessBroker(tmp_path / "store")
    try:
        broker.service.stats.sample()   # the zero point, as serve() takes it
        for body in (b"a", b"b", b"c"):
            assert broker.send(TOPIC, body, queue_count=1).code == ResponseCode.SUCCESS
        broker.service.stats.sample()

        def view(name: str, key: str) -> Command:
            return broker.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})

        answer = view("TOPIC_PUT_NUMS", TOPIC)
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        data = json.loads(answer.body)
        assert set(data) == {"statsMinute", "statsHour", "statsDay"}
        assert data["statsDay"]["sum"] == 3 and data["statsMinute"]["avgpt"] == 1.0   # three puts of one
        assert json.loads(view("TOPIC_PUT_SIZE", TOPIC).body)["statsMinute"]["sum"] > 3 * 60

        missing = view("GROUP_GET_NUMS", f"{TOPIC}@nobody")
        assert (missing.code, missing.remark) == \
            (ResponseCode.SYSTEM_ERROR, f"The stats <GROUP_GET_NUMS> <{TOPIC}@nobody> not exist")
        unknown = view("SNDBCK_PUT_NUMS", TOPIC)
        assert unknown.code == ResponseCode.SYSTEM_ERROR and "TOPIC_PUT_NUMS" in unknown.remark
        no_key = broker.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS"})
        assert no_key.code == ResponseCode.SYSTEM_ERROR and "statsKey" in no_key.remark
    finally:
        broker.close()
