"""Access control on the native ZeroMQ door of a live cluster, and on its metrics
endpoint: CURVE keys mapped to plain_acl.yml accounts, refusals answered NO_PERMISSION with the
reason, an admin-only request, a connection without CURVE, the file reread when it changes, the
refusals counted in the metrics, and the endpoint asking for credentials (``require_credentials``:
the cluster listens on 127.0.0.1 only, so the switch stands in for an address other hosts reach)."""

from __future__ import annotations

import base64
import dataclasses
import os
import time
import urllib.error
import urllib.request

import pytest
import zmq
from prometheus_client.parser import text_string_to_metric_families

from rocketbox.cluster import Message, Producer, PullConsumer
from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.acl.curve import CLIENTS_DIR, curve_dir, make_key_pair
from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.config import ClientConfig
from rocketbox.cluster.errors import AccessDenied, BrokerError, ClientError, TransportError
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import LocalCluster, pull_until, wait_until
from rocketbox.cluster.wire_format import Command
from tests.remoting.test_remoting_bad_input import _connect, _read_frame

pytestmark = pytest.mark.timeout(240)

TOPIC, OTHER = "AclTopic", "AclOtherTopic"
UNPROVEN_TIMEOUT_MS = 3_000
ACL = """
accounts:
  - accessKey: producer1
    secretKey: producer1-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["AclTopic=PUB|SUB"{extra}]
  - accessKey: reader01
    secretKey: reader01-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""


def write_acl(path: str, extra: str = "") -> None:
    """Replace the file whole (a rename), as an editor or config management does."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(ACL.replace("{extra}", extra))
    os.replace(tmp, path)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    conf = tmp_path_factory.mktemp("acl-conf")
    acl_file = str(conf / "plain_acl.yml")
    write_acl(acl_file)
    for account in ("producer1", "reader01"):
        make_key_pair(os.path.join(curve_dir(acl_file), CLIENTS_DIR), account)
    with LocalCluster(str(tmp_path_factory.mktemp("acl")), acl_file=acl_file, require_credentials=True,
                      broker_overrides={"remoting_unproven_timeout_ms": UNPROVEN_TIMEOUT_MS}) as started:
        admin = Admin(config=started.client_config())   # the cluster's own key: every right
        for topic in (TOPIC, OTHER):
            admin.create_topic(topic, 2)
        admin.shutdown()
        yield started


def _send(config, topic: str, body: bytes = b"x"):
    producer = Producer("AclProducers", config=config)
    try:
        return producer.send(Message(topic, body))
    finally:
        producer.shutdown()


def _refusal(excinfo) -> BrokerError:
    error = excinfo.value
    assert isinstance(error, BrokerError) and error.code == ResponseCode.NO_PERMISSION, error
    return error


def test_an_account_key_sends_where_it_may_and_is_refused_elsewhere(cluster):
    producer1 = cluster.client_config("producer1", send_retry_count=0)
    assert _send(producer1, TOPIC, b"allowed").status.name == "SEND_OK"
    with pytest.raises(ClientError) as refused:
        _send(producer1, OTHER)
    assert "No permission for topic:AclOtherTopic: accessKey=producer1 needs PUB, has DENY" in _refusal(refused).remark
    reader = PullConsumer("AclReaders", config=cluster.client_config("reader01"))
    try:
        assert b"allowed" in [m.body for m in pull_until(reader, TOPIC, 1)]
    finally:
        reader.shutdown()


def test_admin_only_requests_need_an_admin(cluster):
    admin = Admin(config=cluster.client_config("reader01"))
    try:
        with pytest.raises(ClientError) as refused:
            admin.delete_topic(OTHER)
        assert "Need admin permission for request code=215, but accessKey=reader01 is not" in _refusal(refused).remark
        assert OTHER in admin.topic_list()   # reading routes needs only an account
    finally:
        admin.shutdown()


def test_a_stranger_key_is_refused_and_no_key_gets_no_connection(cluster):
    public, secret = zmq.curve_keypair()
    server = cluster.client_config()
    stranger = cluster.client_config(curve_public_key=public.decode(), curve_secret_key=secret.decode(),
                                     send_retry_count=0)
    assert stranger.curve_server_key == server.curve_server_key
    with pytest.raises(ClientError) as refused:
        _send(stranger, TOPIC)
    assert f"the CURVE key {public.decode()} is no account's" in _refusal(refused).remark
    plain = cluster.client_config(curve_server_key="", curve_public_key="", curve_secret_key="",
                                  request_timeout_ms=1500, send_retry_count=0)
    with pytest.raises((ClientError, TransportError)):
        _send(plain, TOPIC)


