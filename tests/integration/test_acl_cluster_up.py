"""``cluster up`` and access control: an address other hosts reach is refused without an ACL file
or ``--insecure`` (before anything starts); with ``--acl-file`` the cluster starts with its CURVE
key pair made beside the file, and the CLI's own commands against the data dir use that key."""

from __future__ import annotations

import json
import os

import pytest

from rocketbox.cluster.acl.curve import curve_dir
from rocketbox.cluster.topology import free_ports
from tests.cli_helpers import run_cli, up_on_free_ports

pytestmark = pytest.mark.timeout(240)

ACL = """
accounts:
  - accessKey: operator1
    secretKey: operator1-secret
    admin: true
"""


def _ports_args(ports=None) -> list[str]:
    namesrv, broker, metrics = ports or free_ports(3)
    return ["--namesrv-port", str(namesrv), "--broker-port", str(broker), "--metrics-port", str(metrics),
            "--no-remoting", "--no-proxy", "--no-console", "--commitlog-file-size-bytes", str(16 * 1024 * 1024)]


def test_a_host_other_hosts_reach_needs_access_control_or_insecure(tmp_path):
    refused = run_cli("up", "--detach", "--host", "10.77.0.1", *_ports_args(), data_dir=str(tmp_path / "open"),
                      check=False)
    assert refused.returncode == 1
    assert "--host 10.77.0.1 is reachable from other hosts" in refused.stderr, refused.stderr
    assert "--acl-file" in refused.stderr and "--insecure" in refused.stderr
    assert not (tmp_path / "open" / "cluster.json").exists()


def test_cluster_up_with_an_acl_file_serves_the_cli_with_the_cluster_key(tmp_path):
    acl_file = tmp_path / "conf" / "plain_acl.yml"
    acl_file.parent.mkdir()
    acl_file.write_text(ACL)
    data_dir = str(tmp_path / "up")
    up_on_free_ports(3, lambda ports: ("up", "--detach", "--acl-file", str(acl_file), *_ports_args(ports)),
                     data_dir=data_dir)
    try:
        assert os.path.exists(os.path.join(curve_dir(str(acl_file)), "server.key_secret"))
        run_cli("topic", "create", "AclCliTopic", "--queues", "2", data_dir=data_dir)
        routes = run_cli("topic", "route", "AclCliTopic", "--json", data_dir=data_dir).stdout
        assert "broker-a" in routes
        status = json.loads(run_cli("status", "--json", data_dir=data_dir).stdout)
        broker = next(c for c in status["children"] if c["name"] == "broker-a")
        assert broker["state"] == "running"
        (row,) = status["brokers"]   # the broker's own answer, asked over CURVE with the cluster's key
        assert row["answered"] and row["role"] == "MASTER", row
    finally:
        run_cli("down", data_dir=data_dir, check=False)


def test_a_broken_acl_file_stops_up_before_anything_starts(tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text("accounts: [{accessKey: short, secretKey: x}]")
    refused = run_cli("up", "--detach", "--acl-file", str(acl_file), *_ports_args(), data_dir=str(tmp_path / "up"),
                      check=False)
    assert refused.returncode == 1 and "longer than 6 characters" in refused.stderr, refused.stderr
    assert not (tmp_path / "up" / "cluster.json").exists()


def test_acl_keygen_and_check(tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    made = run_cli("acl", "keygen", "operator1", "--acl-file", str(acl_file)).stdout
    clients = os.path.join(curve_dir(str(acl_file)), "clients")
    assert os.path.exists(os.path.join(clients, "operator1.key")) and "public key" in made
    assert os.path.exists(os.path.join(curve_dir(str(acl_file)), "server.key_secret"))
    stranger = run_cli("acl", "keygen", "nobody00", "--acl-file", str(acl_file))
    assert "has no account 'nobody00'" in stranger.stderr
    checked = run_cli("acl", "check", "--acl-file", str(acl_file)).stdout
    report = json.loads(checked)
    (account,) = report["accounts"]
    assert account["accessKey"] == "operator1" and account["admin"] and len(account["curveKey"]) == 40
    assert "operator1-secret" not in checked
    acl_file.write_text("accounts: [{accessKey: operator1, secretKey: short}]")
    broken = run_cli("acl", "check", "--acl-file", str(acl_file), check=False)
    assert broken.returncode == 1 and "longer than 6 characters" in broken.stderr
