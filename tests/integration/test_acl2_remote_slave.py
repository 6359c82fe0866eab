"""ACL 2.0 replicated to a slave that keeps its own store (another host's: here a second data dir
started with ``cluster up --role broker --slave-id 1``, the cluster's CURVE keys copied into its
auth/ as one copies them to a host): the slave's sync copies the master's users and ACLs into its
auth.json, and the slave then takes a user made on the master."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.topology import free_ports
from rocketbox.cluster.wire_format import Command
from tests.cli_helpers import run_cli

pytestmark = pytest.mark.timeout(240)

AUTH = {"authentication_enabled": True, "authorization_enabled": True}
SLAVE_CONF = "authenticationEnabled=true\nauthorizationEnabled=true\nslaveSyncIntervalMs=300\n"


def _users(path: str) -> set[str]:
    try:
        with open(path) as f:
            return {u["username"] for u in json.load(f)["users"]}
    except (OSError, ValueError):
        return set()


def test_a_slave_on_another_host_copies_its_masters_users(tmp_path):
    with LocalCluster(str(tmp_path / "master-host"), broker_overrides=AUTH) as cluster:
        master = cluster.topology.brokers[0]
        slave_dir = str(tmp_path / "slave-host")
        os.makedirs(os.path.join(slave_dir, "auth"))
        shutil.copytree(os.path.join(cluster.data_dir, "auth", "curve"), os.path.join(slave_dir, "auth", "curve"))
        conf = tmp_path / "slave.conf"
        conf.write_text(SLAVE_CONF)
        slave_port, slave_remoting = free_ports(2)
        run_cli("--namesrv", cluster.namesrv, "up", "--role", "broker", "--broker-name", master.broker_name,
                "--slave-id", "1", "--master-address", master.address, "--master-ha-address", master.ha_address,
                "--broker-port", str(slave_port), "--broker-remoting-port", str(slave_remoting), "--no-metrics",
                "--config", str(conf), "--commitlog-file-size-bytes", str(16 * 1024 * 1024), "--detach",
                data_dir=slave_dir)
        try:
            slave_store = os.path.join(slave_dir, "auth", "auth.json")
            assert "alice" not in _users(slave_store)
            run_cli("createUser", "-u", "alice", "-p", "alice-secret", data_dir=cluster.data_dir,
                    namesrv=cluster.namesrv)
            wait_until(lambda: "alice" in _users(slave_store), 30, interval_s=0.2,
                       what="the slave's sync copying alice")
            client = RemotingRpcClient(3000)
            try:
                def slave_takes_alice() -> bool:
                    fields = sign_remoting({"consumerGroup": "AnyGroup"}, b"", "alice", "alice-secret")
                    answer = client.call(f"127.0.0.1:{slave_remoting}",
                                         Command(RequestCode.GET_CONSUMER_LIST_BY_GROUP, fields))
                    return answer.code != ResponseCode.NO_PERMISSION or "no matched policies" in answer.remark
                # Authenticated on the slave (a Normal user without a policy is then refused the group).
                wait_until(slave_takes_alice, 30, interval_s=0.2, what="the slave authenticating alice")
            finally:
                client.close()
        finally:
            run_cli("down", data_dir=slave_dir, check=False)