def test_a_client_without_keys_is_told_at_once_that_access_control_refused_it(cluster):
    # Before, the door's refused handshake looked like a dead NameServer: "no NameServer answered ...
    # not reachable" after the whole time-out (here 20 s, so a refusal told at once cannot be a time-out).
    plain = cluster.client_config(curve_server_key="", curve_public_key="", curve_secret_key="",
                                  request_timeout_ms=20_000, send_retry_count=0)
    with pytest.raises(AccessDenied) as refused:
        _send(plain, TOPIC)
    said = str(refused.value)
    assert "access control refused this client" in said and "has no keys" in said, said
    assert "ClientConfig.for_account(NAME" in said and "cluster --account NAME" in said, said
    # Keys of another cluster: the CURVE handshake fails on the server key.
    public, secret = zmq.curve_keypair()
    other_server, _ = zmq.curve_keypair()
    foreign = cluster.client_config(curve_server_key=other_server.decode(), curve_public_key=public.decode(),
                                    curve_secret_key=secret.decode(), request_timeout_ms=20_000, send_retry_count=0)
    admin = Admin(config=foreign)
    try:
        with pytest.raises(AccessDenied, match="the server key it was given is not that door's"):
            admin.topic_list()
    finally:
        admin.shutdown()


def test_for_account_loads_an_accounts_keys_by_name_or_by_file(cluster):
    acl_file = cluster.topology.acl_file
    by_name = ClientConfig.for_account("producer1", acl_file=acl_file, namesrv_endpoints=cluster.topology.namesrv_endpoints,
                                       send_retry_count=0)
    assert _send(by_name, TOPIC, b"by name").status.name == "SEND_OK"
    with pytest.raises(BrokerError, match="access control refused it: act as an account"):
        _send(by_name, OTHER)
    key_file = os.path.join(curve_dir(acl_file), CLIENTS_DIR, "reader01.key_secret")
    by_file = ClientConfig.for_account(key_file, namesrv_endpoints=cluster.topology.namesrv_endpoints)
    assert by_file.curve_public_key != by_name.curve_public_key
    assert by_file.curve_server_key == by_name.curve_server_key == cluster.client_config().curve_server_key
    with pytest.raises(ValueError, match="`cluster acl keygen nobody` makes them"):
        ClientConfig.for_account("nobody", acl_file=acl_file)


def test_a_changed_file_is_reread(cluster):
    producer1 = cluster.client_config("producer1", send_retry_count=0)
    with pytest.raises(ClientError):
        _send(producer1, OTHER)
    write_acl(cluster.topology.acl_file, extra=', "AclOtherTopic=PUB"')
    try:
        def sent() -> bool:
            try:
                return _send(producer1, OTHER, b"after-reload").status.name == "SEND_OK"
            except ClientError:
                return False
        wait_until(sent, 30, interval_s=0.3, what="the reread file letting producer1 publish to AclOtherTopic")
    finally:
        write_acl(cluster.topology.acl_file)
        wait_until(lambda: not sent(), 30, interval_s=0.3, what="the restored file refusing producer1 again")


def _scrape(url: str, user: str | None = None, password: str = ""):
    request = urllib.request.Request(url)
    if user is not None:
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    with urllib.request.urlopen(request, timeout=30) as response:
        return [s for f in text_string_to_metric_families(response.read().decode()) for s in f.samples]


def test_metrics_ask_for_credentials_and_count_refusals(cluster):
    with pytest.raises(ClientError):
        _send(cluster.client_config("producer1", send_retry_count=0), OTHER)
    for user, password, status in ((None, "", 401), ("reader01", "wrong-secret", 401), ("nobody00", "x" * 8, 401)):
        with pytest.raises(urllib.error.HTTPError) as refused:
            _scrape(cluster.metrics_url, user, password)
        assert refused.value.code == status
        assert refused.value.headers["WWW-Authenticate"].startswith("Basic")
    samples = _scrape(cluster.metrics_url, "reader01", "reader01-secret")
    refusals = {(s.labels["door"], s.labels["kind"]): s.value for s in samples
                if s.name == "rocketbox_acl_refusals_total"}
    assert refusals.get(("native", "authorization"), 0) >= 1, refusals


