"""RocketMQ 5's Python client producing through the proxy: normal, FIFO, delayed and transactional
messages, each checked where it landed through the native door (one store for every door)."""

from __future__ import annotations

import collections

import pytest

from rocketbox.cluster import PullConsumer
from rocketbox.cluster.testing import pull_until
from tests.conftest import client_config
from tests.grpc.grpc_client import received, run_grpc, sent


def _pull(cluster, topic: str, expected: int) -> list:
    with PullConsumer("GrpcCheckCG", config=client_config(cluster)) as consumer:
        return pull_until(consumer, topic, expected)


@pytest.mark.timeout(240)
def test_normal_messages_keep_body_tag_keys_properties_and_id(grpc_cluster, admin, tmp_path):
    admin.create_topic("GrpcNormal", 4)
    messages = [{"body": f"normal-{i}", "tag": f"Tag{i % 3}", "keys": [f"key{i}", "shared"],
                 "properties": {"n": str(i), "kind": "normal"}} for i in range(20)]
    lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcNormal",
                                 "messages": messages}, tmp_path / "p")
    receipts = sent(lines)
    assert len(receipts) == 20, lines
    stored = {m.msg_id: m for m in _pull(grpc_cluster, "GrpcNormal", 20)}
    assert len({m.queue_id for m in stored.values()}) == 4   # round-robin over every queue
    for receipt, message in zip(receipts, messages):
        got = stored[receipt["message_id"]]   # the client's id is the stored UNIQ_KEY
        assert got.body.decode() == message["body"] and got.tags == message["tag"]
        assert sorted(got.keys) == sorted(message["keys"])
        assert {k: got.properties[k] for k in ("n", "kind")} == message["properties"]
        assert got.queue_offset == receipt["offset"]
    # And back out through the proxy, as the 5.x client sees them.
    lines = run_grpc("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcNormalReader",
                                "topic": "GrpcNormal", "expect": 20, "max_s": 60}, tmp_path / "c")
    seen = {r["message_id"]: r for r in received(lines)}
    assert len(seen) == 20
    for receipt, message in zip(receipts, messages):
        got = seen[receipt["message_id"]]
        assert (got["body"], got["tag"], got["keys"]) == (message["body"], message["tag"], sorted(message["keys"]))
        assert got["properties"] == message["properties"] and got["topic"] == "GrpcNormal"
        assert got["attempt"] == 1 and not got["corrupted"]


@pytest.mark.timeout(240)
def test_fifo_messages_of_a_group_share_a_queue_and_come_back_in_order(grpc_cluster, admin, tmp_path):
    admin.create_topic("GrpcFifo", 4, message_type="FIFO")
    admin.update_subscription_group("GrpcFifoReader", consumeMessageOrderly=True)
    groups = ["order-1", "order-2", "order-3", "order-4", "order-5"]
    messages = [{"body": f"{group}:{seq}", "group": group} for seq in range(8) for group in groups]
    lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcFifo",
                                 "messages": messages}, tmp_path / "p")
    assert len(sent(lines)) == len(messages), lines
    stored = _pull(grpc_cluster, "GrpcFifo", len(messages))
    queues = collections.defaultdict(set)
    for message in stored:
        queues[message.properties["__SHARDINGKEY"]].add(message.queue_id)
    assert all(len(q) == 1 for q in queues.values()), queues
    for group in groups:   # stored in send order within the group's queue
        in_queue = sorted((m for m in stored if m.properties["__SHARDINGKEY"] == group), key=lambda m: m.queue_offset)
        assert [m.body.decode() for m in in_queue] == [f"{group}:{seq}" for seq in range(8)]
    lines = run_grpc("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcFifoReader",
                                "topic": "GrpcFifo", "expect": len(messages), "max_s": 90}, tmp_path / "c")
    got = received(lines)
    assert sorted(r["body"] for r in got) == sorted(m["body"] for m in messages)
    for group in groups:
        assert [r["body"] for r in got if r["group"] == group] == [f"{group}:{seq}" for seq in range(8)]


@pytest.mark.timeout(240)
def test_a_delayed_message_is_delivered_at_its_timestamp_not_before(grpc_cluster, admin, tmp_path):
    admin.create_topic("GrpcDelay", 2, message_type="DELAY")
    lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcDelay",
                                 "messages": [{"body": f"later-{i}", "delay_s": 3} for i in range(3)]},
                     tmp_path / "p")
    receipts = sent(lines)
    assert len(receipts) == 3, lines
    lines = run_grpc("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcDelayReader",
                                "topic": "GrpcDelay", "expect": 3, "max_s": 60}, tmp_path / "c")
    got = received(lines)
    assert sorted(r["body"] for r in got) == ["later-0", "later-1", "later-2"]
    due = {receipt["message_id"]: receipt["delivery_s"] for receipt in receipts}
    for r in got:
        assert r["at"] >= due[r["message_id"]], f"delivered before its time: {r}, due at {due[r['message_id']]}"


@pytest.mark.timeout(240)
def test_transactions_commit_roll_back_and_recover_through_the_checker(grpc_cluster, admin, tmp_path):
    admin.create_topic("GrpcTx", 2, message_type="TRANSACTION")
    spec = {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcTx", "checker": "commit", "checks": 1,
            "wait_s": 60, "messages": [{"body": "committed", "action": "commit"},
                                       {"body": "rolled-back", "action": "rollback"},
                                       {"body": "orphan-committed-by-check"}]}
    lines = run_grpc("transaction", spec, tmp_path / "commit")
    halves = {line["half"]: line for line in lines if "half" in line}
    assert all(h["transaction_id"] for h in halves.values()), halves
    checked = [line for line in lines if "checked" in line]
    # Only the half left open is checked, and it is presented with its own topic and id.
    assert {c["checked"] for c in checked} == {halves["orphan-committed-by-check"]["message_id"]}, lines
    assert checked[0]["topic"] == "GrpcTx" and checked[0]["body"] == "orphan-committed-by-check"
    spec = {**spec, "checker": "rollback", "messages": [{"body": "orphan-rolled-back-by-check"}]}
    lines = run_grpc("transaction", spec, tmp_path / "rollback")
    assert [line["body"] for line in lines if "checked" in line] == ["orphan-rolled-back-by-check"], lines
    lines = run_grpc("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcTxReader", "topic": "GrpcTx",
                                "expect": 3, "max_s": 8}, tmp_path / "c")
    # What a consumer sees: the committed halves only (the wait for a third shows none follows).
    assert sorted(r["body"] for r in received(lines)) == ["committed", "orphan-committed-by-check"]
