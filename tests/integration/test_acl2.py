"""ACL 2.0 on RocketBox's own doors, on a cluster migrated from a plain_acl.yml
(migrateAuthFromV1Enabled): the native door with a user's CURVE key, the remoting door's AUTH_* codes
signed by users of each type, and the console's HTTP Basic (a Super user; a Normal one is refused)."""

from __future__ import annotations

import base64
import json

import pytest

from rocketbox.cluster import Message, Producer
from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.errors import BrokerError, ClientError
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.wire_format import Command
from tests.cli_helpers import run_cli
from tests.console.pages import fetch

pytestmark = pytest.mark.timeout(240)

TOPIC, OTHER = "Acl2Topic", "Acl2Other"
PLAIN_ACL = """
accounts:
  - accessKey: operator1
    secretKey: operator1-secret
    admin: true
  - accessKey: producer1
    secretKey: producer1-secret
    defaultTopicPerm: DENY
    topicPerms: ["Acl2Topic=PUB"]
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    plain = tmp_path_factory.mktemp("acl2-conf") / "plain_acl.yml"
    plain.write_text(PLAIN_ACL)
    settings = {"acl_enable": True, "acl_file": str(plain), "migrate_auth_from_v1_enabled": True,
                "authentication_enabled": True, "authorization_enabled": True}
    with LocalCluster(str(tmp_path_factory.mktemp("acl2")), console=True, broker_overrides=settings) as started:
        admin = Admin(config=started.client_config())   # the cluster's own key: every right
        for topic in (TOPIC, OTHER):
            admin.create_topic(topic, 2)
        admin.shutdown()
        run_cli("acl", "keygen", "producer1", data_dir=started.data_dir)
        wait_until(lambda: _key_known(started), 30, interval_s=0.2, what="producer1's new key reread")
        yield started


def _key_known(cluster) -> bool:
    """Whether every process reread the key directory (each checks it every second)."""
    try:
        return _send(cluster.client_config("producer1", send_retry_count=0), TOPIC).status.name == "SEND_OK"
    except BrokerError as exc:
        if "CURVE key" not in exc.remark:
            raise
        return False


def _send(config, topic: str):
    producer = Producer("Acl2Producers", config=config)
    try:
        return producer.send(Message(topic, b"x"))
    finally:
        producer.shutdown()


def test_a_migrated_user_sends_on_the_native_door_with_its_curve_key(cluster):
    assert cluster.topology.acl_file.endswith("auth.json")
    producer1 = cluster.client_config("producer1", send_retry_count=0)
    assert _send(producer1, TOPIC).status.name == "SEND_OK"
    with pytest.raises(ClientError) as refused:
        _send(producer1, OTHER)
    error = refused.value
    assert isinstance(error, BrokerError) and error.code == ResponseCode.NO_PERMISSION, error
    assert f"User:producer1 has no permission to access Topic:{OTHER} from 127.0.0.1, the decision is deny." \
        in error.remark


def test_the_admin_codes_answer_by_the_callers_user_type(cluster):
    address = cluster.topology.brokers[0].remoting_address
    client = RemotingRpcClient(3000)

    def call(code: int, fields: dict, body, user: str):
        payload = json.dumps(body).encode() if body is not None else b""
        signed = sign_remoting(fields, payload, user, f"{user}-secret")
        return client.call(address, Command(code, signed, payload))
    try:
        normal = call(RequestCode.AUTH_CREATE_USER, {"username": "dave"}, {"password": "dave-secret"}, "producer1")
        assert normal.code == ResponseCode.NO_PERMISSION, normal
        assert "User:producer1 has no permission to access Cluster:DefaultCluster" in normal.remark
        made = call(RequestCode.AUTH_CREATE_USER, {"username": "dave"},
                    {"password": "dave-secret", "userType": "Normal"}, "operator1")
        assert made.code == ResponseCode.SUCCESS, made
        assert call(RequestCode.AUTH_CREATE_ACL, {"subject": "User:dave"}, {"policies": [{"entries": [
            {"resource": "Cluster:*", "actions": ["Update", "Get"], "decision": "Allow"}]}]},
            "operator1").code == ResponseCode.SUCCESS
        # dave may edit users now, but only a Super user makes a Super user (Apache's rule).
        assert call(RequestCode.AUTH_CREATE_USER, {"username": "erin"}, {"password": "erin-secret"},
                    "dave").code == ResponseCode.SUCCESS
        refused = call(RequestCode.AUTH_CREATE_USER, {"username": "frank"},
                       {"password": "frank-secret", "userType": "Super"}, "dave")
        assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR,
                                                  "The super user can only be create by super user")
        blank = call(RequestCode.AUTH_GET_USER, {"username": ""}, None, "operator1")
        assert (blank.code, blank.remark) == (ResponseCode.INVALID_PARAMETER, "The username is blank")
        listed = call(RequestCode.AUTH_LIST_USER, {"filter": "rin"}, None, "dave")
        assert [u["username"] for u in json.loads(listed.body)] == ["erin"]
    finally:
        client.close()


def _basic(user: str, password: str) -> dict:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_the_console_serves_a_super_user(cluster):
    url = cluster.console_url
    for headers, status in (({}, 401), (_basic("operator1", "wrong-secret"), 401),
                            (_basic("producer1", "producer1-secret"), 403)):
        assert fetch(url, "/topics", headers=headers).status == status, headers
    assert "Cluster:DefaultCluster" in fetch(url, "/topics", headers=_basic("producer1", "producer1-secret")).text
    page = fetch(url, "/topics", headers=_basic("operator1", "operator1-secret"))
    assert page.status == 200 and TOPIC in page.text


def test_malformed_admin_requests_are_answered_and_the_broker_keeps_serving(cluster):
    address = cluster.topology.brokers[0].remoting_address
    client = RemotingRpcClient(3000)

    def call(code: int, fields: dict, payload: bytes):
        return client.call(address, Command(code, sign_remoting(fields, payload, "operator1", "operator1-secret"),
                                            payload))
    try:
        for code, fields, payload in ((RequestCode.AUTH_CREATE_USER, {"username": "gina"}, b"{not json"),
                                      (RequestCode.AUTH_CREATE_USER, {"username": "gina"}, b"[1, 2]"),
                                      (RequestCode.AUTH_CREATE_USER, {"username": "gina"}, b'{"password": 7}'),
                                      (RequestCode.AUTH_CREATE_ACL, {"subject": "User:operator1"},
                                       b'{"policies": "all"}'),
                                      (RequestCode.AUTH_CREATE_ACL, {"subject": "User:operator1"},
                                       b'{"policies": [{"entries": [7]}]}'),
                                      (RequestCode.AUTH_UPDATE_ACL, {"subject": "Group:x"},
                                       b'{"policies": [{"entries": [{"resource": "*", "actions": ["Pub"], '
                                       b'"decision": "Allow"}]}]}'),
                                      (RequestCode.AUTH_DELETE_ACL, {"subject": "nobody"}, b""),
                                      (RequestCode.AUTH_CREATE_USER, {"username": "gina"}, b"[" * 100_000)):
            answer = call(code, fields, payload)
            assert answer.code != ResponseCode.SUCCESS and answer.remark, (code, payload[:40], answer)
        blank = call(RequestCode.AUTH_CREATE_USER, {"username": "gina"}, b'{"password": ""}')
        assert (blank.code, blank.remark) == (ResponseCode.NO_PERMISSION, "password can not be blank")
        assert call(RequestCode.AUTH_GET_USER, {"username": "operator1"}, b"").code == ResponseCode.SUCCESS
        assert "gina" not in json.loads(call(RequestCode.AUTH_LIST_USER, {}, b"").body or b"[]")
    finally:
        client.close()
