"""Allocation strategies (RocketMQ's AllocateMessageQueue*): each queue owned once, the same
answer whatever order members list the group in, and consistent hashing moving few queues."""

from __future__ import annotations

import random

import pytest

from rocketbox.cluster.client.allocation import (STRATEGIES, HashRing, allocate_average, allocate_average_by_circle,
                                       allocate_consistent_hash, by_config, consistent_hash, queue_hash_key,
                                       ring_hash, strategy)
from rocketbox.cluster.client.message import MessageQueue

SHARED = [allocate_average, allocate_average_by_circle, allocate_consistent_hash, consistent_hash(3)]


def _queues(n: int, brokers=("broker-a", "broker-b")) -> list[MessageQueue]:
    return [MessageQueue("T", brokers[i % len(brokers)], i // len(brokers)) for i in range(n)]


def _members(n: int) -> list[str]:
    return [f"127.0.0.1@{1000 + i}@DEFAULT@0" for i in range(n)]


@pytest.mark.parametrize("allocate", SHARED, ids=lambda f: getattr(f, "__name__", "consistent_hash_3"))
def test_every_queue_owned_by_exactly_one_member_whatever_the_member_order(allocate):
    rng = random.Random(7)
    for n_queues in range(0, 17):
        for n_members in range(1, 7):
            queues, members = _queues(n_queues), _members(n_members)
            shares = {m: allocate(queues, members, m) for m in members}
            flat = [q for share in shares.values() for q in share]
            if allocate is allocate_average and n_queues < n_members:
                assert len(set(flat)) == len(flat) == n_queues  # RocketMQ's paging: one queue each, some none
            assert sorted(flat) == sorted(queues), (n_queues, n_members)
            shuffled_members, shuffled_queues = members[:], queues[:]
            rng.shuffle(shuffled_members)
            rng.shuffle(shuffled_queues)
            for m in members:
                assert allocate(shuffled_queues, shuffled_members, m) == shares[m]
            assert allocate(queues, members, "127.0.0.1@9@stranger@0") == []


def test_average_by_circle_deals_like_cards():
    members = ["a", "b", "c"]
    assert [allocate_average_by_circle(range(8), members, m) for m in members] == [[0, 3, 6], [1, 4, 7], [2, 5]]
    assert allocate_average_by_circle(range(2), members, "c") == []


def test_consistent_hash_ring_is_rocketmqs():
    # ConsistentHashRouter's MD5Hash: the digest's first four bytes, big-endian, as a non-negative long.
    assert ring_hash("a") == 0x0CC175B9
    assert queue_hash_key(MessageQueue("T", "broker-a", 3)) == "MessageQueue [topic=T, brokerName=broker-a, queueId=3]"
    ring = HashRing(["x"], 10)
    assert ring.route("anything") == "x"
    assert HashRing([], 10).route("anything") is None
    with pytest.raises(ValueError):
        consistent_hash(-1)


def test_consistent_hash_moves_only_what_the_new_member_takes():
    queues = _queues(64)
    before_members = _members(4)
    after_members = before_members + ["127.0.0.1@2000@joiner@0"]
    before = {q: m for m in before_members for q in allocate_consistent_hash(queues, before_members, m)}
    after = {q: m for m in after_members for q in allocate_consistent_hash(queues, after_members, m)}
    moved = [q for q in queues if before[q] != after[q]]
    assert moved, "the new member got nothing"
    assert all(after[q] == "127.0.0.1@2000@joiner@0" for q in moved), "a queue moved between old members"
    assert len(moved) <= len(queues) // 2
    # Paging, by contrast, reshuffles most queues between old members too.
    avg_before = {q: m for m in before_members for q in allocate_average(queues, before_members, m)}
    avg_after = {q: m for m in after_members for q in allocate_average(queues, after_members, m)}
    assert sum(avg_before[q] != avg_after[q] for q in queues) > len(moved)


def test_by_config_is_a_fixed_list_of_the_queues_that_exist():
    queues = _queues(4)
    mine = by_config([queues[1], queues[3], MessageQueue("T", "broker-gone", 0)])
    assert mine(queues, ["a", "b"], "a") == [queues[1], queues[3]]
    assert mine(list(reversed(queues)), ["b", "a"], "a") == [queues[1], queues[3]]
    assert mine(queues, ["b"], "a") == []
    other = by_config([queues[0], queues[2]])
    assert sorted(mine(queues, ["a", "b"], "a") + other(queues, ["a", "b"], "b")) == sorted(queues)


def test_strategies_by_rocketmq_name():
    assert set(STRATEGIES) == {"AVG", "AVG_BY_CIRCLE", "CONSISTENT_HASH"}
    assert strategy("avg_by_circle") is allocate_average_by_circle
    assert strategy(allocate_average) is allocate_average
    with pytest.raises(ValueError, match="CONFIG needs its queue list"):
        strategy("CONFIG")
