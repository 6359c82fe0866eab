"""RocketMQ 5's Python client and the broker's timer: a timed message arrives with its delivery
timestamp and type DELAY (issue 34 item 1), and one recalled before it is due never arrives, with
Apache's answers for a recall that is off, too late or unreadable (item 4)."""

from __future__ import annotations

import base64

import pytest

from tests.grpc.grpc_client import received, run_grpc, sent

MESSAGE_TYPE_DELAY = 3   # apache.rocketmq.v2.MessageType.DELAY


def _recalls(lines: list[dict]) -> list[dict]:
    return [line for line in lines if "recalled" in line]


@pytest.mark.timeout(240)
def test_a_timed_message_arrives_with_its_delivery_timestamp_and_type_delay(grpc_cluster, admin, tmp_path):
    admin.create_topic("GrpcTimerTs", 2, message_type="DELAY")
    lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcTimerTs",
                                 "messages": [{"body": f"timed-{i}", "delay_s": 2} for i in range(2)]},
                     tmp_path / "p")
    receipts = {r["message_id"]: r for r in sent(lines)}
    assert len(receipts) == 2, lines
    lines = run_grpc("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcTimerTsReader",
                                "topic": "GrpcTimerTs", "expect": 2, "max_s": 60}, tmp_path / "c")
    got = received(lines)
    assert sorted(r["body"] for r in got) == ["timed-0", "timed-1"], lines
    for r in got:
        asked_s = receipts[r["message_id"]]["delivery_s"]
        assert r["delivery_ms"] == asked_s * 1000, r   # the time it was sent for, to the ms
        assert r["type"] == MESSAGE_TYPE_DELAY, r
        assert r["at"] >= asked_s


@pytest.mark.timeout(300)
def test_a_recalled_timed_message_is_never_delivered_and_late_or_bad_recalls_get_apaches_answers(
        grpc_cluster, admin, tmp_path):
    admin.create_topic("GrpcRecall", 2, message_type="DELAY")
    admin.create_topic("GrpcRecallNormal", 2, message_type="NORMAL")
    (master,) = admin.master_endpoints().values()
    # Off by default, as in Apache: the broker's NO_PERMISSION, which the proxy answers FORBIDDEN.
    lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcRecall",
                                 "messages": [{"body": "while-off", "delay_s": 30, "recall": True}]},
                     tmp_path / "off")
    (receipt,) = sent(lines)
    handle = receipt["recall_handle"]
    # The handle is Apache's v1: topic, broker, TIMER_OUT_MS + 1 (the 1 s slot below the time), UNIQ_KEY.
    version, topic, broker, stamp, message_id = base64.urlsafe_b64decode(handle).decode().split(" ")
    assert (version, topic, broker, message_id) == ("v1", "GrpcRecall", "broker-a", receipt["message_id"])
    assert int(stamp) == receipt["delivery_s"] * 1000 - 1000 + 1
    (off,) = _recalls(lines)
    assert off["recalled"] is None and "recall failed, operation is forbidden" in off["error"], off

    admin.update_broker_config(master, {"recallMessageEnable": "true"})   # live, as mqadmin sets it
    try:
        lines = run_grpc("produce", {
            "endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcRecall",
            "messages": [{"body": "recalled", "delay_s": 3, "recall": True},
                         {"body": "kept", "delay_s": 4},
                         {"body": "bad-handle", "delay_s": 30, "recall": "not-a-handle"}]}, tmp_path / "on")
        by_body = {r["sent"]: r for r in sent(lines)}
        recalls = {r["body"] if r["recalled"] is None else r["recalled"]: r for r in _recalls(lines)}
        assert recalls["recalled"]["message_id"] == by_body["recalled"]["message_id"], lines
        assert "recall handle is invalid" in recalls["bad-handle"]["error"], recalls
        # A topic that takes no DELAY message: the proxy's type check, as Apache's ProducerProcessor.
        lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcRecallNormal",
                                     "messages": [], "recall_later": [by_body["kept"]["recall_handle"]]},
                         tmp_path / "type")
        (wrong_type,) = _recalls(lines)
        assert "TopicMessageType validate failed" in wrong_type["error"], wrong_type

        lines = run_grpc("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcRecallReader",
                                    "topic": "GrpcRecall", "expect": 2, "max_s": 12}, tmp_path / "c")
        # The wait for a second message shows the recalled one never comes (its time was a second earlier).
        assert [r["body"] for r in received(lines)] == ["kept"], lines
        # After delivery the handle's time has passed: Apache's ILLEGAL_OPERATION, INTERNAL_SERVER_ERROR here too.
        lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcRecall",
                                     "messages": [], "recall_later": [by_body["kept"]["recall_handle"]]},
                         tmp_path / "late")
        (late,) = _recalls(lines)
        assert late["recalled"] is None and "recall failed, timestamp invalid" in late["error"], late
    finally:
        admin.update_broker_config(master, {"recallMessageEnable": "false"})
