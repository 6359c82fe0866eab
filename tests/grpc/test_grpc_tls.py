"""RocketMQ 5's Python client (5.1.2) to a proxy that enforces TLS (``tls.server.mode=enforcing``, the
certificate ``LocalCluster`` makes like ``cluster tls``), with access control: the client verifies
the proxy's certificate (grpc's ``ssl_channel_credentials()``: the roots in
GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, else grpc's bundled CAs, which do not know ours); a plaintext
client gets nothing through. The signed ``x-mq-date-time`` must be fresh: the client writes local
time labelled Z, so clients in UTC-12 and UTC+5:45 are served, while a correctly signed date from
2020 or two days ahead is UNAUTHORIZED naming the clock skew."""

from __future__ import annotations

import datetime

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster
from tests.grpc.grpc_client import received, require_grpc_client, run_grpc, sent, statuses

pytestmark = pytest.mark.timeout(300)

TOPIC, GROUP = "GrpcTlsTopic", "GrpcTlsGroup"
CREDENTIALS = {"access_key": "tlsuser", "secret_key": "tlsuser-secret"}
ACL = """
accounts:
  - accessKey: tlsuser
    secretKey: tlsuser-secret
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
# POSIX TZ values (no tz database needed): the sign is west-positive.
KATHMANDU, BAKER_ISLAND = "<+0545>-5:45", "<-12>12"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_grpc_client()
    acl_file = tmp_path_factory.mktemp("grpc-tls-conf") / "plain_acl.yml"
    acl_file.write_text(ACL)
    with LocalCluster(str(tmp_path_factory.mktemp("grpc-tls")), proxy=True, acl_file=str(acl_file),
                      tls="enforcing") as started:
        admin = Admin(config=started.client_config())
        admin.create_topic(TOPIC, 2)
        admin.shutdown()
        yield started


def _trusting(cluster, zone: str) -> dict:
    """The client's environment: our certificate as its root of trust, its clock in ``zone``."""
    return {"GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": cluster.tls_cert_path, "TZ": zone}


def test_the_5x_client_sends_and_receives_over_tls_from_other_time_zones(cluster, tmp_path):
    lines = run_grpc("produce", {"endpoint": cluster.proxy_endpoint, "topic": TOPIC, "tls": True,
                                 "request_timeout_s": 5, "messages": [{"body": f"tls-{i}"} for i in range(3)],
                                 **CREDENTIALS}, tmp_path / "p", env=_trusting(cluster, KATHMANDU))
    assert len(sent(lines)) == 3, lines
    lines = run_grpc("simple", {"endpoint": cluster.proxy_endpoint, "group": GROUP, "topic": TOPIC, "expect": 3,
                                "max_s": 60, "tls": True, **CREDENTIALS}, tmp_path / "c",
                     env=_trusting(cluster, BAKER_ISLAND))
    assert sorted(r["body"] for r in received(lines)) == [f"tls-{i}" for i in range(3)]


def test_the_client_verifies_the_certificate_and_plaintext_gets_nothing_through(cluster, tmp_path):
    # TLS without our certificate among its roots: grpc's own CAs refuse a self-signed one.
    untrusting = run_grpc("produce", {"endpoint": cluster.proxy_endpoint, "topic": TOPIC, "tls": True,
                                      "request_timeout_s": 3, "messages": [{"body": "x"}], **CREDENTIALS},
                          tmp_path / "u", env={"TZ": "UTC"})
    assert not sent(untrusting)
    plain = run_grpc("produce", {"endpoint": cluster.proxy_endpoint, "topic": TOPIC, "request_timeout_s": 3,
                                 "messages": [{"body": "x"}], **CREDENTIALS}, tmp_path / "n")
    assert not sent(plain)
    lines = run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "steps": [
        {"name": "plain", "rpc": "QueryRoute", "request": {"topic": {"name": TOPIC}}, "credentials": CREDENTIALS,
         "timeout_s": 3}]}, tmp_path / "raw")
    (status,) = statuses(lines, "plain")
    assert status["grpc_error"].startswith("UNAVAILABLE"), status


def _stamp(moment: datetime.datetime) -> str:
    return moment.strftime("%Y%m%dT%H%M%SZ")


def test_a_stale_or_future_signed_date_time_is_refused_naming_the_clock_skew(cluster, tmp_path):
    now = datetime.datetime.now(datetime.timezone.utc)
    dated = {"stale": "20200101T000000Z", "future": _stamp(now + datetime.timedelta(days=2)),
             "utc-now": _stamp(now), "utc+13-now": _stamp(now + datetime.timedelta(hours=13)),
             "utc-11-ten-minutes-ago": _stamp(now - datetime.timedelta(hours=11, minutes=10))}
    lines = run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "root_cert": cluster.tls_cert_path, "steps": [
        {"name": name, "rpc": "QueryRoute", "request": {"topic": {"name": TOPIC}},
         "credentials": {**CREDENTIALS, "date_time": stamp}} for name, stamp in dated.items()]}, tmp_path / "raw")
    for name in ("stale", "future"):
        (status,) = statuses(lines, name)
        assert status["code"] == "UNAUTHORIZED" and "clock skew" in status["message"], (name, status)
        assert dated[name] in status["message"]
    for name in ("utc-now", "utc+13-now", "utc-11-ten-minutes-ago"):
        (status,) = statuses(lines, name)
        assert status["code"] == "OK", (name, status)
