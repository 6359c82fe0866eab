"""The `cluster` command end to end: up --detach, status, topic, send, consume, query, down."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request

from rocketbox.cluster.supervision.run_state import read_state_file
from rocketbox.cluster.topology import free_ports
from tests.cli_helpers import free_port, free_port_block, free_remoting_ports, json_lines, run_cli, up_on_free_ports


# 16 MiB CommitLog segments, as LocalCluster's: the 1 GiB default, fallocated and kept in pytest's
# last three temp dirs, filled the disk of a shared machine.
SMALL_SEGMENTS = ("--commitlog-file-size-bytes", str(16 * 1024 * 1024))


def _up_extras() -> tuple[str, ...]:
    """What every ``up`` here adds: small segments, the metrics endpoint and the remoting ports on
    free ports (not 5557, 9876, 10911)."""
    return (*SMALL_SEGMENTS, "--metrics-port", str(free_port()), *free_remoting_ports(), "--no-proxy",
            "--no-console")


def _cli(data_dir, *args, env=None, check=True, timeout=120):
    if args and args[0] == "up":
        args = (*args, *_up_extras())
    return run_cli(*args, data_dir=data_dir, env=env, check=check, timeout_s=timeout)


def test_cli_round_trip(tmp_path):
    data_dir = str(tmp_path / "cli")
    env = {k: v for k, v in os.environ.items() if k != "ROCKETBOX_NAMESRV"}
    # Up on fresh ports if one was taken meanwhile (the HA port, broker + 1, is not among the picked).
    (namesrv_port, broker_port), up = up_on_free_ports(
        2, lambda ports: ("up", "--detach", "--namesrv-port", str(ports[0]), "--broker-port", str(ports[1]),
                          *_up_extras()), data_dir=data_dir)
    try:
        assert f"export ROCKETBOX_NAMESRV='127.0.0.1:{namesrv_port}'" in up.stdout
        status = json.loads(_cli(data_dir, "status", "--json", env=env).stdout)
        roles = sorted(c["role"] for c in status["children"])
        assert roles == ["broker", "flush", "namesrv", "reput", "web"]   # allocate: a thread of reput
        assert all(c["state"] == "running" for c in status["children"])
        _cli(data_dir, "topic", "create", "CliTopic", "--queues", "2", env=env)
        assert {"topic": "CliTopic"} in json_lines(_cli(data_dir, "topic", "list", "--json", env=env))
        route = json.loads(_cli(data_dir, "topic", "route", "CliTopic", "--json", env=env).stdout)
        assert route["queueDatas"][0]["writeQueueNums"] == 2
        sent = json_lines(_cli(data_dir, "send", "CliTopic", "hello from the cli", "--tags", "T", "--keys", "K1",
                             "--json", env=env))
        assert sent[0]["status"] == "SEND_OK"
        consumed = [json.loads(line) for line in
                    _cli(data_dir, "consume", "CliTopic", "--json", "--max", "10", "--wait-s", "5",
                         env=env).stdout.splitlines()]
        assert [m["body"] for m in consumed] == ["hello from the cli"]
        # The web child serves Prometheus's text, with the send counted under RocketMQ's name.
        metrics_url = next(c["ready_info"]["metrics"] for c in status["children"] if c["role"] == "web")
        with urllib.request.urlopen(metrics_url, timeout=30) as response:
            assert 'rocketmq_messages_in_total{' in response.read().decode()
        # Without --wait-s: one pass over what is there now.
        now = _cli(data_dir, "consume", "CliTopic", "--json", env=env).stdout.splitlines()
        assert [json.loads(line)["body"] for line in now] == ["hello from the cli"]
        by_id = json_lines(_cli(data_dir, "query", "--id", sent[0]["offsetMsgId"], "--json", env=env))
        assert by_id[0]["msgId"] == sent[0]["msgId"]
        by_key = json_lines(_cli(data_dir, "query", "--key", "K1", "--topic", "CliTopic", "--json", env=env))
        assert by_key[0]["body"] == "hello from the cli"
        missing = _cli(data_dir, "query", "--key", "nope", "--topic", "CliTopic", env=env, check=False)
        assert missing.returncode == 1 and "no message" in missing.stderr
        bad = _cli(data_dir, "topic", "create", "bad topic!", env=env, check=False)
        assert bad.returncode != 0 and "characters" in bad.stderr
        _cli(data_dir, "topic", "delete", "CliTopic", env=env)
        assert {"topic": "CliTopic"} not in json_lines(_cli(data_dir, "topic", "list", "--json", env=env))
    finally:
        down = _cli(data_dir, "down", env=env, check=False)
    assert down.returncode == 0, down.stderr
    state = read_state_file(data_dir)
    assert state is None or state["state"] == "stopped"
    assert _cli(data_dir, "status", env=env, check=False).returncode == 1


def test_cli_up_with_slaves(tmp_path):
    """Two broker groups of a master and a slave each, every process a supervisor child."""
    data_dir = str(tmp_path / "cli")
    namesrv_port = free_port()
    broker_port = free_port_block([0, 1, 2, 10, 11, 12])
    env = {k: v for k, v in os.environ.items() if k != "ROCKETBOX_NAMESRV"}
    _cli(data_dir, "up", "--detach", "--brokers", "2", "--slaves", "1", "--namesrv-port", str(namesrv_port),
         "--broker-port", str(broker_port), env=env)
    try:
        status = json.loads(_cli(data_dir, "status", "--json", env=env).stdout)
        names = sorted(c["name"] for c in status["children"])
        groups = ["broker-a", "broker-a-s1", "broker-b", "broker-b-s1"]
        assert names == sorted(["namesrv-0", "web"] + groups + [f"{g}-{r}" for g in groups
                                                                    for r in ("flush", "reput")])
        assert all(c["state"] == "running" and c["pid"] for c in status["children"])
        _cli(data_dir, "topic", "create", "CliTopic", "--queues", "2", env=env)
        sent = json_lines(_cli(data_dir, "send", "CliTopic", "replicated", "--json", env=env))
        assert sent[0]["status"] == "SEND_OK"
        route = json.loads(_cli(data_dir, "topic", "route", "CliTopic", "--json", env=env).stdout)
        assert {d["brokerName"]: sorted(d["brokerAddrs"]) for d in route["brokerDatas"]} == \
            {"broker-a": ["0", "1"], "broker-b": ["0", "1"]}
    finally:
        down = _cli(data_dir, "down", env=env, check=False)
    assert down.returncode == 0, down.stderr


def test_cli_up_with_failover_shows_the_controller(tmp_path):
    """`cluster up --failover`: the NameServer runs a controller that names a master and has both
    replicas in sync; `cluster controller` shows it."""
    data_dir = str(tmp_path / "cli")
    namesrv_port = free_port_block([0, 50])   # the controller listens on the NameServer port + 50
    broker_port = free_port_block([0, 1, 2, 3])
    env = {k: v for k, v in os.environ.items() if k != "ROCKETBOX_NAMESRV"}
    _cli(data_dir, "up", "--detach", "--slaves", "1", "--failover", "--broker-role", "sync",
         "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port), env=env)
    try:
        # The master alone in its SyncStateSet answers at once; a slave that joined meanwhile is waited for
        # (FLUSH_SLAVE_TIMEOUT, exit 1, if it is slow): the record is printed either way.
        sent = json_lines(_cli(data_dir, "send", "FoCli", "kept", "--json", env=env, check=False))
        assert sent[0]["status"] in ("SEND_OK", "FLUSH_SLAVE_TIMEOUT")
        deadline = time.monotonic() + 60
        while True:   # the slave joins the sync set once it has caught up
            nodes = json.loads(_cli(data_dir, "controller", "--json", env=env).stdout)
            group = nodes[0]["groups"][0] if nodes[0].get("groups") else {}
            if nodes[0].get("isLeader") and group.get("syncStateSet") == [1, 2] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert group["brokerName"] == "broker-a" and group["masterId"] == 1 and group["syncStateSet"] == [1, 2]
        assert group["masterAddress"] == f"127.0.0.1:{broker_port}"
        shown = _cli(data_dir, "controller", env=env).stdout
        assert "leader" in shown and f"1: 127.0.0.1:{broker_port}" in shown and "1, 2" in shown, shown
        assert "True" not in shown and "{'" not in shown, shown   # no raw Python values
    finally:
        down = _cli(data_dir, "down", env=env, check=False)
    assert down.returncode == 0, down.stderr


def test_cli_up_ignores_a_decoy_cluster_package_in_the_working_directory(tmp_path):
    """Children must import the installed package, not a ``cluster/`` folder where the user typed
    ``cluster up`` (an unbuilt source checkout did exactly that, and every child died)."""
    workdir = tmp_path / "somewhere"
    (workdir / "cluster").mkdir(parents=True)
    (workdir / "cluster" / "__init__.py").write_text("raise ImportError('decoy cluster package imported')\n")
    data_dir = str(tmp_path / "decoy-data")
    namesrv_port, broker_port = free_port(), free_port_block([0, 1])
    env = {k: v for k, v in os.environ.items() if k not in ("ROCKETBOX_NAMESRV", "PYTHONPATH", "PYTHONSAFEPATH")}
    console_script = os.path.join(os.path.dirname(sys.executable), "cluster")

    def cli(*args, check=True):
        return run_cli(*args, data_dir=data_dir, command=(console_script,), cwd=workdir, env=env, check=check)

    cli("up", "--detach", "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port), *SMALL_SEGMENTS,
        "--no-metrics", "--no-proxy", "--no-console")
    try:
        status = json.loads(cli("status", "--json").stdout)
        assert all(c["state"] == "running" for c in status["children"]), status
        sent = json_lines(cli("send", "DecoyTopic", "served by the installed package", "--json"))
        assert sent[0]["status"] == "SEND_OK"
    finally:
        down = cli("down", check=False)
    assert down.returncode == 0, down.stderr
