"""RocketMQ's C++ client (PyPI rocketmq 0.4.4) against a cluster with access control, signing with
its own ``set_session_credentials`` (ACL 1.0's HMAC over the sorted extFields and the body): an
allowed account sends and consumes; a wrong secret is refused; an account without PUB on a topic
gets NO_PERMISSION; an unsigned client passes once its address is globally white (the file reread).
The NameServer and the broker log each refusal with its reason and never the secret."""

from __future__ import annotations

import glob
import os

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster, wait_until
from tests.remoting.cpp_client import require_cpp_client, run_cpp, sent_ok

TOPIC, OTHER, GROUP = "CppAclTopic", "CppAclOther", "CppAclGroup"
SECRET = "cppwriter-secret"
ACL = """
globalWhiteRemoteAddresses: [{white}]
accounts:
  - accessKey: cppwriter
    secretKey: cppwriter-secret
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: ["CppAclTopic=PUB|SUB", "CppAclOther=SUB"]
"""


def write_acl(path: str, white: str = "") -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(ACL.replace("{white}", white))
    os.replace(tmp, path)


@pytest.fixture(autouse=True)
def _cpp_client():
    require_cpp_client()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    acl_file = str(tmp_path_factory.mktemp("cpp-acl-conf") / "plain_acl.yml")
    write_acl(acl_file)
    with LocalCluster(str(tmp_path_factory.mktemp("cpp-acl")), acl_file=acl_file) as started:
        admin = Admin(config=started.client_config())
        for topic in (TOPIC, OTHER):
            admin.create_topic(topic, 2)
        admin.shutdown()
        yield started


def _produce(cluster, home, topic: str, count: int, **credentials) -> list[dict]:
    messages = [{"topic": topic, "body": f"{topic}-{i}"} for i in range(count)]
    return run_cpp("produce", {"namesrv": cluster.remoting_namesrv, "messages": messages, "timeout_ms": 2000,
                               **credentials}, home)


def _logs(cluster) -> str:
    text = ""
    for path in glob.glob(os.path.join(cluster.data_dir, "logs", "*")):
        with open(path, errors="replace") as f:
            text += f.read()
    return text


def test_a_signed_client_sends_and_consumes(cluster, tmp_path):
    credentials = {"access_key": "cppwriter", "secret_key": SECRET}
    results = _produce(cluster, tmp_path / "p", TOPIC, 10, **credentials)
    assert len(sent_ok(results)) == 10, results
    received = run_cpp("consume", {"namesrv": cluster.remoting_namesrv, "topic": TOPIC, "group": GROUP, "expect": 10,
                                   "timeout_s": 60, **credentials}, tmp_path / "c")
    bodies = {r["body"] for r in received if "body" in r}
    assert bodies == {f"{TOPIC}-{i}" for i in range(10)}, received


def test_a_wrong_secret_and_a_missing_permission_are_refused(cluster, tmp_path):
    wrong = _produce(cluster, tmp_path / "w", TOPIC, 2, access_key="cppwriter", secret_key="not-the-secret")
    assert not sent_ok(wrong) and all("error" in r for r in wrong if "i" in r), wrong
    no_pub = _produce(cluster, tmp_path / "n", OTHER, 2, access_key="cppwriter", secret_key=SECRET)
    # The client retries a refused send and then reports its own "No route info" error: the broker's
    # answer (NO_PERMISSION and the reason) is in the broker's log.
    assert not sent_ok(no_pub) and all("error" in r for r in no_pub if "i" in r), no_pub
    logs = _logs(cluster)
    assert "Check signature failed for accessKey=cppwriter" in logs
    assert ("refused request code 10 from 127.0.0.1 on the remoting door: No permission for topic:CppAclOther: "
            "accessKey=cppwriter needs PUB, has SUB") in logs
    assert SECRET not in logs and "not-the-secret" not in logs


def test_an_unsigned_client_passes_once_its_address_is_white(cluster, tmp_path):
    refused = _produce(cluster, tmp_path / "u1", TOPIC, 1)
    assert not sent_ok(refused), refused
    # What the README says this client sees: its own "No route info" (the NameServer refused it the
    # route; the reason is in the NameServer's log, within its rate limit).
    assert any("No route info" in r.get("error", "") for r in refused), refused
    write_acl(cluster.topology.acl_file, white='"127.0.0.*"')
    try:
        def passes() -> bool:
            return len(sent_ok(_produce(cluster, tmp_path / "u2", TOPIC, 1))) == 1
        wait_until(passes, 60, interval_s=0.5, what="the unsigned client let in by the reread white address")
    finally:
        write_acl(cluster.topology.acl_file)