def test_the_remoting_door_answers_no_permission_with_the_reason(cluster):
    """What a remoting client reads: NO_PERMISSION and RocketMQ's reason, for an unsigned, a
    badly signed and a signed request lacking PUB; a signed one with PUB is served."""
    address = cluster.topology.brokers[0].remoting_address
    client = RemotingRpcClient(3000)
    header = {"a": "AclProducers", "b": OTHER, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0"}

    def send(fields):
        return client.call(address, Command(RequestCode.SEND_MESSAGE_V2, fields, b"body"))
    try:
        cases = [(header, "No accessKey is configured"),
                 (sign_remoting(header, b"body", "producer1", "wrong-secret"), "Check signature failed for "
                                                                               "accessKey=producer1"),
                 (sign_remoting(header, b"body", "producer1", "producer1-secret"), "No permission for "
                                                                                   "topic:AclOtherTopic")]
        for fields, reason in cases:
            response = send(fields)
            assert response.code == ResponseCode.NO_PERMISSION and reason in response.remark, response
        allowed = send(sign_remoting({**header, "b": TOPIC}, b"body", "producer1", "producer1-secret"))
        assert allowed.code == ResponseCode.SUCCESS, allowed
    finally:
        client.close()


def test_rocketboxs_own_client_on_the_remoting_door_signs_with_an_account_or_is_told_to(cluster):
    unsigned = ClientConfig(transport="remoting", namesrv_endpoints=(cluster.remoting_namesrv,), send_retry_count=0)
    with pytest.raises(BrokerError) as refused:
        _send(unsigned, TOPIC)
    said = str(_refusal(refused))
    assert "No accessKey is configured" in said and "access control refused it" in said, said
    # Signing with an account, as RocketMQ's AclClientRPCHook does: served where the account may send.
    signed = dataclasses.replace(unsigned, access_key="producer1", secret_key="producer1-secret")
    assert _send(signed, TOPIC, b"signed over remoting").status.name == "SEND_OK"
    with pytest.raises(BrokerError) as refused:
        _send(signed, OTHER)
    assert "accessKey=producer1 needs PUB" in _refusal(refused).remark
    reader = PullConsumer("AclReaders", config=dataclasses.replace(unsigned, access_key="reader01",
                                                                    secret_key="reader01-secret"))
    try:
        assert b"signed over remoting" in [m.body for m in pull_until(reader, TOPIC, 1)]
    finally:
        reader.shutdown()
    wrong = dataclasses.replace(signed, secret_key="not-its-secret")
    with pytest.raises(BrokerError) as refused:
        _send(wrong, TOPIC)
    assert "Check signature failed for accessKey=producer1" in _refusal(refused).remark


def test_only_a_request_access_control_lets_through_proves_a_remoting_connection(cluster):
    """Under access control a remoting connection proves itself (``remoting_admission``) only with
    a request the guard let through: one whose requests are all refused NO_PERMISSION, however
    often it sends them, is closed once the unproven time-out has passed since its accept; one that
    sent a signed request keeps its place. (A read, whose fast-failure bound is 5 s: a send's
    200 ms is answered SYSTEM_BUSY, undispatched, on a loaded machine.)"""
    port = cluster.topology.brokers[0].remoting_port
    read = {"topic": TOPIC, "queueId": "0"}
    signed = sign_remoting(read, b"", "reader01", "reader01-secret")
    with _connect(port) as refused, _connect(port) as proven:
        decoder, started = rf.FrameDecoder(), time.monotonic()
        proven.sendall(rf.encode_frame(Command(RequestCode.GET_MAX_OFFSET, signed, opaque=1)))
        assert _read_frame(proven, rf.FrameDecoder()).code == ResponseCode.SUCCESS
        answers = 0
        while True:
            try:
                refused.sendall(rf.encode_frame(Command(RequestCode.GET_MAX_OFFSET, read, opaque=2)))
            except OSError:
                break
            try:
                answer = _read_frame(refused, decoder)
            except OSError:
                break   # closed between the send and the read
            if answer is None:
                break
            assert answer.code in (ResponseCode.NO_PERMISSION, ResponseCode.SYSTEM_BUSY), answer
            answers += 1
            assert time.monotonic() - started < UNPROVEN_TIMEOUT_MS / 1000 + 5, "never closed"
            time.sleep(0.2)
        assert answers >= 5 and time.monotonic() - started >= UNPROVEN_TIMEOUT_MS / 1000 - 0.5
        proven.sendall(rf.encode_frame(Command(RequestCode.GET_MAX_OFFSET, signed, opaque=3)))
        assert _read_frame(proven, rf.FrameDecoder()).code == ResponseCode.SUCCESS   # still open
