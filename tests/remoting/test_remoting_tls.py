"""TLS on the remoting doors (cluster/tls.py; RocketMQ's tls.server.mode), with real processes.

Enforcing: RocketBox's own remoting client sends and pulls over TLS through a NameServer and a
broker, checking their certificate (one it does not trust is refused; with verification off, as
RocketMQ's clients' test mode, it connects); a plain connection (a raw remoting frame) is closed
unanswered and the door serves on; a flood of stalled,
fake and garbage handshakes leaves it serving. Permissive: the C++ client's plain TCP (0.4.4 has
no TLS) and our TLS client share one port.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct

import pytest

from rocketbox.cluster import Admin, Message, Producer, PullConsumer
from rocketbox.cluster.client_transport import TransportError
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.remoting_format import SERIALIZE_JSON, encode_frame
from rocketbox.cluster.testing import LocalCluster, child_record, pull_until
from rocketbox.cluster.tls import make_self_signed
from rocketbox.cluster.wire_format import Command
from tests.conftest import client_config
from tests.remoting.cpp_client import require_cpp_client, run_cpp, sent_ok

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("tls-enforcing")), tls="enforcing") as cluster:
        yield cluster


def _doors(cluster) -> list[tuple[str, int]]:
    namesrv = cluster.topology.namesrvs[0]
    broker = cluster.topology.brokers[0]
    return [(namesrv.host, namesrv.remoting_port), (broker.host, broker.remoting_port)]


def _send_and_pull(cluster, topic: str, count: int, **changes) -> list:
    cfg = client_config(cluster, transport="remoting", **changes)
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, 2)
    with Producer(f"{topic}PG", config=cfg) as producer:
        for i in range(count):
            producer.send(Message(topic, b"%s-%d" % (topic.encode(), i) + b"x" * (i * 997)))
    with PullConsumer(f"{topic}CG", config=cfg) as consumer:
        return pull_until(consumer, topic, count)


def test_our_client_sends_and_pulls_over_tls(enforcing):
    got = _send_and_pull(enforcing, "TlsSendPull", 40)
    assert sorted(m.body[:m.body.index(b"x")] if b"x" in m.body else m.body for m in got) == \
        sorted(b"TlsSendPull-%d" % i for i in range(40))
    # Bodies past one TLS record (16 KiB) arrived whole.
    assert max(len(m.body) for m in got) > 32 * 1024


def test_the_client_checks_the_certificate(enforcing, tmp_path):
    stranger_cert, _ = make_self_signed(str(tmp_path / "stranger"))
    with pytest.raises((TransportError, ClientError), match="CERTIFICATE_VERIFY_FAILED"):
        with Admin(config=client_config(enforcing, transport="remoting", tls_trust_cert_path=stranger_cert)) as admin:
            admin.create_topic("NeverMade", 1)
    unverified = client_config(enforcing, transport="remoting", tls_trust_cert_path="", tls_verify_server=False)
    assert len(_send_and_pull(enforcing, "TlsUnverified", 3, tls_trust_cert_path="", tls_verify_server=False)) == 3
    assert unverified.tls_enable


def _closed_unanswered(sock: socket.socket) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(4096) == b""
    except ConnectionResetError:
        return True


def test_plain_tcp_is_closed_unanswered_and_the_doors_serve_on(enforcing):
    broker_pid = child_record(enforcing.data_dir, "broker-a")["pid"]
    frame = encode_frame(Command(RequestCode.GET_BROKER_RUNTIME_INFO, {}), SERIALIZE_JSON)
    for host, port in _doors(enforcing):
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(frame)
            assert _closed_unanswered(sock), (host, port)
    assert len(_send_and_pull(enforcing, "TlsAfterPlain", 5)) == 5
    assert child_record(enforcing.data_dir, "broker-a")["pid"] == broker_pid


def test_a_flood_of_bad_handshakes_leaves_the_door_serving(enforcing):
    host, port = _doors(enforcing)[1]
    broker_pid = child_record(enforcing.data_dir, "broker-a")["pid"]
    fake_hello = b"\x16\x03\x01\x00\x40" + os.urandom(64)   # a handshake record holding no ClientHello
    stalled = []
    for i in range(300):
        sock = socket.create_connection((host, port), timeout=5)
        kind = i % 4
        if kind == 0:
            sock.sendall(fake_hello)
        elif kind == 1:
            sock.sendall(os.urandom(512))
        elif kind == 2:
            sock.sendall(b"\x16\x03\x01\x02\x00\x01")   # a ClientHello's first bytes, then silence
            stalled.append(sock)
            continue
        else:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            with context.wrap_socket(sock) as tls:   # a whole handshake, then gone
                tls.sendall(struct.pack(">I", 0xFFFFFFF0))   # and an impossible frame length
                continue
        sock.close()
    try:
        assert len(_send_and_pull(enforcing, "TlsAfterFlood", 5)) == 5
    finally:
        for sock in stalled:
            sock.close()
    assert child_record(enforcing.data_dir, "broker-a")["pid"] == broker_pid


def test_permissive_serves_plain_and_tls_clients_on_one_port(tmp_path):
    require_cpp_client()
    with LocalCluster(str(tmp_path / "permissive"), tls="permissive") as cluster:
        with Admin(config=client_config(cluster, transport="remoting")) as admin:   # over TLS
            admin.create_topic("TlsMixed", 2)
        results = run_cpp("produce", {"namesrv": cluster.remoting_namesrv,
                                      "messages": [{"topic": "TlsMixed", "body": f"cpp-{i}"} for i in range(5)]},
                          tmp_path / "cpp")
        assert len(sent_ok(results)) == 5, results
        for changes in ({}, {"tls_enable": False}):   # our client over TLS, then plain, to the same ports
            with PullConsumer(f"Mixed{len(changes)}", config=client_config(cluster, transport="remoting",
                                                                            **changes)) as consumer:
                got = pull_until(consumer, "TlsMixed", 5)
            assert sorted(m.body for m in got) == [b"cpp-%d" % i for i in range(5)]
