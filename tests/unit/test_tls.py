"""The pure parts of TLS and freshness (mode parsing, first-byte detection, the gRPC date-time window,
the settings' keys), the certificate ``cluster tls`` makes, and ``TlsStream`` driven as the door's
epoll loop drives it, over real loopback sockets with Python's ssl as the client."""

from __future__ import annotations

import datetime
import os
import select
import socket
import ssl
import stat
import struct
import threading
import time

import pytest
from cryptography import x509

from rocketbox.cluster.acl.signature import grpc_date_time_problem
from rocketbox.cluster.config import BrokerConfig, NamesrvConfig, StoreConfig
from rocketbox.cluster.config_file import BROKER_TABLE, NAMESRV_TABLE, read_settings
from rocketbox.cluster.remoting_format import FRAME_BYTES_MAX_DEFAULT, SERIALIZE_JSON, encode_frame
from rocketbox.cluster.tls import (ServerTls, TlsSettingsError, client_context, make_self_signed, parse_mode,
                                   starts_tls)
from rocketbox.cluster.topology import Topology, tls_overrides, transport_warning
from rocketbox.cluster.wire_format import Command

pytestmark = pytest.mark.timeout(60)


def test_modes_parse_as_rocketmq_names_them():
    assert [parse_mode(m) for m in ("disabled", " Permissive", "ENFORCING\n")] == ["disabled", "permissive",
                                                                                 "enforcing"]
    with pytest.raises(TlsSettingsError, match="one of disabled, permissive, enforcing"):
        parse_mode("strict")


def test_the_first_byte_tells_a_tls_handshake_from_a_remoting_frame():
    assert starts_tls(b"\x16\x03\x01\x02\x00")
    assert not starts_tls(encode_frame(Command(10, {"topic": "T"}, b"body"), SERIALIZE_JSON))
    assert not starts_tls(b"") and not starts_tls(b"GET / HTTP/1.1")
    # A frame's first byte is its length's top byte: 0x16 only from 352 MiB on, beyond every door.
    assert FRAME_BYTES_MAX_DEFAULT < 0x16 << 24


NOW = datetime.datetime(2026, 3, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


def _stamp(delta: datetime.timedelta) -> str:
    return (NOW + delta).strftime("%Y%m%dT%H%M%SZ")


@pytest.mark.parametrize("delta, fresh", [
    (datetime.timedelta(0), True),
    (datetime.timedelta(hours=8), True),                     # Java in Shanghai: local time labelled Z
    (datetime.timedelta(hours=14, minutes=15), True),         # Kiribati, 15 minutes fast
    (datetime.timedelta(hours=14, minutes=15, seconds=1), False),
    (-datetime.timedelta(hours=12, minutes=15), True),        # Baker Island, 15 minutes slow
    (-datetime.timedelta(hours=12, minutes=15, seconds=1), False),
    (datetime.timedelta(days=2), False),
    (datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc) - NOW, False),
])
def test_a_signed_date_time_is_fresh_within_15_minutes_in_some_time_zone(delta, fresh):
    problem = grpc_date_time_problem(_stamp(delta), NOW.timestamp(), 900)
    assert (problem is None) == fresh, problem
    if not fresh:
        assert problem == (f"x-mq-date-time {_stamp(delta)} is more than 15 minutes away from the proxy's clock "
                           f"(20260301T120000Z, read in any time zone from UTC-12 to UTC+14): clock skew, or a "
                           f"replayed request")


@pytest.mark.parametrize("text", ["", "2026-03-01T12:00:00Z", "20260301T120000", "20261301T120000Z", "x" * 100])
def test_a_date_time_that_is_none_is_named(text):
    assert "is not a date-time yyyyMMdd'T'HHmmss'Z'" in grpc_date_time_problem(text, NOW.timestamp(), 900)


def test_the_tls_keys_of_broker_conf_and_namesrv_conf():
    props = {"tls.server.mode": "enforcing", "tls.server.certPath": "/etc/rb/server.crt",
             "tls.server.keyPath": "/etc/rb/server.key"}
    expected = {"tls_server_mode": "enforcing", "tls_server_cert_path": "/etc/rb/server.crt",
                "tls_server_key_path": "/etc/rb/server.key"}
    assert read_settings(props, BROKER_TABLE).values == expected
    assert read_settings(props, NAMESRV_TABLE).values == expected
    with pytest.raises(ValueError, match="needs tls.server.certPath and tls.server.keyPath"):
        BrokerConfig(store=StoreConfig(store_dir="/tmp/x"), tls_server_mode="permissive").validate()
    with pytest.raises(ValueError, match="one of disabled, permissive, enforcing"):
        NamesrvConfig(tls_server_mode="on").validate()


