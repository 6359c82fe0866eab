"""The broker's queue locks for orderly consumers (broker/locks.py), on an injected clock."""

from __future__ import annotations

import json

from rocketbox.cluster.broker.locks import LockProcessor, RebalanceLockManager
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import Command

Q0 = ("T", "broker-a", 0)
Q1 = ("T", "broker-a", 1)


class Clock:
    def __init__(self):
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def test_a_held_lock_is_refused_to_others_until_it_expires_without_renewal():
    clock = Clock()
    locks = RebalanceLockManager(60_000, clock)
    assert locks.try_lock_batch("G", [Q0, Q1], "A") == {Q0, Q1}
    assert locks.try_lock_batch("G", [Q0, Q1], "B") == set()
    assert locks.try_lock_batch("OtherGroup", [Q0], "B") == {Q0}, "groups lock independently"

    clock.ms += 40_000
    assert locks.try_lock_batch("G", [Q0], "A") == {Q0}  # A renews Q0 only
    clock.ms += 20_001  # Q1 unrenewed for 60,001 ms; Q0 for 20,001 ms
    assert locks.holder("G", Q1) is None and locks.holder("G", Q0) == "A"
    assert locks.try_lock_batch("G", [Q0, Q1], "B") == {Q1}

    assert locks.try_lock_batch("G", [Q0], "A") == {Q0}
    clock.ms += 60_000  # exactly the max live time since A's renewal: still A's
    assert locks.try_lock_batch("G", [Q0], "B") == set()
    clock.ms += 1
    assert locks.try_lock_batch("G", [Q0], "B") == {Q0}


def test_unlock_frees_only_the_callers_locks():
    locks = RebalanceLockManager(60_000, Clock())
    locks.try_lock_batch("G", [Q0], "A")
    locks.try_lock_batch("G", [Q1], "B")
    locks.unlock_batch("G", [Q0, Q1], "A")
    assert locks.holder("G", Q0) is None and locks.holder("G", Q1) == "B"
    assert locks.try_lock_batch("G", [Q0, Q1], "C") == {Q0}


def test_a_client_that_leaves_releases_its_locks():
    locks = RebalanceLockManager(60_000, Clock())
    locks.try_lock_batch("G", [Q0, Q1], "A")
    locks.try_lock_batch("H", [Q0], "A")
    assert locks.release_client("A", "G") == 2
    assert locks.holder("H", Q0) == "A"
    assert locks.release_client("A") == 1
    assert locks.table == {}


def test_the_handlers_speak_rocketmqs_lock_batch_bodies():
    processor = LockProcessor(60_000)
    mq_set = [{"topic": "T", "brokerName": "broker-a", "queueId": 0},
              {"topic": "T", "brokerName": "broker-a", "queueId": 1}]

    def request(code, client_id, mqs):
        body = json.dumps({"consumerGroup": "G", "clientId": client_id, "mqSet": mqs}).encode()
        return Command(code, {}, body)

    response = processor.on_lock_batch(request(RequestCode.LOCK_BATCH_MQ, "A", mq_set[:1]))
    assert response.code == ResponseCode.SUCCESS
    assert json.loads(response.body) == {"lockOKMQSet": mq_set[:1]}
    response = processor.on_lock_batch(request(RequestCode.LOCK_BATCH_MQ, "B", mq_set))
    assert json.loads(response.body) == {"lockOKMQSet": mq_set[1:]}
    assert processor.on_unlock_batch(request(RequestCode.UNLOCK_BATCH_MQ, "A", mq_set)).code == ResponseCode.SUCCESS
    assert processor.manager.holder("G", ("T", "broker-a", 0)) is None
    refused = processor.on_lock_batch(Command(RequestCode.LOCK_BATCH_MQ, {}, b'{"consumerGroup": "G"}'))
    assert refused.code == ResponseCode.SYSTEM_ERROR and "clientId" in refused.remark
