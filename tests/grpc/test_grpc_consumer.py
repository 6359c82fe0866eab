"""RocketMQ 5's Python client consuming through the proxy (pop consumption in the broker):
SimpleConsumer receive/ack, redelivery after the invisible time, change of invisible duration,
dead letters after the group's max attempts, TAG and SQL92 filters, and a PushConsumer."""

from __future__ import annotations

import collections

import pytest

from rocketbox.cluster import Admin, Message, Producer
from tests.conftest import client_config
from tests.grpc.grpc_client import received, run_grpc


def _fill(cluster, admin, topic: str, count: int, *, queues: int = 2, tags=None, props=None) -> list[str]:
    """Create ``topic`` and send ``count`` messages through the native door; their ids."""
    admin.create_topic(topic, queues)
    ids = []
    with Producer("GrpcFillPG", config=client_config(cluster)) as producer:
        for i in range(count):
            message = Message(topic, f"{topic}-{i}".encode(), tags=tags(i) if tags else None,
                              properties=props(i) if props else {})
            ids.append(producer.send(message).msg_id)
    return ids


def _simple(cluster, tmp_path, name: str, **spec) -> list[dict]:
    return received(run_grpc("simple", {"endpoint": cluster.proxy_endpoint, **spec}, tmp_path / name))


@pytest.mark.timeout(240)
def test_each_message_is_received_once_when_acked(grpc_cluster, admin, tmp_path):
    ids = _fill(grpc_cluster, admin, "GrpcAcked", 40, queues=4)
    # One more than was sent: the receive loop runs out its window, and nothing acked comes back.
    got = _simple(grpc_cluster, tmp_path, "c", group="GrpcAckedCG", topic="GrpcAcked", expect=41, max_s=10,
                  invisible_s=2, batch=7)
    assert sorted(r["message_id"] for r in got) == sorted(ids)
    assert all(r["attempt"] == 1 and r["topic"] == "GrpcAcked" for r in got)


@pytest.mark.timeout(240)
def test_an_unacked_message_comes_back_after_its_invisible_time_with_the_next_attempt(grpc_cluster, admin,
                                                                                       tmp_path):
    ids = _fill(grpc_cluster, admin, "GrpcRedeliver", 3)
    got = _simple(grpc_cluster, tmp_path, "c", group="GrpcRedeliverCG", topic="GrpcRedeliver", expect=9, max_s=60,
                  invisible_s=2, ack_on_attempt=3)
    deliveries = collections.defaultdict(list)
    for r in got:
        deliveries[r["message_id"]].append(r)
    assert sorted(deliveries) == sorted(ids)
    for message_id, seen in deliveries.items():
        assert [r["attempt"] for r in seen] == [1, 2, 3]
        # Redelivered from the pop retry topic, and presented with its own topic and id.
        assert all(r["topic"] == "GrpcRedeliver" and r["body"] == seen[0]["body"] for r in seen)
        for earlier, later in zip(seen, seen[1:]):   # invisible means invisible: never back early
            assert later["at"] - earlier["at"] >= 2 - 0.25, seen


@pytest.mark.timeout(240)
def test_a_changed_invisible_duration_brings_the_message_back_then(grpc_cluster, admin, tmp_path):
    ids = _fill(grpc_cluster, admin, "GrpcChange", 2)
    # Received invisible for 5 minutes, changed to 1 s: back within the test's minute, attempt 2.
    lines = run_grpc("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcChangeCG",
                                "topic": "GrpcChange", "expect": 4, "max_s": 60, "invisible_s": 300,
                                "change_invisible_s": 1, "ack_on_attempt": 2}, tmp_path / "c")
    assert sorted(line["changed"] for line in lines if "changed" in line) == sorted(ids), lines
    got = received(lines)
    assert sorted((r["message_id"], r["attempt"]) for r in got) == sorted((i, a) for i in ids for a in (1, 2))
    assert sorted(line["acked"] for line in lines if "acked" in line) == sorted(ids)


