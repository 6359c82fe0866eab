"""mqadmin's verbs under `cluster`, run as a user runs them, against a live
cluster with a master and a slave and a running consumer group."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, PushConsumer
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.wire_format import Command
from tests.cli_helpers import json_lines, run_cli
from tests.conftest import await_group_caught_up, client_config, fill_topic

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("mqadmin")), slaves=1) as started:
        yield started


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run_cli(*args, check=check, timeout_s=60)


@pytest.fixture(scope="module")
def running_group(cluster):
    """Topic MqaTopic (4 queues, 40 messages) read to its end by group MqaGroup, which stays online."""
    cfg = client_config(cluster)
    fill_topic(cfg, "MqaTopic", 4, 40, tags="TagA")
    with PushConsumer("MqaGroup", config=cfg) as consumer:
        consumer.subscribe("MqaTopic", "TagA")
        consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
        consumer.start()
        await_group_caught_up(cfg, "MqaTopic", "MqaGroup")
        yield consumer


def test_cluster_list_shows_master_and_slave(cluster):
    records = json_lines(_cli("clusterList", "-n", cluster.namesrv, "--json"))
    assert [(r["brokerName"], r["brokerId"], r["role"]) for r in records] == \
        [("broker-a", 0, "MASTER"), ("broker-a", 1, "SLAVE")]
    assert all(r["cluster"] == "DefaultCluster" and r["version"].startswith("RocketBox") for r in records)
    table = _cli("--namesrv", cluster.namesrv, "clusterList").stdout   # the global option before the verb
    assert "#Broker Name" in table and "SLAVE" in table


def test_mqadmins_n_with_the_remoting_address_is_served_over_remoting(cluster):
    # mqadmin's habit: -n host:9876, the NameServer's remoting door, not the CLI's native one.
    remoting = cluster.remoting_namesrv
    listed = json_lines(_cli("clusterList", "-n", remoting, "--json"))
    assert sorted((r["brokerName"], r["role"]) for r in listed) == [("broker-a", "MASTER"), ("broker-a", "SLAVE")]
    # The addresses are the remoting ones, as mqadmin prints them (its -b takes them back).
    master = next(r["addr"] for r in listed if r["role"] == "MASTER")
    assert master == f"127.0.0.1:{cluster.topology.brokers[0].remoting_port}"
    assert "brokerVersionDesc" in json.loads(_cli("brokerStatus", "-n", remoting, "-b", master, "--json").stdout)[master]
    # So is every other command given that address, by --namesrv or ROCKETBOX_NAMESRV.
    sent = json_lines(_cli("send", "OverRemoting", "via 9876", "--namesrv", remoting, "--json"))
    assert [s["status"] for s in sent] == ["SEND_OK"]
    env = {**os.environ, "ROCKETBOX_NAMESRV": remoting}
    read = json_lines(run_cli("consume", "OverRemoting", "--json", env=env, timeout_s=60))
    assert [m["body"] for m in read] == ["via 9876"]
    # The probe is a wrong door knocking, logged as such, not as a malformed stream.
    log = (Path(cluster.data_dir) / "logs" / "namesrv-0.log").read_text()
    assert "a ZeroMQ greeting, not a RocketMQ frame" in log and "unusable frame" not in log


def test_topic_status_and_consumer_progress(cluster, running_group):
    status = json_lines(_cli("topicStatus", "-n", cluster.namesrv, "-t", "MqaTopic", "--json"))
    assert sorted(r["queueId"] for r in status) == [0, 1, 2, 3]
    assert sum(r["maxOffset"] for r in status) == 40
    progress = json_lines(_cli("consumerProgress", "-n", cluster.namesrv, "-g", "MqaGroup", "-t", "MqaTopic", "--json"))
    assert sum(r["consumerOffset"] for r in progress) == 40 and all(r["diff"] == 0 for r in progress)
    text = _cli("consumerProgress", "-n", cluster.namesrv, "-g", "MqaGroup").stdout
    assert "#Consumer Offset" in text and "Diff Total: 0" in text


def test_consumer_connection_and_status(cluster, running_group):
    connection = json.loads(_cli("consumerConnection", "-n", cluster.namesrv, "-g", "MqaGroup", "--json").stdout)
    assert [c["clientId"] for c in connection["connectionSet"]] == [running_group.client_id]
    assert connection["subscriptionTable"]["MqaTopic"]["subString"] == "TagA"
    status = json.loads(_cli("consumerStatus", "-n", cluster.namesrv, "-g", "MqaGroup", "--json").stdout)
    queues = status[running_group.client_id]["mqTable"]
    assert sorted(q["queueId"] for q in queues if q["topic"] == "MqaTopic") == [0, 1, 2, 3]
    stacks = _cli("consumerStatus", "-n", cluster.namesrv, "-g", "MqaGroup", "-s").stdout
    assert '"MainThread"' in stacks   # -s: the member's own thread stacks, as it printed them
    owners = json_lines(_cli("consumerProgress", "-n", cluster.namesrv, "-g", "MqaGroup", "-t", "MqaTopic", "-s", "--json"))
    assert {r["clientIp"] for r in owners} == {connection["connectionSet"][0]["clientAddr"]}
    # The table names the member's version as mqadmin does (MQVersion.getVersionDesc), not its number.
    text = _cli("consumerConnection", "-n", cluster.namesrv, "-g", "MqaGroup").stdout
    assert "V4_9_4" in text and " 401 " not in text, text
    offline = _cli("consumerConnection", "-n", cluster.namesrv, "-g", "MqaNobody", check=False)
    assert offline.returncode == 1 and "not online" in offline.stderr


def test_sub_groups_broker_status_and_config(cluster):
    master = cluster.topology.brokers[0].address
    _cli("updateSubGroup", "-n", cluster.namesrv, "-g", "MqaSub", "-c", "DefaultCluster", "-s", "false", "-r", "3")
    with Admin(config=client_config(cluster)) as admin:
        stored = admin.subscription_groups(f"tcp://{master}")["MqaSub"]
    assert (stored["consumeEnable"], stored["retryMaxTimes"]) == (False, 3)
    _cli("deleteSubGroup", "-n", cluster.namesrv, "-g", "MqaSub", "-b", master)
    with Admin(config=client_config(cluster)) as admin:
        assert "MqaSub" not in admin.subscription_groups(f"tcp://{master}")
    bad = _cli("updateSubGroup", "-n", cluster.namesrv, "-g", "MqaSub", "-s", "maybe", check=False)
    assert bad.returncode == 2 and "neither true nor false" in bad.stderr

    status = json.loads(_cli("brokerStatus", "-n", cluster.namesrv, "-b", master, "--json").stdout)[master]
    assert int(status["commitLogMaxOffset"]) > 0 and len(status["putTps"].split()) == 3
    config = json.loads(_cli("getBrokerConfig", "-n", cluster.namesrv, "-c", "DefaultCluster", "--json").stdout)
    (broker_config,) = config.values()
    assert broker_config["brokerName"] == "broker-a" and broker_config["brokerId"] == "0"
    missing = _cli("brokerStatus", "-n", cluster.namesrv, check=False)
    assert missing.returncode == 2 and "-b" in missing.stderr


def test_consumer_status_finds_a_member_that_only_one_master_knows(start_cluster):
    """A group whose topic lives on broker-b only heartbeats to broker-b: consumerStatus asks the
    masters in turn rather than only the first (broker-a, which has never heard of the member)."""
    cluster = start_cluster(brokers=2)
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        broker_b = admin.master_endpoints()["broker-b"]
        answer = admin.rpc.call(broker_b, Command(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "MqaOnlyB", "readQueueNums": "2", "writeQueueNums": "2", "perm": "6"}))
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        wait_until(lambda: admin.routes.get("MqaOnlyB", refresh=True) is not None, 10, what="the route of MqaOnlyB")
    with PushConsumer("MqaOnlyBGroup", config=cfg) as consumer:
        consumer.subscribe("MqaOnlyB", "*")
        consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
        consumer.start()
        status = _cli("consumerStatus", "-n", cluster.namesrv, "-g", "MqaOnlyBGroup", "-i", consumer.client_id,
                      "--json")
    info = json.loads(status.stdout)[consumer.client_id]
    assert info["properties"]["consumerGroup"] == "MqaOnlyBGroup"


def _stats_row(cluster, topic: str, group: str | None = None) -> dict:
    (row,) = [r for r in json_lines(_cli("statsAll", "-n", cluster.namesrv, "-t", topic, "--json")) if r["group"] == group]
    return row


def test_stats_all_follows_puts_gets_and_accumulation(cluster):
    cfg = client_config(cluster)
    master = f"tcp://{cluster.topology.brokers[0].address}"
    fill_topic(cfg, "MqaStats", 2, 30)
    with Admin(config=cfg) as admin:
        # The broker samples its counters once a second: wait for the sample after the last put.
        wait_until(lambda: (admin.broker_stats_data(master, "TOPIC_PUT_NUMS", "MqaStats") or {})
                   .get("statsDay", {}).get("sum") == 30, 10, what="30 puts counted")
    unconsumed = _stats_row(cluster, "MqaStats")
    assert (unconsumed["inMsg24Hour"], unconsumed["accumulation"]) == (30, 0) and unconsumed["inTps"] > 0
    assert "NO_CONSUMER" in _cli("statsAll", "-n", cluster.namesrv, "-t", "MqaStats").stdout

    with PushConsumer("MqaStatsGroup", config=cfg) as consumer:
        consumer.subscribe("MqaStats", "*")
        consumer.register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
        consumer.start()
        await_group_caught_up(cfg, "MqaStats", "MqaStatsGroup")
    with Admin(config=cfg) as admin:
        wait_until(lambda: (admin.broker_stats_data(master, "GROUP_GET_NUMS", "MqaStats@MqaStatsGroup") or {})
                   .get("statsDay", {}).get("sum") == 30, 10, what="30 gets counted")
    consumed = _stats_row(cluster, "MqaStats", "MqaStatsGroup")
    assert (consumed["accumulation"], consumed["outMsg24Hour"]) == (0, 30) and consumed["outTps"] > 0

    fill_topic(cfg, "MqaStats", 2, 10)   # the group is offline now: these wait for it
    with Admin(config=cfg) as admin:
        wait_until(lambda: admin.broker_stats_data(master, "TOPIC_PUT_NUMS", "MqaStats")["statsDay"]["sum"] == 40,
                   10, what="40 puts counted")
    with Admin(config=client_config(cluster, transport="remoting")) as admin:   # RocketMQ's door, mqadmin's way in
        (remoting_master,) = admin.master_endpoints().values()
        assert admin.broker_stats_data(remoting_master, "TOPIC_PUT_NUMS", "MqaStats")["statsDay"]["sum"] == 40
    behind = _stats_row(cluster, "MqaStats", "MqaStatsGroup")
    # Pulls the closed consumer left parked are answered as the new messages arrive: served, not consumed.
    assert (behind["accumulation"], behind["inMsg24Hour"]) == (10, 40) and behind["outMsg24Hour"] >= 30

    with Admin(config=cfg) as admin:
        admin.create_topic("MqaIdle", 1)
    everything = {r["topic"] for r in json_lines(_cli("statsAll", "-n", cluster.namesrv, "--json"))}
    active = {r["topic"] for r in json_lines(_cli("statsAll", "-n", cluster.namesrv, "-a", "--json"))}
    assert {"MqaIdle", "MqaStats"} <= everything and "MqaStats" in active and "MqaIdle" not in active
    assert not any(t.startswith(("%RETRY%", "%DLQ%")) for t in everything)
    table = _cli("statsAll", "-n", cluster.namesrv, "-t", "MqaStats").stdout
    assert all(column in table for column in ("#Accumulation", "#InTPS", "#OutTPS", "#InMsg24Hour", "#OutMsg24Hour"))
    missing = _cli("statsAll", "-n", cluster.namesrv, "-t", "MqaNoSuchTopic", check=False)
    assert missing.returncode == 1 and "MqaNoSuchTopic" in missing.stderr


def _caught_up(admin, master: str) -> dict | None:
    status = admin.ha_status(master)
    connections = status["haConnectionInfo"]
    return status if connections and all(c["diff"] == 0 for c in connections) else None


def test_ha_status_shows_the_slave_in_sync_at_the_masters_end(cluster):
    master, slave = cluster.topology.brokers[0], cluster.topology.slaves[0]
    fill_topic(client_config(cluster), "MqaHa", 1, 5)
    with Admin(config=client_config(cluster)) as admin:
        wait_until(lambda: _caught_up(admin, f"tcp://{master.address}"), 20, what="the slave acknowledged the end")
    answers = json.loads(_cli("haStatus", "-n", cluster.namesrv, "-b", master.address, "--json").stdout)
    status = answers[master.address]
    (connection,) = status["haConnectionInfo"]
    assert status["master"] is True and status["inSyncSlaveNums"] == 1
    assert connection["inSync"] is True and connection["brokerId"] == 1 and connection["brokerAddr"] == slave.address
    assert connection["addr"] == "127.0.0.1"
    assert connection["slaveAckOffset"] + connection["diff"] == status["masterCommitLogMaxOffset"] > 0
    table = _cli("haStatus", "-n", cluster.namesrv, "-c", "DefaultCluster").stdout
    assert "#SlaveAckOffset" in table and slave.address in table and " OK " in table
    with Admin(config=client_config(cluster, transport="remoting")) as admin:   # RocketMQ's door, mqadmin's way in
        (remoting_master,) = admin.master_endpoints().values()
        assert admin.ha_status(remoting_master)["inSyncSlaveNums"] == 1

    own_view = json.loads(_cli("haStatus", "-n", cluster.namesrv, "-b", slave.address, "--json").stdout)[slave.address]
    client = own_view["haClientRuntimeInfo"]
    assert own_view["master"] is False and client["masterAddr"] == master.ha_address
    assert client["maxOffset"] >= connection["slaveAckOffset"] and client["lastWriteTimestamp"] > 0
    assert "#LastReadTime" in _cli("haStatus", "-n", cluster.namesrv, "-b", slave.address).stdout


def test_cluster_status_shows_roles_ids_epoch_and_lag(cluster):
    fill_topic(client_config(cluster), "MqaRoles", 1, 5)
    with Admin(config=client_config(cluster)) as admin:
        wait_until(lambda: _caught_up(admin, f"tcp://{cluster.topology.brokers[0].address}"), 20,
                   what="the slave acknowledged the end")
    status = json.loads(_cli("--data-dir", cluster.data_dir, "status", "--json").stdout)
    brokers = {b["name"]: b for b in status["brokers"]}
    master, slave = brokers["broker-a"], brokers["broker-a-s1"]
    assert (master["role"], master["brokerId"], master["epoch"]) == ("MASTER", 0, 0)
    assert (slave["role"], slave["brokerId"], slave["epoch"]) == ("SLAVE", 1, 0)
    assert master["lagBytes"] == 0 and slave["lagBytes"] == 0 and slave["writePos"] == master["writePos"] > 0
    table = _cli("--data-dir", cluster.data_dir, "status").stdout
    assert "MASTER" in table and "SLAVE" in table and "lag (bytes)" in table


def test_cluster_status_does_not_wait_long_for_a_broker_that_does_not_answer(tmp_path):
    """A broker main that accepts connections but never answers, and one that is not running: status
    shows both as such, after about its one-second time-out, not the client's usual 5 s or more."""
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen()
    try:
        children = [{"name": "broker-a", "role": "broker", "state": "running", "pid": os.getpid(),
                     "ready_info": {"endpoint": f"tcp://127.0.0.1:{mute.getsockname()[1]}"}},
                    {"name": "broker-b", "role": "broker", "state": "backoff", "pid": None, "ready_info": None}]
        (tmp_path / "cluster.json").write_text(json.dumps({"supervisor_pid": os.getpid(), "state": "ready",
                                                           "children": children}))
        started = time.monotonic()
        status = json.loads(_cli("--data-dir", str(tmp_path), "status", "--json").stdout)
        assert time.monotonic() - started < 4.5   # the CLI's own start-up included
    finally:
        mute.close()
    assert [(b["name"], b["answered"], b["role"]) for b in status["brokers"]] == \
        [("broker-a", False, None), ("broker-b", False, None)]
