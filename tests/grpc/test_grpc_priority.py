"""Priority messages (RocketMQ 5.4, RIP-80) through the proxy with RocketMQ's 5.1.2 Python client: a
PRIORITY topic (``message.type``, the CLI's ``--message-type``) is routed with that type, a message's
priority is stored (``_SYS_MSG_PRIORITY_``, in the queue of its priority, capped at the last) and
delivered back, and a backlog is popped highest priority first, as Apache's broker pops it. What
the client refuses itself (a negative priority, a type the route does not list) is sent through
the generated stub to see the proxy's own answer."""

from __future__ import annotations

import pytest

from rocketbox.cluster import PullConsumer
from rocketbox.cluster.testing import pull_until
from tests.cli_helpers import run_cli
from tests.conftest import client_config
from tests.grpc.grpc_client import received, run_grpc, sent, statuses

QUEUES = 8
PRIORITY_TYPE = 6   # gRPC MessageType.PRIORITY, as the client reports it


def _send(topic: str, **system) -> dict:
    properties = {"messageId": "0102FC00000001BEEF000000000000001", "messageType": "PRIORITY",
                  "bodyEncoding": "IDENTITY", **system}
    return {"messages": [{"topic": {"name": topic}, "body": "Ym9keQ==", "systemProperties": properties}]}


@pytest.fixture(scope="module")
def priority_topics(grpc_cluster, admin):
    run_cli("topic", "create", "GrpcPriority", "--queues", str(QUEUES), "--message-type", "PRIORITY",
            "--namesrv", grpc_cluster.namesrv)
    admin.create_topic("GrpcPriorityNormal", 2, message_type="NORMAL")
    admin.create_topic("GrpcPriorityAny", 2)


@pytest.mark.timeout(300)
def test_a_backlog_of_priority_messages_is_received_highest_priority_first(grpc_cluster, priority_topics, tmp_path):
    # Three rounds, each from the lowest priority up (so arrival order is the reverse of priority),
    # and one past the last queue, which the broker caps at the last queue.
    messages = [{"body": f"p{p}-r{r}", "priority": p} for r in range(3) for p in range(QUEUES)]
    messages.append({"body": "p20", "priority": 20})
    lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcPriority",
                                 "messages": messages}, tmp_path / "p")
    assert len(sent(lines)) == len(messages), lines

    # Stored in the queue of its priority, the priority kept as Apache keeps it.
    with PullConsumer("GrpcPriorityCheck", config=client_config(grpc_cluster)) as consumer:
        stored = pull_until(consumer, "GrpcPriority", len(messages))
    for message in stored:
        priority = int(message.properties["_SYS_MSG_PRIORITY_"])
        assert message.queue_id == min(priority, QUEUES - 1), (message.body, message.queue_id)

    # The backlog popped in batches of 5: each batch the highest priorities left, in that order.
    lines = run_grpc("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "GrpcPriorityReader",
                                "topic": "GrpcPriority", "expect": len(messages), "batch": 5, "max_s": 90},
                     tmp_path / "c")
    got = received(lines)
    assert len(got) == len(messages), lines
    order = [min(r["priority"], QUEUES - 1) for r in got]
    assert order == sorted(order, reverse=True), order
    by_body = {r["body"]: r for r in got}
    for message in messages:
        assert by_body[message["body"]]["priority"] == message["priority"]   # delivered back as sent
        assert by_body[message["body"]]["type"] == PRIORITY_TYPE


@pytest.mark.timeout(240)
def test_priority_routes_types_and_range(grpc_cluster, priority_topics, tmp_path):
    lines = run_grpc("raw", {"endpoint": grpc_cluster.proxy_endpoint, "steps": [
        {"name": "route", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcPriority"}}},
        {"name": "route-any", "rpc": "QueryRoute", "request": {"topic": {"name": "GrpcPriorityAny"}}},
        {"name": "to-normal", "rpc": "SendMessage", "request": _send("GrpcPriorityNormal", priority=3)},
        {"name": "to-undeclared", "rpc": "SendMessage", "request": _send("GrpcPriorityAny", priority=3)},
        {"name": "normal-to-priority", "rpc": "SendMessage",
         "request": _send("GrpcPriority", messageType="NORMAL")},
        {"name": "negative", "rpc": "SendMessage", "request": _send("GrpcPriority", priority=-1)},
        {"name": "zero", "rpc": "SendMessage", "request": _send("GrpcPriority", priority=0)},
    ]}, tmp_path / "raw")
    routes = {line["step"]: line["responses"][0] for line in lines if line.get("step", "").startswith("route")}
    assert {tuple(q["acceptMessageTypes"]) for q in routes["route"]["messageQueues"]} == {("PRIORITY",)}
    assert len(routes["route"]["messageQueues"]) == QUEUES
    # An undeclared topic takes the four classic types, not PRIORITY (Apache's MIXED route neither).
    assert {tuple(q["acceptMessageTypes"]) for q in routes["route-any"]["messageQueues"]} == \
        {("NORMAL", "FIFO", "DELAY", "TRANSACTION")}
    for step in ("to-normal", "to-undeclared", "normal-to-priority"):
        status = statuses(lines, step)[0]
        assert status["code"] == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", (step, status)
    assert statuses(lines, "to-normal")[0]["message"].endswith("expected type is NORMAL, but actual type is PRIORITY")
    assert statuses(lines, "negative")[0] == {"code": "BAD_REQUEST",
                                              "message": "The priority must be greater than or equal to 0"}
    assert statuses(lines, "zero")[0]["code"] == "OK"
    # The 5.x client itself refuses a priority message to a topic whose route does not list PRIORITY.
    lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": "GrpcPriorityNormal",
                                 "messages": [{"body": "urgent", "priority": 1}]}, tmp_path / "client")
    refused = [line for line in lines if line.get("sent") is None and "error" in line]
    assert refused and "PRIORITY" in refused[0]["error"], lines
