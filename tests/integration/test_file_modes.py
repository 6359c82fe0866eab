"""Who may read what a cluster writes (``cluster/file_modes.py``): after a cluster
ran with traffic, every directory of its data dir is 0700 and every file 0600, whichever process
made it (the test process's own umask is left as it is, typically 0022); an ACL file or a key file
other users may read is accepted with a warning that ``cluster up`` prints and each process logs."""

from __future__ import annotations

import os
import stat

import pytest

from rocketbox.cluster import ConsumeStatus, Message, Producer, PushConsumer
from rocketbox.cluster.acl.curve import curve_dir
from rocketbox.cluster.testing import LocalCluster, wait_until
from tests.cli_helpers import run_cli, up_on_free_ports
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(240)

# Files that may be more open than 0600, and why; any other exception is a finding.
EXCEPTIONS: dict[str, str] = {"tls/server.crt": "a certificate is public: clients are given it to trust the door"}

PORT_FLAGS = ("--namesrv-port", "--broker-port", "--metrics-port", "--namesrv-remoting-port", "--broker-remoting-port")
ACL = """
accounts:
  - accessKey: operator1
    secretKey: operator1-secret
    admin: true
"""


def _modes_open_to_others(data_dir: str) -> list[str]:
    """Every directory not 0700 and every file not 0600 under ``data_dir`` (itself included)."""
    found = []
    for root, dirs, files in os.walk(data_dir):
        for name, want in [(root, 0o700)] + [(os.path.join(root, f), 0o600) for f in files]:
            mode = stat.S_IMODE(os.lstat(name).st_mode)
            relative = os.path.relpath(name, data_dir)
            if mode != want and relative not in EXCEPTIONS:
                found.append(f"{relative} {mode:04o}")
    return found


def test_a_local_cluster_with_traffic_leaves_only_private_files(tmp_path):
    """LocalCluster (the test process keeps its umask) with every child: NameServer, broker and its
    workers, metrics, proxy, console; messages sent and consumed through both doors, a delayed one
    and a retried one, offsets committed."""
    with LocalCluster(str(tmp_path / "cluster"), proxy=True, console=True) as cluster:
        for transport in ("native", "remoting"):
            with Producer(f"ModesPG{transport}", config=client_config(cluster, transport=transport)) as producer:
                for i in range(20):
                    message = Message("ModesTopic", f"{transport}-{i}".encode())
                    producer.send(message.set_delay_level(1) if i == 0 else message)
        seen: list[bytes] = []

        def listener(messages):   # the first delivery of each fails: every message comes back once
            first = [m for m in messages if m.reconsume_times == 0]
            seen.extend(m.body for m in messages)
            return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.CONSUME_SUCCESS
        consumer = PushConsumer("ModesCG", config=client_config(cluster), consume_batch_max=1)
        consumer.subscribe("ModesTopic")
        consumer.register_listener(listener)
        consumer.start()
        try:
            wait_until(lambda: len(seen) >= 80, 90, what="every message delivered twice")
        finally:
            consumer.shutdown()
        data_dir = cluster.data_dir
    assert _modes_open_to_others(data_dir) == []


def test_cluster_up_warns_of_an_acl_file_and_keys_others_may_read(tmp_path):
    """An ACL file 0644, the cluster's CURVE secret key 0640 and a TLS key 0644 (``cluster tls``
    made it 0600): ``cluster up`` starts, says so for each, and the processes log it."""
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    acl_file.parent.mkdir()
    acl_file.write_text(ACL)
    acl_file.chmod(0o644)
    run_cli("acl", "keygen", "operator1", "--acl-file", str(acl_file))   # the cluster's key pair too
    server_secret = os.path.join(curve_dir(str(acl_file)), "server.key_secret")
    os.chmod(server_secret, 0o640)
    data_dir = str(tmp_path / "up")
    run_cli("tls", data_dir=data_dir)
    tls_key = os.path.join(data_dir, "tls", "server.key")
    os.chmod(tls_key, 0o644)
    _, up = up_on_free_ports(
        5, lambda ports: ("up", "--detach", "--acl-file", str(acl_file), "--tls-mode", "permissive",
                          *(arg for flag, port in zip(PORT_FLAGS, ports) for arg in (flag, str(port))),
                          "--no-proxy", "--no-console", "--commitlog-file-size-bytes", str(16 * 1024 * 1024)),
        data_dir=data_dir)
    try:
        run_cli("topic", "create", "ModesUpTopic", "--queues", "2", data_dir=data_dir)
        run_cli("send", "ModesUpTopic", "hello", data_dir=data_dir)
    finally:
        run_cli("down", data_dir=data_dir, check=False)
    assert f"warning: the ACL file {acl_file} is open to group and others (mode 0644)" in up.stderr, up.stderr
    assert f"the CURVE secret key {server_secret} is open to group (mode 0640)" in up.stderr, up.stderr
    assert f"the TLS key {tls_key} is open to group and others (mode 0644)" in up.stderr, up.stderr
    for log in ("namesrv-0.log", "broker-a.log"):
        with open(os.path.join(data_dir, "logs", log)) as f:
            text = f.read()
        assert f"the ACL file {acl_file} is open to group and others" in text, (log, text[-2000:])
        assert f"the TLS key {tls_key} is open to group and others" in text, (log, text[-2000:])
    os.chmod(tls_key, 0o600)   # opened by this test, not by the cluster
    assert _modes_open_to_others(data_dir) == []
