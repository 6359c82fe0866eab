"""ACL 2.0 judged by RocketMQ 5's Python client (5.1.2) through the proxy, signing with its own
``Credentials(ak, sk)`` as before: a user made with the ``cluster`` verbs sends and receives; no
credentials, a wrong password and an unknown user are UNAUTHORIZED, a user without a policy or with a
Deny is FORBIDDEN, each with Apache's reason."""

from __future__ import annotations

import json

import pytest

from rocketbox.cluster.testing import LocalCluster, wait_until
from tests.acl2_users import create_users_and_acls
from tests.cli_helpers import run_cli
from tests.grpc.grpc_client import received, require_grpc_client, run_grpc, sent, statuses
from tests.grpc.test_grpc_acl import _produce, _receive_three, send_request

pytestmark = pytest.mark.timeout(240)

TOPIC, CLOSED, GROUP = "GrpcAcl2Topic", "GrpcAcl2Closed", "GrpcAcl2Group"
AUTH = {"authentication_enabled": True, "authorization_enabled": True}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_grpc_client()
    with LocalCluster(str(tmp_path_factory.mktemp("grpc-acl2")), proxy=True, broker_overrides=AUTH) as started:
        create_users_and_acls(started, topic=TOPIC, closed=CLOSED, group=GROUP, user=("grpcuser", "grpcuser-secret"),
                              unpermitted=("-u", "grpcbob", "-p", "grpcbob-secret"))
        wait_until(lambda: _proxy_knows(started, tmp_path_factory.mktemp("grpc-acl2-wait")), 30, interval_s=0.2,
                   what="the proxy rereading the users (once a second)")
        yield started


def _proxy_knows(cluster, home) -> bool:
    lines = run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "steps": [
        {"name": "route", "rpc": "QueryRoute", "request": {"topic": {"name": TOPIC}},
         "credentials": {"access_key": "grpcbob", "secret_key": "grpcbob-secret"}}]}, home)
    found = statuses(lines, "route")
    return bool(found) and all(status.get("code") not in (None, "UNAUTHORIZED") for status in found)


def test_a_user_made_with_the_cli_sends_and_receives(cluster, tmp_path):
    credentials = {"access_key": "grpcuser", "secret_key": "grpcuser-secret"}
    assert len(sent(_produce(cluster, tmp_path / "p", TOPIC, **credentials))) == 3
    lines = _receive_three(cluster, tmp_path / "c", TOPIC, GROUP, credentials)
    assert sorted(r["body"] for r in received(lines)) == [f"{TOPIC}-{i}" for i in range(3)]


def _send(topic: str) -> dict:
    return send_request(topic, "0102FC00000001ACL0000000000000002")


def test_refusals_carry_apaches_statuses_and_reasons(cluster, tmp_path):
    assert not sent(_produce(cluster, tmp_path / "b", TOPIC, access_key="grpcbob", secret_key="grpcbob-secret"))
    user = {"access_key": "grpcuser", "secret_key": "grpcuser-secret"}
    lines = run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "steps": [
        {"name": "anonymous", "rpc": "SendMessage", "request": _send(TOPIC)},
        {"name": "wrong-password", "rpc": "SendMessage", "request": _send(TOPIC),
         "credentials": {"access_key": "grpcuser", "secret_key": "x" * 9}},
        {"name": "unknown", "rpc": "SendMessage", "request": _send(TOPIC),
         "credentials": {"access_key": "nobody", "secret_key": "x" * 9}},
        {"name": "no-policy", "rpc": "SendMessage", "request": _send(TOPIC),
         "credentials": {"access_key": "grpcbob", "secret_key": "grpcbob-secret"}},
        {"name": "denied", "rpc": "SendMessage", "request": _send(CLOSED), "credentials": user},
        {"name": "allowed", "rpc": "SendMessage", "request": _send(TOPIC), "credentials": user},
    ]}, tmp_path / "raw")
    expected = {"anonymous": ("UNAUTHORIZED", "username cannot be null."),
                "wrong-password": ("UNAUTHORIZED", "check signature failed."),
                "unknown": ("UNAUTHORIZED", "User:nobody is not found."),
                "no-policy": ("FORBIDDEN", f"User:grpcbob has no permission to access Topic:{TOPIC} from 127.0.0.1, "
                                           f"no matched policies."),
                "denied": ("FORBIDDEN", f"User:grpcuser has no permission to access Topic:{CLOSED} from 127.0.0.1, "
                                        f"the decision is deny."),
                "allowed": ("OK", "")}
    for step, (code, reason) in expected.items():
        (status,) = statuses(lines, step)
        assert status["code"] == code and reason in status.get("message", ""), (step, status)
    assert json.loads(run_cli("getUser", "-u", "grpcbob", "--json", data_dir=cluster.data_dir,
                              namesrv=cluster.namesrv).stdout)["userType"] == "Normal"
