"""RocketMQ's C++ client against a cluster started as a user starts one: `cluster up --detach`, its
remoting ports from flags; `cluster status` names the doors; the C++ producer and push consumer
work through the NameServer's remoting port, and mqadmin's topicStatus request answers there."""

from __future__ import annotations

import json

import pytest

from rocketbox.cluster import Admin
from rocketbox.cluster.config import ClientConfig
from tests.cli_helpers import run_cli, up_on_free_ports
from tests.remoting.cpp_client import require_cpp_client, run_cpp, sent_ok

pytestmark = pytest.mark.timeout(240)


def _cli(data_dir: str, *args: str, check: bool = True):
    return run_cli(*args, data_dir=data_dir, check=check)


def test_cpp_client_through_cluster_up(tmp_path):
    require_cpp_client()
    data_dir = str(tmp_path / "up")
    ports, up = up_on_free_ports(
        4, lambda p: ("up", "--detach", "--namesrv-port", str(p[0]), "--broker-port", str(p[1]),
                      "--namesrv-remoting-port", str(p[2]), "--broker-remoting-port", str(p[3]),
                      "--commitlog-file-size-bytes", str(16 * 1024 * 1024), "--no-metrics", "--no-proxy",
                      "--no-console"), data_dir=data_dir)
    namesrv_port, broker_port, namesrv_remoting, broker_remoting = ports
    try:
        namesrv_addr = f"127.0.0.1:{namesrv_remoting}"
        assert f"RocketMQ clients: namesrvAddr {namesrv_addr}" in up.stdout
        status = json.loads(_cli(data_dir, "status", "--json").stdout)
        doors = {c["role"]: (c.get("ready_info") or {}).get("remoting") for c in status["children"]}
        assert doors["namesrv"] == namesrv_addr and doors["broker"] == f"127.0.0.1:{broker_remoting}"

        messages = [{"topic": "UpCpp", "tags": "TagA" if i % 2 else "TagB", "keys": f"k{i}", "body": f"up-{i}"}
                    for i in range(20)]
        results = run_cpp("produce", {"namesrv": namesrv_addr, "messages": messages}, tmp_path / "p")
        assert len(sent_ok(results)) == 20, results
        got = run_cpp("consume", {"namesrv": namesrv_addr, "group": "CID_UP", "topic": "UpCpp",
                                  "expression": "TagA", "timeout_s": 60, "expect": 10}, tmp_path / "c")
        bodies = sorted(line["body"] for line in got if "body" in line)
        assert bodies == sorted(m["body"] for m in messages if m["tags"] == "TagA")

        # mqadmin topicStatus through the remoting NameServer and broker ports.
        remoting = ClientConfig(namesrv_endpoints=(f"tcp://{namesrv_addr}",), transport="remoting")
        with Admin(config=remoting) as admin:
            rows = admin.queue_offsets("UpCpp", "CID_UP")
        assert sum(row["maxOffset"] for row in rows) == 20
    finally:
        down = _cli(data_dir, "down", check=False)
    assert down.returncode == 0, down.stderr
