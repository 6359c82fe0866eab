"""``cluster up --config broker.conf`` with ACL 2.0's keys, as the README shows it: the data dir's
auth/auth.json made with the initial Super user, mqadmin's verbs against the data dir (the CLI acts
with the cluster's key), and a plain_acl.yml beside ACL 2.0 refused unless it is to be migrated."""

from __future__ import annotations

import json
import os
import stat

import pytest

from rocketbox.cluster.topology import free_ports
from tests.cli_helpers import run_cli, up_on_free_ports

pytestmark = pytest.mark.timeout(240)

BROKER_CONF = """authenticationEnabled=true
authorizationEnabled=true
initAuthenticationUser={"username":"rocketmq","password":"12345678"}
"""


def _ports_args(ports) -> list[str]:
    namesrv, broker, metrics = ports
    return ["--namesrv-port", str(namesrv), "--broker-port", str(broker), "--metrics-port", str(metrics),
            "--no-remoting", "--no-proxy", "--no-console", "--commitlog-file-size-bytes", str(16 * 1024 * 1024)]


def test_the_readme_set_up_runs(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF)
    data_dir = str(tmp_path / "up")
    up_on_free_ports(3, lambda ports: ("up", "--detach", "--config", str(conf), *_ports_args(ports)),
                     data_dir=data_dir)
    try:
        auth_file = os.path.join(data_dir, "auth", "auth.json")
        assert stat.S_IMODE(os.stat(auth_file).st_mode) == 0o600
        for args in (("createUser", "-u", "orders-app", "-p", "change-me-please"),
                     ("createAcl", "-s", "User:orders-app", "-r", "Topic:Orders,Group:OrdersGroup", "-a", "Pub,Sub",
                      "-d", "Allow"),
                     ("createAcl", "-s", "User:orders-app", "-r", "Topic:Orders-audit*", "-a", "All", "-d", "Deny",
                      "-i", "10.0.0.0/8"),
                     ("updateUser", "-u", "orders-app", "-s", "disable"),
                     ("deleteAcl", "-s", "User:orders-app", "-r", "Topic:Orders")):
            assert "success." in run_cli(*args, data_dir=data_dir).stdout
        users = {u["username"]: u for u in map(json.loads, run_cli("listUser", "--json",
                                                                   data_dir=data_dir).stdout.splitlines())}
        assert users["rocketmq"]["userType"] == "Super" and users["orders-app"]["userStatus"] == "disable"
        (acl,) = map(json.loads, run_cli("getAcl", "-s", "User:orders-app", "--json", data_dir=data_dir).stdout.splitlines())
        entries = [(e["resource"], e.get("sourceIps")) for p in acl["policies"] for e in p["entries"]]
        assert entries == [("Group:OrdersGroup", None), ("Topic:Orders-audit*", ["10.0.0.0/8"])]
        checked = json.loads(run_cli("acl", "check", data_dir=data_dir).stdout)
        assert checked["file"] == auth_file and "password" not in json.dumps(checked["users"])
    finally:
        run_cli("down", data_dir=data_dir, check=False)


def test_a_plain_acl_yml_beside_acl_2_needs_the_migration_key(tmp_path):
    plain = tmp_path / "plain_acl.yml"
    plain.write_text("accounts: [{accessKey: operator1, secretKey: operator1-secret, admin: true}]\n")
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF)
    refused = run_cli("up", "--detach", "--config", str(conf), "--acl-file", str(plain), *_ports_args(free_ports(3)),
                      data_dir=str(tmp_path / "up"), check=False)
    assert refused.returncode == 1 and "not both" in refused.stderr, refused.stderr
    assert not (tmp_path / "up" / "cluster.json").exists()
