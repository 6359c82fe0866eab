"""RocketMQ 5's Python client (5.1.2) through the proxy of a cluster with access control, signing with
its own ``Credentials(ak, sk)`` (the ``authorization`` header: HMAC-SHA1 of x-mq-date-time): an
allowed account sends and receives; no credentials and a wrong secret are UNAUTHORIZED; an account
without PUB on a topic is FORBIDDEN, each with the reason."""

from __future__ import annotations

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster
from tests.grpc.grpc_client import received, require_grpc_client, run_grpc, sent, statuses

pytestmark = pytest.mark.timeout(240)

TOPIC, OTHER, GROUP = "GrpcAclTopic", "GrpcAclOther", "GrpcAclGroup"
SECRET = "grpcuser-secret"
ACL = """
accounts:
  - accessKey: grpcuser
    secretKey: grpcuser-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["GrpcAclTopic=PUB|SUB", "GrpcAclOther=SUB"]
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
        admin.shutdown()
        yield started


def _produce(cluster, home, topic: str, **credentials) -> list[dict]:
    return run_grpc("produce", {"endpoint": cluster.proxy_endpoint, "topic": topic, "request_timeout_s": 5,
                                "messages": [{"body": f"{topic}-{i}"} for i in range(3)], **credentials}, home)


def test_an_account_with_credentials_sends_and_receives(cluster, tmp_path):
    credentials = {"access_key": "grpcuser", "secret_key": SECRET}
    assert len(sent(_produce(cluster, tmp_path / "p", TOPIC, **credentials))) == 3
    lines = run_grpc("simple", {"endpoint": cluster.proxy_endpoint, "group": GROUP, "topic": TOPIC, "expect": 3,
                                "max_s": 60, **credentials}, tmp_path / "c")
    assert sorted(r["body"] for r in received(lines)) == [f"{TOPIC}-{i}" for i in range(3)]


def _send(topic: str) -> dict:
    properties = {"messageId": "0102FC00000001ACL0000000000000001", "messageType": "NORMAL", "bodyEncoding": "IDENTITY"}
    return {"messages": [{"topic": {"name": topic}, "body": "Ym9keQ==", "systemProperties": properties}]}


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
