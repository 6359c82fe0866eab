"""RocketMQ 5's Python client (5.1.2) through the proxy of a cluster with access control, signing with
its own ``Credentials(ak, sk)`` (the ``authorization`` header: HMAC-SHA1 of x-mq-date-time): an
allowed account sends and receives; no credentials and a wrong secret are UNAUTHORIZED; an account
without PUB on a topic is FORBIDDEN, each with the reason; an account cannot end another topic's
half message with its transaction id."""

from __future__ import annotations

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster
from tests.grpc.grpc_client import received, require_grpc_client, run_grpc, sent, statuses

pytestmark = pytest.mark.timeout(240)

TOPIC, OTHER, OWNED, GROUP = "GrpcAclTopic", "GrpcAclOther", "GrpcAclOwned", "GrpcAclGroup"
SECRET = "grpcuser-secret"
ACL = """
accounts:
  - accessKey: grpcuser
    secretKey: grpcuser-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["GrpcAclTopic=PUB|SUB", "GrpcAclOther=SUB"]
  - accessKey: grpcowner
    secretKey: grpcowner-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["GrpcAclOwned=PUB|SUB"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_grpc_client()
    acl_file = tmp_path_factory.mktemp("grpc-acl-conf") / "plain_acl.yml"
    acl_file.write_text(ACL)
    with LocalCluster(str(tmp_path_factory.mktemp("grpc-acl")), proxy=True, acl_file=str(acl_file)) as started:
        admin = Admin(config=started.client_config())
        for topic in (TOPIC, OTHER):
            admin.create_topic(topic, 2)
        admin.create_topic(OWNED, 1, message_type="TRANSACTION")
        admin.shutdown()
        yield started


def _receive_three(cluster, home, topic: str, group: str, credentials: dict) -> list[dict]:
    return run_grpc("simple", {"endpoint": cluster.proxy_endpoint, "group": group, "topic": topic, "expect": 3,
                               "max_s": 60, **credentials}, home)


def _produce(cluster, home, topic: str, **credentials) -> list[dict]:
    return run_grpc("produce", {"endpoint": cluster.proxy_endpoint, "topic": topic, "request_timeout_s": 5,
                                "messages": [{"body": f"{topic}-{i}"} for i in range(3)], **credentials}, home)


def test_an_account_with_credentials_sends_and_receives(cluster, tmp_path):
    credentials = {"access_key": "grpcuser", "secret_key": SECRET}
    assert len(sent(_produce(cluster, tmp_path / "p", TOPIC, **credentials))) == 3
    lines = _receive_three(cluster, tmp_path / "c", TOPIC, GROUP, credentials)
    assert sorted(r["body"] for r in received(lines)) == [f"{TOPIC}-{i}" for i in range(3)]


def send_request(topic: str, message_id: str) -> dict:
    """A SendMessage request of one small NORMAL message (the raw driver's form)."""
    properties = {"messageId": message_id, "messageType": "NORMAL", "bodyEncoding": "IDENTITY"}
    return {"messages": [{"topic": {"name": topic}, "body": "Ym9keQ==", "systemProperties": properties}]}


def _send(topic: str) -> dict:
    return send_request(topic, "0102FC00000001ACL0000000000000001")


def test_missing_or_wrong_credentials_and_missing_permissions_are_refused(cluster, tmp_path):
    # The client itself: nothing sent without credentials, with a wrong secret, or without PUB.
    assert not sent(_produce(cluster, tmp_path / "a", TOPIC))
    assert not sent(_produce(cluster, tmp_path / "w", TOPIC, access_key="grpcuser", secret_key="not-the-secret"))
    assert not sent(_produce(cluster, tmp_path / "f", OTHER, access_key="grpcuser", secret_key=SECRET))
    # What it was told: the status of each refusal, its headers signed by the client's own signer.
    right, wrong = {"access_key": "grpcuser", "secret_key": SECRET}, {"access_key": "grpcuser", "secret_key": "x" * 9}
    lines = run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "steps": [
        {"name": "anonymous", "rpc": "SendMessage", "request": _send(TOPIC)},
        {"name": "wrong-secret", "rpc": "SendMessage", "request": _send(TOPIC), "credentials": wrong},
        {"name": "no-pub", "rpc": "SendMessage", "request": _send(OTHER), "credentials": right},
        {"name": "route-anonymous", "rpc": "QueryRoute", "request": {"topic": {"name": TOPIC}}},
        {"name": "allowed", "rpc": "SendMessage", "request": _send(TOPIC), "credentials": right},
    ]}, tmp_path / "raw")
    expected = {"anonymous": ("UNAUTHORIZED", "No accessKey is configured"),
                "wrong-secret": ("UNAUTHORIZED", "Check signature failed for accessKey=grpcuser"),
                "no-pub": ("FORBIDDEN", "No permission for topic:GrpcAclOther: accessKey=grpcuser needs PUB, has SUB"),
                "route-anonymous": ("UNAUTHORIZED", "No accessKey is configured"),
                "allowed": ("OK", "")}
    for step, (code, reason) in expected.items():
        (status,) = statuses(lines, step)
        assert status["code"] == code and reason in status.get("message", ""), (step, status)