def test_tls_settings_come_from_the_flags_else_broker_conf(tmp_path):
    assert tls_overrides("", "", "", {}) == {} and tls_overrides("disabled", "c", "k", None) == {}
    from_file = {"tls_server_mode": "permissive", "tls_server_cert_path": "c.pem", "tls_server_key_path": "k.pem"}
    got = tls_overrides("", "", "", from_file)
    assert got["tls_server_mode"] == "permissive" and got["tls_server_cert_path"] == os.path.abspath("c.pem")
    assert tls_overrides("enforcing", "/a.crt", "/a.key", from_file) == {
        "tls_server_mode": "enforcing", "tls_server_cert_path": "/a.crt", "tls_server_key_path": "/a.key"}


def test_a_reachable_host_with_access_control_and_no_tls_is_warned_about():
    plain = Topology("/d", (), (), acl_file="/d/plain_acl.yml")
    assert "captured request can be replayed as another request code" in transport_warning("10.0.0.5", plain)
    assert transport_warning("127.0.0.1", plain) is None
    assert transport_warning("10.0.0.5", Topology("/d", (), (), acl_file="/a", tls_mode="enforcing")) is None
    assert transport_warning("10.0.0.5", Topology("/d", (), ())) is None   # refused elsewhere, or --insecure


def test_cluster_tls_makes_a_self_signed_pair_for_the_box(tmp_path):
    cert_path, key_path = make_self_signed(str(tmp_path / "tls"), ("10.1.2.3", "box.example"), days=30)
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
    cert = x509.load_pem_x509_certificate(open(cert_path, "rb").read())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "10.1.2.3"]
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "box.example"]
    assert cert.issuer == cert.subject
    with pytest.raises(FileExistsError):
        make_self_signed(str(tmp_path / "tls"))
    ServerTls("enforcing", cert_path, key_path)   # loads
    with pytest.raises(TlsSettingsError, match="cannot use the certificate"):
        ServerTls("enforcing", cert_path, cert_path)


# ---------------------------------------------------------------- TlsStream, driven like the door

@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return make_self_signed(str(tmp_path_factory.mktemp("tls")))


def _accepted(listener: socket.socket):
    sock, _ = listener.accept()
    sock.setblocking(False)
    return sock


def _serve(stream, replies: int, deadline_s: float = 10.0) -> bytes:
    """Read until ``replies`` 4-byte words came, echoing each, as a readiness loop would."""
    got = b""
    deadline = time.monotonic() + deadline_s
    while len(got) < 4 * replies and time.monotonic() < deadline:
        select.select([stream.fileno()], [], [], 0.1)
        try:
            data = stream.recv(256 * 1024)
        except BlockingIOError:
            continue
        if not data:
            break
        got += data
        sent = 0
        while sent < len(data):
            try:
                sent += stream.send(memoryview(data)[sent:])
            except BlockingIOError:
                select.select([], [stream.fileno()], [], 0.1)
    return got


@pytest.mark.parametrize("mode", ["permissive", "enforcing"])
def test_a_tls_client_is_served_through_the_handshake_and_big_writes(pair, mode):
    door = ServerTls(mode, *pair)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        payload = os.urandom(300 * 1024 // 4 * 4)   # many records each way
        answers = []

        def client():
            context = client_context(pair[0])
            with context.wrap_socket(socket.create_connection(listener.getsockname()), server_hostname="127.0.0.1") as s:
                s.sendall(payload)
                received = b""
                while len(received) < len(payload):
                    received += s.recv(65536)
                answers.append(received)
        thread = threading.Thread(target=client)
        thread.start()
        stream = door.wrap(_accepted(listener))
        assert stream.handshaking
        echoed = _serve(stream, len(payload) // 4)
        thread.join(10)
        stream.close()
    assert echoed == payload and answers == [payload]
    assert door.handshakes == 1 and stream.encrypted


def test_permissive_serves_plain_bytes_untouched_and_enforcing_refuses_them(pair):
    frame = struct.pack(">I", 4) + b"ping"
    for mode in ("permissive", "enforcing"):
        door = ServerTls(mode, *pair)
        with socket.create_server(("127.0.0.1", 0)) as listener, \
                socket.create_connection(listener.getsockname()) as client:
            client.sendall(frame)
            stream = door.wrap(_accepted(listener))
            if mode == "permissive":
                assert _serve(stream, 2) == frame and not stream.encrypted
                assert client.recv(100) == frame
            else:
                select.select([stream.fileno()], [], [], 5)
                with pytest.raises(ConnectionRefusedError, match="enforces TLS"):
                    stream.recv(1024)
                assert door.plain_refused == 1
            stream.close()


def test_a_bad_handshake_fails_with_an_error_not_a_hang(pair):
    door = ServerTls("enforcing", *pair)
    with socket.create_server(("127.0.0.1", 0)) as listener, \
            socket.create_connection(listener.getsockname()) as client:
        client.sendall(b"\x16\x03\x01\x00\x20" + b"\x00" * 32)   # a handshake record with no ClientHello in it
        stream = door.wrap(_accepted(listener))
        select.select([stream.fileno()], [], [], 5)
        with pytest.raises(ssl.SSLError):
            for _ in range(100):
                try:
                    stream.recv(1024)
                except BlockingIOError:
                    select.select([stream.fileno()], [], [], 0.1)
        stream.close()
