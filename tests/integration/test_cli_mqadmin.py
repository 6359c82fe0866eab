"""mqadmin's verbs under `cluster` (issue 13 item 4), run as a user runs them, against a live
cluster with a master and a slave and a running consumer group."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, PushConsumer
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.wire_format import Command
from tests.conftest import await_group_caught_up, client_config, fill_topic

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("mqadmin")), slaves=1) as started:
        yield started


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "rocketbox.cluster.cli", *args], capture_output=True, text=True,
                          timeout=60)
    if check and proc.returncode != 0:
        raise AssertionError(f"cluster {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _lines(proc) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines()]


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
    records = _lines(_cli("clusterList", "-n", cluster.namesrv, "--json"))
    assert [(r["brokerName"], r["brokerId"], r["role"]) for r in records] == \
        [("broker-a", 0, "MASTER"), ("broker-a", 1, "SLAVE")]
    assert all(r["cluster"] == "DefaultCluster" and r["version"].startswith("RocketBox") for r in records)
    table = _cli("--namesrv", cluster.namesrv, "clusterList").stdout   # the global option before the verb
    assert "#Broker Name" in table and "SLAVE" in table


def test_topic_status_and_consumer_progress(cluster, running_group):
    status = _lines(_cli("topicStatus", "-n", cluster.namesrv, "-t", "MqaTopic", "--json"))
    assert sorted(r["queueId"] for r in status) == [0, 1, 2, 3]
    assert sum(r["maxOffset"] for r in status) == 40
    progress = _lines(_cli("consumerProgress", "-n", cluster.namesrv, "-g", "MqaGroup", "-t", "MqaTopic", "--json"))
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
