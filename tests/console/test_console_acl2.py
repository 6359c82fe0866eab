"""The console's Access page under ACL 2.0: a Super user's login lists the users (never a password)
and the ACL entries, and makes and deletes both as mqadmin's verbs do; a user made there sends with
RocketMQ's remoting signature; a refused edit shows the broker's reason."""

from __future__ import annotations

import base64
import json

import pytest

from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.wire_format import Command
from tests.console.pages import fetch

pytestmark = pytest.mark.timeout(240)

TOPIC = "ConsoleAcl2Topic"
AUTH = {"authentication_enabled": True, "authorization_enabled": True,
        "init_authentication_user": json.dumps({"username": "rocketmq", "password": "init-secret"})}
SUPER = {"Authorization": "Basic " + base64.b64encode(b"rocketmq:init-secret").decode()}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("console-acl2")), console=True, broker_overrides=AUTH) as started:
        admin = Admin(config=started.client_config())
        admin.create_topic(TOPIC, 2)
        admin.shutdown()
        yield started


def _post(cluster, path: str, form: dict):
    return fetch(cluster.console_url, path, form=form, headers=SUPER)


def _send_as(cluster, user: str, password: str):
    header = {"a": "ConsoleAcl2Producers", "b": TOPIC, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}
    client = RemotingRpcClient(3000)
    try:
        return client.call(cluster.topology.brokers[0].remoting_address,
                           Command(RequestCode.SEND_MESSAGE_V2, sign_remoting(header, b"body", user, password), b"body"))
    finally:
        client.close()


def test_a_super_user_manages_users_and_acls_from_the_access_page(cluster):
    page = fetch(cluster.console_url, "/access", headers=SUPER)
    assert page.status == 200 and 'data-user="rocketmq"' in page.text and "init-secret" not in page.text
    made = _post(cluster, "/access/users", {"username": "alice", "password": "alice-secret", "user_type": "Normal"})
    assert made.status == 200 and "user alice created" in made.text and 'data-user="alice"' in made.text
    refused = _send_as(cluster, "alice", "alice-secret")
    assert refused.code == ResponseCode.NO_PERMISSION and "no matched policies" in refused.remark, refused
    entry = _post(cluster, "/access/acls", {"username": "alice", "resource": f"Topic:{TOPIC}", "action_Pub": "1",
                                            "decision": "Allow", "source_ips": "127.0.0.1"})
    assert entry.status == 200 and f'data-resource="Topic:{TOPIC}"' in entry.text, entry.text[:500]
    assert _send_as(cluster, "alice", "alice-secret").code == ResponseCode.SUCCESS
    again = _post(cluster, "/access/users", {"username": "alice", "password": "other-secret"})
    assert again.status == 502 and "The user is existed" in again.text
    no_action = _post(cluster, "/access/acls", {"username": "alice", "resource": "Topic:x", "decision": "Allow"})
    assert no_action.status == 400 and "tick at least one action" in no_action.text
    gone = _post(cluster, "/access/acls/delete", {"subject": "User:alice", "policy_type": "Custom",
                                                  "resource": f"Topic:{TOPIC}"})
    assert gone.status == 200 and f'data-resource="Topic:{TOPIC}"' not in gone.text
    deleted = _post(cluster, "/access/users/alice/delete", {})
    assert deleted.status == 200 and 'data-user="alice"' not in deleted.text


def test_a_normal_user_cannot_open_the_access_page(cluster):
    _post(cluster, "/access/users", {"username": "watcher", "password": "watcher-secret"})
    watcher = {"Authorization": "Basic " + base64.b64encode(b"watcher:watcher-secret").decode()}
    # The console rereads the users within a second of the broker's edit.
    wait_until(lambda: fetch(cluster.console_url, "/access", headers=watcher).status != 401, 30, interval_s=0.2,
               what="the console knowing the new user")
    page = fetch(cluster.console_url, "/access", headers=watcher)
    assert page.status == 403 and "User:watcher has no permission to access Cluster:DefaultCluster" in page.text
