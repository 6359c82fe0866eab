"""Bad input to the proxy, sent through the generated stub (the 5.1.2 client checks much of it
itself, so it would never reach the server): each refusal carries the status code RocketMQ's
proxy gives, the proxy keeps serving (same process, still answering), its log stays small, and
its memory stays bounded under many idle streams."""

from __future__ import annotations

import os

import psutil
import pytest

from tests.grpc.grpc_client import GrpcClient, run_grpc, statuses

RECEIVE = {"group": {"name": "GrpcBadCG"}, "messageQueue": {"topic": {"name": "GrpcBad"}, "broker": {"name": "broker-a"}},
           "filterExpression": {"type": "TAG", "expression": "*"}, "batchSize": 1, "invisibleDuration": "5s",
           "longPollingTimeout": "1s"}


def _send(topic: str, **system) -> dict:
    properties = {"messageId": "0102FC00000001BAD0000000000000001", "messageType": "NORMAL",
                  "bodyEncoding": "IDENTITY", **system}
    return {"messages": [{"topic": {"name": topic}, "body": "Ym9keQ==", "systemProperties": properties}]}


def _receive(**changes) -> dict:
    return {**RECEIVE, **changes}


def _codes(lines, step) -> list[str]:
    return [s.get("code") or s.get("grpc_error") for s in statuses(lines, step)]


def _raw(cluster, tmp_path, name, steps, **spec) -> list[dict]:
    return run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "steps": steps, **spec}, tmp_path / name)


@pytest.fixture(scope="module")
def topics(grpc_cluster, admin):
    admin.create_topic("GrpcBad", 2)
    admin.create_topic("GrpcFifoOnly", 2, message_type="FIFO")
    admin.create_topic("GrpcLarge", 1)


