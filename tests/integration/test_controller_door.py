"""The failover controller's Raft port against peers that are not members (controller/raft.py,
raft_wire.py, secret.py), with a real NameServer: it binds only the NameServer's host, runs no
pickle a stranger sends (nor one a holder of the secret sends that names a code-running global),
drops connections that buffer too much or crowd it before proving themselves, and keeps
electing and serving throughout; its controller codes need an admin under access control.
"""

from __future__ import annotations

import os
import pickle
import socket
import stat
import struct
import time
import zlib

import psutil
import pytest
from pysyncobj.encryptor import getEncryptor

from rocketbox.cluster import Message, Producer, SendStatus
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.controller.raft_wire import UNPROVEN_CONNECTIONS_MAX
from rocketbox.cluster.controller.secret import read_secret
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config

GROUP = "broker-a"


class _CreatesFile:
    """Unpickled, it creates ``path``: the file existing afterwards is the proof that code ran."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return open, (self.path, "w")


def _frame(message, secret: str | None = None) -> bytes:
    """PySyncObj's frame: a native int length and the zlib'd pickle, Fernet-encrypted under a secret."""
    data = zlib.compress(pickle.dumps(message, 2), 3)
    if secret is not None:
        data = getEncryptor(secret).encrypt_at_time(data, int(time.monotonic()))
    return struct.pack("i", len(data)) + data


def _closed_by_peer(sock: socket.socket, timeout_s: float = 10.0) -> bool:
    """True once the controller closed ``sock`` (EOF or reset), False if it is still open at the deadline."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if sock.recv(65536) == b"":
                return True
        except socket.timeout:
            continue
        except ConnectionError:
            return True
    return False


def _controller_address(cluster) -> tuple[str, int]:
    host, port = cluster.topology.namesrvs[0].controller_address.rsplit(":", 1)
    return host, int(port)


def _await_master(cluster, admin) -> str:
    return cluster.await_group_serving(GROUP, admin, timeout_s=60)


def test_the_controller_port_binds_its_host_and_runs_no_code_from_peers(start_cluster, tmp_path):
    cluster = start_cluster(slaves=1, failover=True)
    admin = Admin(config=client_config(cluster))
    _await_master(cluster, admin)
    host, port = _controller_address(cluster)

    listening = [c.laddr for c in psutil.Process(cluster.pid("namesrv-0")).net_connections(kind="tcp")
                 if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    assert [a.ip for a in listening] == ["127.0.0.1"], f"the controller listens on {listening}"

    secret_file = cluster.topology.namesrvs[0].controller_secret_file
    assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600
    secret = read_secret(secret_file)
    attempts = {
        "a plain pickle (no secret)": lambda marker: _frame(_CreatesFile(marker)),
        "encrypted under a wrong secret": lambda marker: _frame(_CreatesFile(marker), "0f" * 32),
        # A holder of the secret gets its frame decrypted, and still no global that runs code.
        "encrypted under the cluster's secret": lambda marker: _frame(_CreatesFile(marker), secret),
    }
    for what, frame in attempts.items():
        marker = str(tmp_path / f"ran-{len(what)}")
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(frame(marker))
            closed = _closed_by_peer(sock)
        assert not os.path.exists(marker), f"{what}: the controller ran the pickle's code"
        assert closed, f"{what}: the controller kept the connection open"

    # Still the controller: a master, sends answered, metadata served.
    _await_master(cluster, admin)
    with Producer("CtlDoorPG", config=client_config(cluster)) as producer:
        assert producer.send(Message("CtlDoorTopic", b"still serving")).status == SendStatus.SEND_OK
    admin.shutdown()


def test_unproven_connections_are_bounded_in_bytes_and_number(start_cluster):
    cluster = start_cluster(slaves=1, failover=True)
    admin = Admin(config=client_config(cluster))
    _await_master(cluster, admin)
    address = _controller_address(cluster)
    rss_before = psutil.Process(cluster.pid("namesrv-0")).memory_info().rss

    # A frame declared at 1 GiB: cut off after a few KiB, before any of it is decrypted.
    with socket.create_connection(address, timeout=5) as sock:
        sock.sendall(struct.pack("i", 1 << 30))
        try:
            for _ in range(64):
                sock.sendall(b"\0" * 65536)
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert _closed_by_peer(sock), "a connection buffering a 1 GiB frame was kept"

    # More idle strangers than the cap: the oldest make room for the newest.
    crowd = [socket.create_connection(address, timeout=5) for _ in range(UNPROVEN_CONNECTIONS_MAX + 8)]
    try:
        for sock in crowd[-1:]:
            sock.sendall(b"\0")   # the last one is accepted and read
        assert _closed_by_peer(crowd[0]), "the oldest unproven connection was not dropped for new ones"
    finally:
        for sock in crowd:
            sock.close()
    assert psutil.Process(cluster.pid("namesrv-0")).memory_info().rss - rss_before < 64 * 1024 * 1024

    _await_master(cluster, admin)
    with Producer("CtlFloodPG", config=client_config(cluster)) as producer:
        assert producer.send(Message("CtlFloodTopic", b"still serving")).status == SendStatus.SEND_OK
    admin.shutdown()


ACL = """accounts:
  - accessKey: plainuser
    secretKey: plainsecret1
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
  - accessKey: adminuser
    secretKey: adminsecret1
    admin: true
"""


@pytest.mark.parametrize("code", [RequestCode.CONTROLLER_REGISTER_BROKER, RequestCode.BROKER_HEARTBEAT,
                                  RequestCode.CONTROLLER_GET_METADATA_INFO])
def test_controller_codes_need_an_admin(start_cluster, tmp_path, code):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    cluster = start_cluster(slaves=1, failover=True, acl_file=str(acl_file))
    admin = Admin(config=cluster.client_config())   # the cluster's own key
    # (_await_master asks the brokers without keys: here the controller's word is enough.)
    master = wait_until(lambda: cluster.master_child(GROUP, admin), 60, what="a master elected")
    namesrv = cluster.remoting_namesrv.split(";")[0]
    # A made-up replica 7 of the group at a high epoch and offset: registered, it could be elected.
    fake = {"brokerName": GROUP, "brokerId": "7", "brokerAddr": "127.0.0.1:1", "haServerAddr": "127.0.0.1:2",
            "epoch": "1000", "maxOffset": str(1 << 40)}
    client = RemotingRpcClient(3000)

    def ask(access_key: str, secret_key: str) -> Command:
        return client.call(namesrv, Command(code, sign_remoting(fake, b"", access_key, secret_key)))
    try:
        refused = ask("plainuser", "plainsecret1")
        assert refused.code == ResponseCode.NO_PERMISSION, (refused.code, refused.remark)
        assert f"Need admin permission for request code={int(code)}" in refused.remark, refused.remark
        assert "7" not in admin.controller_group(GROUP)["replicas"]
        allowed = ask("adminuser", "adminsecret1")
        assert allowed.code == ResponseCode.SUCCESS, (allowed.code, allowed.remark)
    finally:
        client.close()
    assert cluster.master_child(GROUP, admin) == master
    admin.shutdown()