def _committed(cluster) -> int:
    with Admin(config=cluster.client_config()) as admin:
        (endpoint,) = admin.master_endpoints().values()
        return admin.broker_runtime_info(endpoint)["transactions"]["committed"]


def test_an_account_cannot_end_another_topic_half_message(cluster, tmp_path):
    """grpcowner leaves a half open on GrpcAclOwned; grpcuser (PUB on GrpcAclTopic only) sends an
    EndTransaction with its transaction id, signed with its own credentials: naming its own topic the
    id names no half of that topic (INVALID_TRANSACTION_ID), naming the half's topic it lacks PUB
    (FORBIDDEN). The half stays open until grpcowner commits it; then its consumers see it."""
    owner, user = {"access_key": "grpcowner", "secret_key": "grpcowner-secret"}, {"access_key": "grpcuser",
                                                                                   "secret_key": SECRET}
    lines = run_grpc("transaction", {"endpoint": cluster.proxy_endpoint, "topic": OWNED,
                                     "messages": [{"body": "owned-half"}], **owner}, tmp_path / "tx")
    (half,) = [line for line in lines if "half" in line]

    def end(name: str, topic: str, credentials: dict) -> dict:
        return {"name": name, "rpc": "EndTransaction", "credentials": credentials, "request": {
            "topic": {"name": topic}, "messageId": half["message_id"], "transactionId": half["transaction_id"],
            "resolution": "COMMIT", "source": "SOURCE_CLIENT"}}

    committed = _committed(cluster)
    lines = run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "steps": [
        end("own-topic", TOPIC, user), end("their-topic", OWNED, user)]}, tmp_path / "forged")
    (own,), (theirs,) = statuses(lines, "own-topic"), statuses(lines, "their-topic")
    assert own["code"] == "INVALID_TRANSACTION_ID" and "no half message of topic GrpcAclTopic" in own["message"], own
    assert theirs["code"] == "FORBIDDEN" and "No permission for topic:GrpcAclOwned" in theirs["message"], theirs
    assert _committed(cluster) == committed   # still a half

    lines = run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "steps": [end("owner", OWNED, owner)]},
                     tmp_path / "owner")
    assert statuses(lines, "owner")[0]["code"] == "OK", lines
    assert _committed(cluster) == committed + 1
    lines = run_grpc("simple", {"endpoint": cluster.proxy_endpoint, "group": GROUP, "topic": OWNED, "expect": 1,
                                "max_s": 60, **owner}, tmp_path / "c")
    assert [r["body"] for r in received(lines)] == ["owned-half"]