@pytest.mark.timeout(240)
def test_unknown_and_illegal_names_are_refused_with_rocketmqs_codes(grpc_cluster, topics, tmp_path):
    lines = _raw(grpc_cluster, tmp_path, "names", [
        {"name": "route-unknown", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcNoSuchTopic"}}},
        {"name": "send-unknown", "rpc": "SendMessage", "request": _send("GrpcNoSuchTopic")},
        {"name": "receive-unknown", "rpc": "ReceiveMessage",
         "request": _receive(messageQueue={"topic": {"name": "GrpcNoSuchTopic"}})},
        {"name": "route-illegal", "rpc": "QueryRoute", "request": {"topic": {"name": "bad topic!"}}},
        {"name": "route-system", "rpc": "QueryRoute", "request": {"topic": {"name": "RMQ_SYS_TRANS_HALF_TOPIC"}}},
        {"name": "receive-bad-group", "rpc": "ReceiveMessage", "request": _receive(group={"name": "bad group"})},
        {"name": "receive-system-group", "rpc": "ReceiveMessage", "request": _receive(group={"name": "CID_RMQ_SYS_X"})},
        {"name": "ack-bad-group", "rpc": "AckMessage", "request": {
            "group": {"name": "no/slash"}, "topic": {"name": "GrpcBad"},
            "entries": [{"messageId": "x", "receiptHandle": "y"}]}},
        {"name": "assignment-bad-group", "rpc": "QueryAssignment",
         "request": {"topic": {"name": "GrpcBad"}, "group": {"name": ""}}},
        {"name": "no-client-id", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcBad"}}, "client_id": ""},
    ])
    expected = {"route-unknown": "TOPIC_NOT_FOUND", "send-unknown": "TOPIC_NOT_FOUND",
                "receive-unknown": "TOPIC_NOT_FOUND", "route-illegal": "ILLEGAL_TOPIC", "route-system": "ILLEGAL_TOPIC",
                "receive-bad-group": "ILLEGAL_CONSUMER_GROUP", "receive-system-group": "ILLEGAL_CONSUMER_GROUP",
                "ack-bad-group": "ILLEGAL_CONSUMER_GROUP", "assignment-bad-group": "ILLEGAL_CONSUMER_GROUP",
                "no-client-id": "CLIENT_ID_REQUIRED"}
    for step, code in expected.items():
        assert _codes(lines, step)[0] == code, (step, statuses(lines, step))
    # A receive's stream ends with the delivery timestamp after its status, refused or not.
    line = next(line for line in lines if line.get("step") == "receive-unknown")
    assert "deliveryTimestamp" in line["responses"][-1]


@pytest.mark.timeout(240)
def test_messages_the_topic_or_the_limits_refuse(grpc_cluster, topics, tmp_path):
    max_body = grpc_cluster.topology.proxy.max_body_size
    lines = _raw(grpc_cluster, tmp_path, "messages", [
        {"name": "fifo-route", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcFifoOnly"}}},
        {"name": "normal-to-fifo", "rpc": "SendMessage", "request": _send("GrpcFifoOnly")},
        {"name": "fifo-to-fifo", "rpc": "SendMessage", "request": _send("GrpcFifoOnly", messageGroup="g1",
                                                                         messageType="FIFO")},
        {"name": "too-large", "rpc": "SendMessage", "request": _send("GrpcLarge"), "body_bytes": max_body + 1},
        {"name": "largest", "rpc": "SendMessage", "request": _send("GrpcLarge"), "body_bytes": max_body},
        {"name": "empty", "rpc": "SendMessage", "request": _send("GrpcLarge"), "body_bytes": 0},
        {"name": "no-id", "rpc": "SendMessage", "request": _send("GrpcBad", messageId="")},
        {"name": "bad-tag", "rpc": "SendMessage", "request": _send("GrpcBad", tag="a|b")},
        {"name": "system-property", "rpc": "SendMessage",
         "request": {"messages": [{**_send("GrpcBad")["messages"][0], "userProperties": {"DELAY": "3"}}]}},
        {"name": "far-future", "rpc": "SendMessage",
         "request": _send("GrpcBad", deliveryTimestamp="2100-01-01T00:00:00Z", messageType="DELAY")},
        {"name": "no-message", "rpc": "SendMessage", "request": {"messages": []}},
    ])
    route = next(line for line in lines if line.get("step") == "fifo-route")["responses"][0]
    assert {tuple(q["acceptMessageTypes"]) for q in route["messageQueues"]} == {("FIFO",)}
    assert all(q["broker"]["endpoints"]["addresses"][0]["port"] == grpc_cluster.topology.proxy.port
               for q in route["messageQueues"])
    expected = {"normal-to-fifo": "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", "fifo-to-fifo": "OK",
                "too-large": "MESSAGE_BODY_TOO_LARGE", "largest": "OK", "empty": "MESSAGE_BODY_EMPTY",
                "no-id": "ILLEGAL_MESSAGE_ID", "bad-tag": "ILLEGAL_MESSAGE_TAG",
                "system-property": "ILLEGAL_MESSAGE_PROPERTY_KEY", "far-future": "ILLEGAL_DELIVERY_TIME",
                "no-message": "MESSAGE_CORRUPTED"}
    for step, code in expected.items():
        assert _codes(lines, step)[0] == code, (step, statuses(lines, step))


@pytest.mark.timeout(240)
def test_forged_expired_and_spent_receipt_handles(grpc_cluster, topics, tmp_path):
    steps = [{"name": f"send-{i}", "rpc": "SendMessage",
              "request": _send("GrpcBad", messageId=f"0102FC00000001BAD00000000000001{i}")} for i in range(3)]
    steps += [
        {"name": "forged-ack", "rpc": "AckMessage", "request": {
            "group": {"name": "GrpcBadCG"}, "topic": {"name": "GrpcBad"},
            "entries": [{"messageId": "m", "receiptHandle": "v1 1 2 3 0 0 0 0 broker-zz-forged"}]}},
        {"name": "garbage-change", "rpc": "ChangeInvisibleDuration", "request": {
            "group": {"name": "GrpcBadCG"}, "topic": {"name": "GrpcBad"}, "receiptHandle": "not a handle",
            "invisibleDuration": "5s", "messageId": "m"}},
        {"name": "short-lived", "rpc": "ReceiveMessage", "as": "short",
         "request": _receive(invisibleDuration="1s", longPollingTimeout="5s")},
        {"sleep": 1.5},
        {"name": "expired-ack", "rpc": "AckMessage", "request": {
            "group": {"name": "GrpcBadCG"}, "topic": {"name": "GrpcBad"},
            "entries": [{"messageId": "{short_id}", "receiptHandle": "{short_handle}"}]}},
        {"name": "expired-change", "rpc": "ChangeInvisibleDuration", "request": {
            "group": {"name": "GrpcBadCG"}, "topic": {"name": "GrpcBad"}, "receiptHandle": "{short_handle}",
            "invisibleDuration": "5s", "messageId": "{short_id}"}},
        {"name": "held", "rpc": "ReceiveMessage", "as": "held", "request": _receive(invisibleDuration="60s")},
        {"name": "first-ack", "rpc": "AckMessage", "request": {
            "group": {"name": "GrpcBadCG"}, "topic": {"name": "GrpcBad"},
            "entries": [{"messageId": "{held_id}", "receiptHandle": "{held_handle}"}]}},
        {"name": "second-ack", "rpc": "AckMessage", "request": {
            "group": {"name": "GrpcBadCG"}, "topic": {"name": "GrpcBad"},
            "entries": [{"messageId": "{held_id}", "receiptHandle": "{held_handle}"}]}},
        {"name": "too-short", "rpc": "ReceiveMessage", "request": _receive(invisibleDuration="0.1s")},
        {"name": "bad-sql", "rpc": "ReceiveMessage",
         "request": _receive(filterExpression={"type": "SQL", "expression": "a >>> 1"})},
        {"name": "bad-transaction", "rpc": "EndTransaction", "request": {
            "topic": {"name": "GrpcBad"}, "messageId": "m", "transactionId": "garbage", "resolution": "COMMIT"}},
        {"name": "no-transaction", "rpc": "EndTransaction", "request": {
            "topic": {"name": "GrpcBad"}, "messageId": "m", "transactionId": "", "resolution": "COMMIT"}},
        {"name": "not-a-half", "rpc": "EndTransaction", "request": {
            "topic": {"name": "GrpcBad"}, "messageId": "m", "transactionId": "broker-a:0:0", "resolution": "COMMIT"}},
    ]
    lines = _raw(grpc_cluster, tmp_path, "handles", steps)
    assert _codes(lines, "short-lived")[0] == "OK", statuses(lines, "short-lived")
    expected = {"forged-ack": "INVALID_RECEIPT_HANDLE", "garbage-change": "INVALID_RECEIPT_HANDLE",
                "expired-ack": "INVALID_RECEIPT_HANDLE", "expired-change": "INVALID_RECEIPT_HANDLE",
                "held": "OK", "first-ack": "OK", "second-ack": "INVALID_RECEIPT_HANDLE",
                "too-short": "ILLEGAL_INVISIBLE_TIME", "bad-sql": "ILLEGAL_FILTER_EXPRESSION",
                "bad-transaction": "INVALID_TRANSACTION_ID", "no-transaction": "INVALID_TRANSACTION_ID",
                "not-a-half": "INVALID_TRANSACTION_ID"}
    for step, code in expected.items():
        assert _codes(lines, step)[0] == code, (step, statuses(lines, step))
    # An ack's result is per entry too.
    ack = next(line for line in lines if line.get("step") == "expired-ack")["responses"][0]
    assert ack["entries"][0]["status"]["code"] == "INVALID_RECEIPT_HANDLE"


@pytest.mark.timeout(240)
def test_settings_come_first_and_bad_settings_end_the_stream(grpc_cluster, topics, tmp_path):
    producer = {"settings": {"clientType": "PRODUCER", "publishing": {"topics": [{"name": "GrpcBad"}],
                                                                       "maxBodySize": 1}}}
    lines = _raw(grpc_cluster, tmp_path, "settings", [
        {"name": "heartbeat-first", "rpc": "Heartbeat", "request": {"clientType": "PRODUCER"}},
        {"name": "terminate-first", "rpc": "NotifyClientTermination", "request": {}},
        {"name": "empty-settings", "telemetry": [{"settings": {"clientType": "PRODUCER"}}]},
        {"name": "bad-group-settings", "telemetry": [{"settings": {
            "clientType": "SIMPLE_CONSUMER", "subscription": {"group": {"name": "bad group"}}}}]},
        {"name": "producer-settings", "telemetry": [producer]},
        {"name": "heartbeat-after", "rpc": "Heartbeat", "request": {"clientType": "PRODUCER"}},
        {"name": "terminate-after", "rpc": "NotifyClientTermination", "request": {}},
    ])
    assert _codes(lines, "heartbeat-first")[0] == "UNRECOGNIZED_CLIENT_TYPE"
    assert _codes(lines, "terminate-first")[0] == "UNRECOGNIZED_CLIENT_TYPE"
    by_step = {line["step"]: line for line in lines if "step" in line}
    assert by_step["empty-settings"]["error"]["grpc_code"] == "INVALID_ARGUMENT"
    assert by_step["bad-group-settings"]["error"]["grpc_code"] == "INVALID_ARGUMENT"
    answer = by_step["producer-settings"]["responses"][0]
    assert answer["status"]["code"] == "OK"
    # The effective settings: the brokers' limit, not the client's (5.1.2 copies both verbatim).
    assert answer["settings"]["publishing"]["maxBodySize"] == grpc_cluster.topology.proxy.max_body_size
    assert answer["settings"]["publishing"]["validateMessageType"] is True
    assert _codes(lines, "heartbeat-after")[0] == "OK" and _codes(lines, "terminate-after")[0] == "OK"


@pytest.mark.timeout(300)
def test_a_flood_of_bad_requests_leaves_the_proxy_serving_with_a_short_log(grpc_cluster, topics, tmp_path):
    pid = grpc_cluster.pid("proxy")
    log_path = os.path.join(grpc_cluster.data_dir, "logs", "proxy.log")
    log_before = os.path.getsize(log_path)
    lines = _raw(grpc_cluster, tmp_path, "flood", [
        {"name": "junk", "junk": 300, "method": "SendMessage"},
        {"name": "junk-stream", "junk": 100, "method": "ReceiveMessage"},
        {"name": "refused", "rpc": "QueryRoute", "request": {"topic": {"name": "bad topic!"}}, "repeat": 300},
        {"name": "forged", "rpc": "AckMessage", "repeat": 300, "request": {
            "group": {"name": "GrpcBadCG"}, "topic": {"name": "GrpcBad"},
            "entries": [{"messageId": "m", "receiptHandle": "forged"}]}},
        {"name": "still-serving", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcBad"}}},
    ])
    by_step = {line["step"]: line for line in lines if "step" in line}
    assert "answered" not in by_step["junk"]["codes"], by_step["junk"]   # gRPC refuses undecodable bytes
    assert by_step["refused"]["codes"] == {"ILLEGAL_TOPIC": 300}
    assert by_step["forged"]["codes"] == {"INVALID_RECEIPT_HANDLE": 300}
    assert _codes(lines, "still-serving")[0] == "OK"
    assert grpc_cluster.pid("proxy") == pid and grpc_cluster.child("proxy")["restarts"] == 0
    # Warnings are rate-limited per kind (10 a kind per 10 s): hundreds of refusals, a few lines.
    assert os.path.getsize(log_path) - log_before < 32 * 1024


@pytest.mark.timeout(300)
def test_memory_stays_bounded_with_many_idle_streams(grpc_cluster, topics, tmp_path):
    proxy = psutil.Process(grpc_cluster.pid("proxy"))
    settings = {"settings": {"clientType": "PRODUCER", "publishing": {"topics": [{"name": "GrpcBad"}]}}}
    spec = {"endpoint": grpc_cluster.proxy_endpoint, "count": 1500, "channels": 8, "settings": settings}
    peaks = []
    for wave in range(2):
        before = proxy.memory_info().rss
        client = GrpcClient("idle_streams", spec, tmp_path / f"wave{wave}")
        lines = client.wait_for(lambda ls: any("opened" in line for line in ls), 120, "streams opened")
        opened = next(line for line in lines if "opened" in line)
        assert opened["answered"] == 1500, opened   # every stream got its settings answer
        # Serving on while they are open.
        check = _raw(grpc_cluster, tmp_path, f"check{wave}", [
            {"name": "route", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcBad"}}}])
        assert _codes(check, "route")[0] == "OK"
        peaks.append(proxy.memory_info().rss)
        client.close_stdin()
        client.finish(60)
        if wave == 0:
            # What 1500 idle streams cost: tens of KB each (gRPC's buffers), not unbounded.
            assert peaks[0] - before < 1500 * 96 * 1024, (before, peaks[0])
    # Streams closed give their memory back for the next ones: a second wave does not add another wave's worth.
    assert peaks[1] < peaks[0] + 1500 * 32 * 1024, peaks
