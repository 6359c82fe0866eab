"""What RocketBox does not serve is refused with the status Apache uses, never served as something
else (issue 34 item 5): an RPC of service.proto it does not implement (gRPC UNIMPLEMENTED, as
Apache's grpc-java stub answers for an RPC its proxy does not override, and no traceback in the
proxy's log), a Lite message (RocketMQ 5.5: refused by the topic's type, nothing stored), and a
Lite consumer (its settings end the Telemetry stream, its heartbeats and receives are answered
UNRECOGNIZED_CLIENT_TYPE). RocketMQ's 5.1.2 Python client meets them as a user would (its
LiteSimpleConsumer and LitePushConsumer); what it would not send is sent through the generated stub.
"""

from __future__ import annotations

import os

import pytest

from tests.grpc.grpc_client import run_grpc, statuses

SERVICE = "apache.rocketmq.v2.MessagingService"
QUEUE = {"topic": {"name": "GrpcUnserved"}, "id": 0, "broker": {"name": "broker-a"}}
# Every RPC of service.proto the proxy does not serve, with a request of its own type.
UNSERVED = {
    "PullMessage": {"group": {"name": "GrpcUnservedCG"}, "messageQueue": QUEUE, "offset": "0", "batchSize": 1},
    "UpdateOffset": {"group": {"name": "GrpcUnservedCG"}, "messageQueue": QUEUE, "offset": "1"},
    "GetOffset": {"group": {"name": "GrpcUnservedCG"}, "messageQueue": QUEUE},
    "QueryOffset": {"messageQueue": QUEUE, "queryOffsetPolicy": "END"},
    "SyncLiteSubscription": {"action": "PARTIAL_ADD", "topic": {"name": "GrpcUnserved"},
                             "group": {"name": "GrpcUnservedCG"}, "liteTopicSet": ["lite-1"]},
}
LITE_SETTINGS = {"settings": {"clientType": "LITE_PUSH_CONSUMER", "subscription": {
    "group": {"name": "GrpcUnservedCG"}, "subscriptions": [{"topic": {"name": "GrpcUnserved"}}]}}}


def _lite_message(**system) -> dict:
    properties = {"messageId": "0102FC00000001CAFE000000000000001", "messageType": "LITE",
                  "bodyEncoding": "IDENTITY", "liteTopic": "lite-1", **system}
    return {"messages": [{"topic": {"name": "GrpcUnserved"}, "body": "Ym9keQ==", "systemProperties": properties}]}


def _log_tail(cluster, since: int) -> str:
    with open(os.path.join(cluster.data_dir, "logs", "proxy.log"), errors="replace") as f:
        f.seek(since)
        return f.read()


def _log_size(cluster) -> int:
    return os.path.getsize(os.path.join(cluster.data_dir, "logs", "proxy.log"))


@pytest.fixture(scope="module")
def topic(grpc_cluster, admin):
    admin.create_topic("GrpcUnserved", 2)


@pytest.mark.timeout(240)
def test_rpcs_not_served_are_unimplemented_without_a_traceback(grpc_cluster, topic, tmp_path):
    log_from = _log_size(grpc_cluster)
    steps = [{"name": rpc, "rpc": rpc, "request": request} for rpc, request in UNSERVED.items()]
    steps.append({"name": "still-serving", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcUnserved"}}})
    lines = run_grpc("raw", {"endpoint": grpc_cluster.proxy_endpoint, "steps": steps}, tmp_path / "raw")
    for rpc in UNSERVED:
        assert statuses(lines, rpc) == [{"grpc_error": f"UNIMPLEMENTED: Method {SERVICE}/{rpc} is unimplemented"}], \
            (rpc, lines)
    assert statuses(lines, "still-serving")[0]["code"] == "OK"
    log = _log_tail(grpc_cluster, log_from)
    assert "Traceback" not in log and "NotImplementedError" not in log, log[-3000:]
    assert "SyncLiteSubscription refused: RocketBox does not serve it" in log


@pytest.mark.timeout(240)
def test_lite_messages_and_lite_consumers_are_refused_not_downgraded(grpc_cluster, topic, admin, tmp_path):
    lines = run_grpc("raw", {"endpoint": grpc_cluster.proxy_endpoint, "client_id": "lite@raw", "steps": [
        {"name": "lite-send", "rpc": "SendMessage", "request": _lite_message()},
        {"name": "lite-topic-only", "rpc": "SendMessage", "request": _lite_message(messageType="NORMAL")},
        {"name": "lite-settings", "telemetry": [LITE_SETTINGS]},
        {"name": "lite-heartbeat", "rpc": "Heartbeat",
         "request": {"clientType": "LITE_PUSH_CONSUMER", "group": {"name": "GrpcUnservedCG"}}},
        {"name": "lite-receive", "rpc": "ReceiveMessage", "request": {
            "group": {"name": "GrpcUnservedCG"}, "messageQueue": {"topic": {"name": "GrpcUnserved"}},
            "filterExpression": {"type": "TAG", "expression": "*"}, "batchSize": 1, "invisibleDuration": "5s",
            "longPollingTimeout": "1s"}},
        {"name": "simple-heartbeat", "rpc": "Heartbeat", "client_id": "other@raw",
         "request": {"clientType": "LITE_SIMPLE_CONSUMER", "group": {"name": "GrpcUnservedCG"}}},
    ]}, tmp_path / "raw")
    for step in ("lite-send", "lite-topic-only"):
        status = statuses(lines, step)[0]
        assert status["code"] == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", (step, status)
        assert "actual type is LITE" in status["message"] and "Lite topics" in status["message"]
    settings = next(line for line in lines if line.get("step") == "lite-settings")
    assert settings["responses"] == [], settings
    assert settings["error"]["grpc_code"] == "INVALID_ARGUMENT"
    assert "LITE_PUSH_CONSUMER" in settings["error"]["details"]
    for step in ("lite-heartbeat", "lite-receive", "simple-heartbeat"):
        status = statuses(lines, step)[0]
        assert status["code"] == "UNRECOGNIZED_CLIENT_TYPE" and "Lite topics" in status["message"], (step, status)
    # Nothing was stored as another type.
    assert sum(row["maxOffset"] for row in admin.queue_offsets("GrpcUnserved")) == 0


@pytest.mark.timeout(240)
def test_the_5x_clients_lite_consumers_are_refused(grpc_cluster, topic, tmp_path):
    log_from = _log_size(grpc_cluster)
    lines = run_grpc("lite", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcUnserved",
                              "group": "GrpcUnservedLiteCG"}, tmp_path / "lite", timeout_s=120)
    by_step = {line["step"]: line for line in lines if "step" in line}
    # Without the proxy's settings (refused) the client grants itself no lite subscription: it refuses
    # subscribe_lite itself, and its receives are not served as a plain SimpleConsumer's.
    assert by_step["simple-subscribe"]["ok"] is False, by_step["simple-subscribe"]
    receive = by_step["simple-receive"]
    assert receive["ok"] is False and receive["code"] == 40015, receive
    assert "LITE_SIMPLE_CONSUMER" in receive["error"] and "Lite topics" in receive["error"]
    # Its settings refused, the LitePushConsumer never gets any and does not start.
    assert by_step["push-startup"]["ok"] is False, by_step["push-startup"]
    log = _log_tail(grpc_cluster, log_from)
    assert "Traceback" not in log, log[-3000:]
    assert "LITE_PUSH_CONSUMER: RocketBox serves PRODUCER, PUSH_CONSUMER and SIMPLE_CONSUMER" in log