@pytest.mark.timeout(240)
def test_after_the_groups_max_attempts_a_message_goes_to_the_dead_letter_queue(grpc_cluster, admin, tmp_path):
    ids = _fill(grpc_cluster, admin, "GrpcDead", 2)
    admin.update_subscription_group("GrpcDeadCG", retryMaxTimes=1)   # 2 deliveries, then %DLQ%GrpcDeadCG
    got = _simple(grpc_cluster, tmp_path, "c", group="GrpcDeadCG", topic="GrpcDead", expect=5, max_s=12,
                  invisible_s=1, ack_on_attempt=0)
    assert sorted((r["message_id"], r["attempt"]) for r in got) == sorted((i, a) for i in ids for a in (1, 2))
    letters = admin.dead_letters("GrpcDeadCG")
    assert sorted(m.msg_id for m in letters) == sorted(ids)


@pytest.mark.timeout(240)
def test_tag_and_sql92_filters_pick_their_messages(grpc_cluster, admin, tmp_path):
    tags = ["TagA", "TagB", "TagC"]
    ids = _fill(grpc_cluster, admin, "GrpcFiltered", 30, tags=lambda i: tags[i % 3],
                props=lambda i: {"n": str(i)})
    by_tag = _simple(grpc_cluster, tmp_path, "tag", group="GrpcTagCG", topic="GrpcFiltered",
                     expression="TagA||TagC", expect=20, max_s=60)
    assert sorted(r["message_id"] for r in by_tag) == sorted(ids[i] for i in range(30) if i % 3 != 1)
    by_sql = _simple(grpc_cluster, tmp_path, "sql", group="GrpcSqlCG", topic="GrpcFiltered",
                     sql="n >= 20 AND TAGS = 'TagB'", expect=3, max_s=60)
    assert sorted(r["message_id"] for r in by_sql) == sorted(ids[i] for i in (22, 25, 28))


@pytest.mark.timeout(240)
def test_a_push_consumer_gets_every_message_and_a_failed_one_again(grpc_cluster, admin, tmp_path):
    ids = _fill(grpc_cluster, admin, "GrpcPush", 12, queues=4)
    lines = run_grpc("push", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcPushCG", "topic": "GrpcPush",
                              "expect": 12, "fail_first": 1, "max_s": 90}, tmp_path / "push")
    consumed = [line["consumed"] for line in lines if "consumed" in line]
    successes = [c["message_id"] for c in consumed if c["result"] == "SUCCESS"]
    assert sorted(set(successes)) == sorted(ids), lines[-5:]
    # Each first delivery failed (nack: ChangeInvisibleDuration by the back-off), then came back as attempt 2.
    attempts = collections.defaultdict(list)
    for c in consumed:
        attempts[c["message_id"]].append(c["attempt"])
    assert all(seen[:2] == [1, 2] for seen in attempts.values()), attempts


@pytest.mark.timeout(240)
def test_a_push_consumers_slow_message_is_kept_invisible_until_it_is_acked(start_cluster, tmp_path):
    """Its receives ask the proxy to renew (auto_renew): a listener taking 5 s, with messages held
    for 2 s at a time, still sees each message once (without renewals each would come back every
    2 s, its late ack refused). Long polling of 3 s brings any redelivery within the window."""
    cluster = start_cluster(proxy=True, proxy_overrides={"default_invisible_ms": 2000, "long_polling_max_ms": 3000})
    with Admin(cluster.namesrv) as admin:
        ids = _fill(cluster, admin, "GrpcSlow", 4)
    lines = run_grpc("push", {"endpoint": cluster.proxy_endpoint, "group": "GrpcSlowCG", "topic": "GrpcSlow",
                              "expect": 4, "consume_s": 5, "max_s": 90, "linger_s": 6}, tmp_path / "push")
    consumed = [line["consumed"] for line in lines if "consumed" in line]
    assert sorted(c["message_id"] for c in consumed) == sorted(ids), consumed
    assert all(c["attempt"] == 1 and c["result"] == "SUCCESS" for c in consumed)
