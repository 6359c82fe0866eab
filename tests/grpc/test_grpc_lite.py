"""Lite topics (RocketMQ 5.5, issue 34 item 3) with the official 5.x Python client
(rocketmq-python-client 5.1.2, which has LiteSimpleConsumer and LitePushConsumer): a consumer
subscribes lite topics of a LITE parent topic and receives only those, each message carrying its
``lite_topic``. The 5.1.2 client's subscribe_lite sends its lite topic as a set of characters
(``lite_topic_set.extend(str)``), so a subscription is right only after its full sync (every 30 s, or
``subscribe_lite_all()``, which the tests call); what the client would not send (bad names, quotas, a plain client's sync) goes
through the generated stub and meets Apache's codes.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

from tests.grpc.grpc_client import GRPC_PYTHON, received, run_grpc, sent, statuses

TOPIC = "GrpcLite"
PLAIN = "GrpcLitePlain"


@pytest.fixture(scope="module")
def topics(grpc_cluster, admin):
    admin.create_topic(TOPIC, 4, message_type="LITE")
    admin.create_topic(PLAIN, 2)


def _lite_message(topic: str, lite: str, **system) -> dict:
    properties = {"messageId": "0102FC00000001CAFE000000000000001", "messageType": "LITE",
                  "bodyEncoding": "IDENTITY", "liteTopic": lite, **system}
    return {"messages": [{"topic": {"name": topic}, "body": "Ym9keQ==", "systemProperties": properties}]}


LITE_SETTINGS = {"settings": {"clientType": "LITE_SIMPLE_CONSUMER", "subscription": {
    "group": {"name": "GrpcLiteRawCG"}, "subscriptions": [{"topic": {"name": TOPIC}}]}}}


def _sync(name: str, lites, action: str = "PARTIAL_ADD", topic: str = TOPIC, client_id: str | None = None) -> dict:
    step = {"name": name, "rpc": "SyncLiteSubscription", "request": {
        "action": action, "topic": {"name": topic}, "group": {"name": "GrpcLiteRawCG"}, "liteTopicSet": list(lites)}}
    if client_id:
        step["client_id"] = client_id
    return step


@pytest.mark.timeout(180)
def test_a_lite_simple_consumer_receives_its_lite_topics_only(grpc_cluster, topics, tmp_path):
    lines = run_grpc("lite", {"endpoint": grpc_cluster.proxy_endpoint, "topic": TOPIC, "group": "GrpcLiteSimpleCG",
                              "steps": [
        {"settings": True},
        {"subscribe": "session-a"},
        {"subscribe": "session-c"},
        {"unsubscribe": "session-c"},
        {"sync_all": True},
        {"settings": True},
        {"produce": [{"body": "a1", "lite_topic": "session-a"}, {"body": "b1", "lite_topic": "session-b"},
                     {"body": "c1", "lite_topic": "session-c"}, {"body": "a2", "lite_topic": "session-a"},
                     {"body": "plain"}]},
        {"receive": 2, "max_s": 20},
        {"receive": 1, "max_s": 3},   # nothing more: session-b and session-c are not subscribed
    ]}, tmp_path / "lite", timeout_s=150)
    settings = [line for line in lines if line.get("step") == "settings"]
    assert settings[0]["quota"] == 1200 and settings[0]["max_size"] == 64, settings
    assert settings[1]["lite_topics"] == ["session-a"], settings
    assert all(line["ok"] for line in lines if str(line.get("step", "")).startswith(("subscribe", "unsub"))), lines
    stored = {line["sent"] for line in sent(lines)}
    assert stored == {"a1", "b1", "c1", "a2"}, lines
    plain = next(line for line in lines if line.get("body") == "plain")
    # The route lists LITE only, so the client itself refuses a plain message (the proxy would too).
    assert plain["sent"] is None and "queue access type:LITE" in plain["error"], plain
    got = received(lines)
    assert [m["body"] for m in got] == ["a1", "a2"], got   # one lite topic keeps its order (one queue)
    assert {m["lite_topic"] for m in got} == {"session-a"} and {m["type"] for m in got} == {5}, got   # 5: LITE
    assert [line["got"] for line in lines if line.get("step") == "receive"] == [2, 0], lines


@pytest.mark.timeout(180)
def test_a_lite_push_consumer_consumes_what_it_subscribes(grpc_cluster, topics, tmp_path):
    lines = run_grpc("lite", {"endpoint": grpc_cluster.proxy_endpoint, "topic": TOPIC, "group": "GrpcLitePushCG",
                              "push": True, "steps": [
        {"subscribe": "agent-7"},
        {"sync_all": True},
        {"produce": [{"body": f"step-{i}", "lite_topic": "agent-7"} for i in range(3)]
         + [{"body": "other", "lite_topic": "agent-8"}]},
        {"receive": 3, "max_s": 40},
    ]}, tmp_path / "push", timeout_s=150)
    got = received(lines)
    assert sorted(m["body"] for m in got) == ["step-0", "step-1", "step-2"], lines
    assert {m["lite_topic"] for m in got} == {"agent-7"}, got


@pytest.mark.timeout(180)
def test_lite_refusals_carry_apaches_codes(grpc_cluster, topics, admin, tmp_path):
    log_from = os.path.getsize(os.path.join(grpc_cluster.data_dir, "logs", "proxy.log"))
    too_many = [f"t{i}" for i in range(1201)]
    lines = run_grpc("raw", {"endpoint": grpc_cluster.proxy_endpoint, "client_id": "lite@raw", "steps": [
        {"name": "lite-to-plain", "rpc": "SendMessage", "request": _lite_message(PLAIN, "s1")},
        {"name": "bad-name", "rpc": "SendMessage", "request": _lite_message(TOPIC, "bad$name")},
        {"name": "long-name", "rpc": "SendMessage", "request": _lite_message(TOPIC, "x" * 65)},
        {"name": "lite-and-group", "rpc": "SendMessage", "request": _lite_message(TOPIC, "s1", messageGroup="g")},
        _sync("not-a-lite-client", ["s1"]),
        {"name": "lite-settings", "telemetry": [LITE_SETTINGS]},
        {"name": "heartbeat", "rpc": "Heartbeat",
         "request": {"clientType": "LITE_SIMPLE_CONSUMER", "group": {"name": "GrpcLiteRawCG"}}},
        _sync("plain-parent", ["s1"], topic=PLAIN),
        _sync("bad-lite", ["no spaces"]),
        _sync("over-quota", too_many, action="COMPLETE_ADD"),
        _sync("within-quota", too_many[:1200], action="COMPLETE_ADD"),
        _sync("remove-all", [], action="COMPLETE_REMOVE"),
    ]}, tmp_path / "raw")
    assert statuses(lines, "lite-to-plain")[0]["code"] == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"
    for step in ("bad-name", "long-name"):
        assert statuses(lines, step)[0]["code"] == "ILLEGAL_LITE_TOPIC", (step, lines)
    assert statuses(lines, "lite-and-group")[0]["code"] == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"
    assert statuses(lines, "not-a-lite-client")[0]["code"] == "UNRECOGNIZED_CLIENT_TYPE"
    settings = next(line for line in lines if line.get("step") == "lite-settings")
    subscription = settings["responses"][0]["settings"]["subscription"]
    assert subscription["liteSubscriptionQuota"] == 1200 and subscription["maxLiteTopicSize"] == 64, settings
    assert statuses(lines, "heartbeat")[0]["code"] == "OK"
    assert statuses(lines, "plain-parent")[0]["code"] == "ILLEGAL_TOPIC"
    assert statuses(lines, "bad-lite")[0]["code"] == "ILLEGAL_LITE_TOPIC"
    assert statuses(lines, "over-quota")[0]["code"] == "LITE_SUBSCRIPTION_QUOTA_EXCEEDED"
    assert statuses(lines, "within-quota")[0]["code"] == "OK"
    assert statuses(lines, "remove-all")[0]["code"] == "OK"
    assert sum(row["maxOffset"] for row in admin.queue_offsets(PLAIN)) == 0   # nothing stored as another type
    with open(os.path.join(grpc_cluster.data_dir, "logs", "proxy.log"), errors="replace") as f:
        f.seek(log_from)
        assert "Traceback" not in f.read()


def _readme_lite_block() -> str:
    import re
    text = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = [code for code in re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M) if "LitePushConsumer" in code]
    assert len(blocks) == 1, "the README shows one Lite consumer example"
    return blocks[0]


@pytest.mark.timeout(180)
def test_the_readmes_lite_consumer_runs_as_written(grpc_cluster, admin, tmp_path):
    admin.create_topic("Sessions", 8, message_type="LITE")
    code = _readme_lite_block().replace("127.0.0.1:8081", grpc_cluster.proxy_endpoint)
    script = tmp_path / "readme_lite.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([str(GRPC_PYTHON), str(script)], capture_output=True, text=True, timeout=150,
                          env={**env, "HOME": str(tmp_path)}, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["session-42 bye", "session-42 hello"], done.stdout
    assert "not for us" not in done.stdout


def _group_member(name: str, group: str) -> dict:
    return {"name": f"settings-{name}", "client_id": f"{name}@lite", "telemetry": [{"settings": {
        "clientType": "LITE_SIMPLE_CONSUMER", "subscription": {
            "group": {"name": group}, "subscriptions": [{"topic": {"name": TOPIC}}]}}}]}


def _receive(name: str, group: str, step: str, capture: str | None = None) -> dict:
    receive = {"name": step, "client_id": f"{name}@lite", "rpc": "ReceiveMessage", "request": {
        "group": {"name": group}, "messageQueue": {"topic": {"name": TOPIC}},
        "filterExpression": {"type": "TAG", "expression": "*"}, "batchSize": 16, "invisibleDuration": "30s",
        "longPollingTimeout": "2s"}}
    if capture:
        receive["as"] = capture
    return receive


def _bodies(lines, step: str) -> list[tuple[str, str]]:
    import base64
    line = next(line for line in lines if line.get("step") == step)
    return [(r["message"]["systemProperties"].get("liteTopic"), base64.b64decode(r["message"]["body"]).decode())
            for r in line["responses"] if "message" in r]


@pytest.mark.timeout(180)
def test_members_of_one_group_each_get_their_own_lite_topics(grpc_cluster, topics, tmp_path):
    group = "GrpcLiteSharedCG"

    def sync(name, lite):
        return {"name": f"sync-{name}", "client_id": f"{name}@lite", "rpc": "SyncLiteSubscription", "request": {
            "action": "PARTIAL_ADD", "topic": {"name": TOPIC}, "group": {"name": group}, "liteTopicSet": [lite]}}

    def send(body, lite):
        message = _lite_message(TOPIC, lite)
        message["messages"][0]["body"] = __import__("base64").b64encode(body.encode()).decode()
        message["messages"][0]["systemProperties"]["messageId"] = f"0102FC00000001CAFE0000000000{len(body):04d}{lite[-1]}"
        return {"name": f"send-{body}", "rpc": "SendMessage", "request": message}

    lines = run_grpc("raw", {"endpoint": grpc_cluster.proxy_endpoint, "steps": [
        _group_member("alice", group), _group_member("bob", group),
        sync("alice", "room-a"), sync("bob", "room-b"),
        send("for-alice", "room-a"), send("for-bob", "room-b"), send("for-nobody", "room-c"),
        _receive("alice", group, "alice-1"),
        _receive("bob", group, "bob-1", capture="bob"),
        {"name": "bob-ack", "client_id": "bob@lite", "rpc": "AckMessage", "request": {
            "group": {"name": group}, "topic": {"name": TOPIC}, "entries": [{"receiptHandle": "{bob_handle}"}]}},
        _receive("alice", group, "alice-2"),
        _receive("bob", group, "bob-2"),
    ]}, tmp_path / "raw")
    for step in ("send-for-alice", "send-for-bob", "send-for-nobody"):
        assert statuses(lines, step)[0]["code"] == "OK", lines
    alice = _bodies(lines, "alice-1") + _bodies(lines, "alice-2")
    bob = _bodies(lines, "bob-1") + _bodies(lines, "bob-2")
    assert alice == [("room-a", "for-alice")], lines
    assert bob == [("room-b", "for-bob")], lines   # held for bob by alice's pop, or popped by bob himself
    assert statuses(lines, "bob-ack")[0]["code"] == "OK"


@pytest.mark.timeout(120)
def test_an_idle_lite_topic_is_forgotten_and_its_subscribers_told(grpc_cluster, admin):
    """The proxy's expiry round (lite_service.expire) against the cluster's real topic config: with
    ``lite.topic.expiration=1`` (minutes) a lite topic without a send for over a minute goes, and the
    subscriber's Telemetry outbox gets NotifyUnsubscribeLiteCommand. The proxy's clock is a
    ManualClock, so the minute passes at once."""
    import asyncio

    from rocketbox.cluster.clock import ManualClock
    from rocketbox.cluster.protocol import RequestCode
    from rocketbox.cluster.proxy.brokers import BrokerGateway
    from rocketbox.cluster.proxy.clients import ClientRegistry
    from rocketbox.cluster.proxy.lite_service import LiteService
    from rocketbox.cluster.proxy.lite_subscriptions import LiteSubscriptions
    from rocketbox.cluster.proxy.protos import pb
    from rocketbox.cluster.proxy.settings import ProxySettings
    from rocketbox.cluster.wire_format import Command

    topic = "GrpcLiteIdle"
    admin.create_topic(topic, 2, message_type="LITE")
    for endpoint in admin.master_endpoints().values():
        answer = admin.rpc.call(endpoint, Command(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "topicFilterType": "SINGLE_TAG",
            "topicSysFlag": "0", "order": "false", "attributes": "+lite.topic.expiration=1"}))
        assert answer.code == 0, answer.remark
    clock = ManualClock()

    async def scenario():
        namesrvs = tuple(f"tcp://{address}" for address in grpc_cluster.namesrv.split(";"))
        settings = ProxySettings(namesrv_endpoints=namesrvs, metadata_ttl_ms=1)
        gateway = BrokerGateway(settings)
        try:
            registry = ClientRegistry(10, 60_000)
            lite = LiteService(settings, gateway, registry)
            lite.subscriptions = LiteSubscriptions(1200, 100, 100, clock=clock.monotonic)
            client = registry.touch("c1@lite")
            client.settings = pb.Settings(client_type=pb.LITE_SIMPLE_CONSUMER)
            client.outbox = asyncio.Queue(8)
            lite.subscriptions.sync("c1@lite", pb.PARTIAL_ADD, "G", topic, {"s1", "s2"})
            lite.subscriptions.sync("gone@lite", pb.PARTIAL_ADD, "G", topic, {"s1"})   # not in the client table
            lite.subscriptions.note_send(topic, "s1")
            lite.subscriptions.note_send(topic, "s2")
            assert await lite.expire() == 0
            assert lite.subscriptions.lite_topics_of("gone@lite") == frozenset()   # its subscriptions went
            clock.advance(50)
            lite.subscriptions.note_send(topic, "s2")
            clock.advance(20)
            assert await lite.expire() == 1
            command = client.outbox.get_nowait()
            assert command.notify_unsubscribe_lite_command.lite_topic == "s1"
            assert lite.subscriptions.lite_topics_of("c1@lite") == {"s2"} and lite.subscriptions.lite_topic_count == 1
        finally:
            gateway.close()

    asyncio.run(scenario())


@pytest.mark.timeout(120)
def test_a_lite_topic_is_not_received_by_a_plain_consumer(grpc_cluster, topics, tmp_path):
    receive = {"group": {"name": "GrpcLitePlainCG"}, "messageQueue": {"topic": {"name": TOPIC}},
               "filterExpression": {"type": "TAG", "expression": "*"}, "batchSize": 16, "invisibleDuration": "30s",
               "longPollingTimeout": "1s"}
    lines = run_grpc("raw", {"endpoint": grpc_cluster.proxy_endpoint, "steps": [
        {"name": "send", "rpc": "SendMessage", "request": _lite_message(TOPIC, "room-z")},
        {"name": "unknown-client", "rpc": "ReceiveMessage", "request": receive},
        {"name": "simple-settings", "telemetry": [{"settings": {"clientType": "SIMPLE_CONSUMER", "subscription": {
            "group": {"name": "GrpcLitePlainCG"}, "subscriptions": [{"topic": {"name": TOPIC}}]}}}]},
        {"name": "simple-client", "rpc": "ReceiveMessage", "request": receive},
    ]}, tmp_path / "raw")
    assert statuses(lines, "send")[0]["code"] == "OK"
    for step in ("unknown-client", "simple-client"):   # never every lite topic's messages
        status = statuses(lines, step)[0]
        assert status["code"] == "UNRECOGNIZED_CLIENT_TYPE" and "is a LITE topic" in status["message"], (step, lines)
