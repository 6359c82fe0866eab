"""mqadmin's NameServer verbs and rarer broker verbs under `cluster`
(cli/mqadmin_more.py), run as a user runs them, through the native door, against a live cluster with
an online consumer group and a transactional producer."""

from __future__ import annotations

import json
import subprocess

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, Message, PushConsumer
from rocketbox.cluster.client.transaction import TransactionProducer
from rocketbox.cluster.testing import LocalCluster
from tests.cli_helpers import run_cli
from tests.conftest import UndecidedTransactions, await_group_caught_up, client_config, fill_topic

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("mqadmin-more"))) as started:
        yield started


def _cli(cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run_cli(args[0], "-n", cluster.namesrv, *args[1:], check=check, timeout_s=60)


@pytest.fixture(scope="module")
def online(cluster):
    """MoreTopic (2 queues, 6 messages) consumed to its end by MoreGroup, which stays online and
    records what its listener is given."""
    cfg = client_config(cluster)
    results = fill_topic(cfg, "MoreTopic", 2, 6)
    seen = []
    with PushConsumer("MoreGroup", config=cfg) as consumer:
        consumer.subscribe("MoreTopic", "*")
        consumer.register_listener(lambda msgs: seen.extend(m.body for m in msgs) or ConsumeStatus.CONSUME_SUCCESS)
        consumer.start()
        await_group_caught_up(cfg, "MoreTopic", "MoreGroup")
        yield consumer, results, seen


def test_kv_config_order_conf_and_namesrv_config(cluster):
    _cli(cluster, "updateKvConfig", "-s", "MoreNS", "-k", "k1", "-v", "v1")
    assert "orderConf=[broker-a:2]" in _cli(cluster, "updateOrderConf", "-t", "MoreTopic", "-m", "put",
                                            "-v", "broker-a:2").stdout
    assert _cli(cluster, "updateOrderConf", "-t", "MoreTopic", "-m", "get").stdout.strip() == \
        "get orderConf success. topic=[MoreTopic], orderConf=[broker-a:2]"
    _cli(cluster, "updateOrderConf", "-t", "MoreTopic", "-m", "delete")
    gone = _cli(cluster, "updateOrderConf", "-t", "MoreTopic", "-m", "get", check=False)
    assert gone.returncode == 1 and "no order config for topic MoreTopic" in gone.stderr
    _cli(cluster, "deleteKvConfig", "-s", "MoreNS", "-k", "k1")
    with open(f"{cluster.topology.namesrvs[0].data_dir}/kvConfig.json") as f:
        assert json.load(f)["configTable"]["MoreNS"] == {}

    (config,) = json.loads(_cli(cluster, "getNamesrvConfig", "--json").stdout).values()
    assert config["orderMessageEnable"] == "false" and config["productEnvName"] == "center"
    _cli(cluster, "updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true")
    (config,) = json.loads(_cli(cluster, "getNamesrvConfig", "--json").stdout).values()
    assert config["orderMessageEnable"] == "true"
    refused = _cli(cluster, "updateNamesrvConfig", "-k", "configStorePath", "-v", "/tmp/x", check=False)
    assert refused.returncode == 1 and "black list" in refused.stderr


def test_wipe_and_add_write_perm(cluster, online):
    wiped = _cli(cluster, "wipeWritePerm", "-b", "broker-a").stdout
    assert wiped.startswith("wipe write perm of broker[broker-a] in name server[")
    with Admin(config=client_config(cluster)) as admin:
        assert admin.route("MoreTopic")["queueDatas"][0]["perm"] == 4
        _cli(cluster, "addWritePerm", "-b", "broker-a")
        assert admin.route("MoreTopic")["queueDatas"][0]["perm"] == 6


def test_producer_connection_and_producer(cluster):
    fill_topic(client_config(cluster), "MoreTx", 1, 1)
    with TransactionProducer("MoreTxPG", UndecidedTransactions(), config=client_config(cluster)) as producer:
        producer.send_message_in_transaction(Message("MoreTx", b"half"))
        (member,) = json.loads(_cli(cluster, "producerConnection", "-g", "MoreTxPG", "--json").stdout)
        assert member["clientId"] == producer.client_id and member["language"] == "PYTHON"
        master = cluster.topology.brokers[0].address
        assert f"producer group (MoreTxPG) instance : clientId={producer.client_id}" in \
            _cli(cluster, "producer", "-b", master).stdout
    assert _cli(cluster, "producerConnection", "-g", "MoreNoPG", check=False).returncode == 1


def test_broker_consume_stats_clone_and_query_cq(cluster, online):
    master = cluster.topology.brokers[0].address
    stats = json.loads(_cli(cluster, "brokerConsumeStats", "-b", master, "--json").stdout)
    mine = [r for r in stats["rows"] if r["group"] == "MoreGroup" and r["topic"] == "MoreTopic"]
    assert sorted((r["queueId"], r["brokerOffset"], r["consumerOffset"]) for r in mine) == [(0, 3, 3), (1, 3, 3)]
    assert "Diff Total:" in _cli(cluster, "brokerConsumeStats", "-b", master).stdout

    _cli(cluster, "cloneGroupOffset", "-s", "MoreGroup", "-d", "MoreCopy", "-t", "MoreTopic")
    with Admin(config=client_config(cluster)) as admin:
        copied = admin.queue_offsets("MoreTopic", "MoreCopy")
    assert [r["consumerOffset"] for r in copied] == [3, 3]

    cq = json.loads(_cli(cluster, "queryCq", "-t", "MoreTopic", "-q", "0", "-i", "0", "-c", "2", "-g", "MoreGroup",
                         "--json").stdout)
    assert (cq["minQueueIndex"], cq["maxQueueIndex"], len(cq["queueData"])) == (0, 3, 2)
    assert cq["subscriptionData"]["subString"] == "*"
    assert "success" in _cli(cluster, "cleanExpiredCQ", "-c", "DefaultCluster").stdout
    assert "0 unused topics cleaned" in _cli(cluster, "cleanUnusedTopic", "-b", master).stdout


def test_consume_message_directly_through_the_native_door(cluster, online):
    consumer, results, seen = online
    before = len(seen)
    out = _cli(cluster, "consumeMessageDirectly", "-i", results[2].offset_msg_id, "-g", "MoreGroup",
               "-d", consumer.client_id).stdout
    assert "consumeResult=CR_SUCCESS" in out and len(seen) == before + 1 and seen[-1] == b"m2"
    nobody = _cli(cluster, "consumeMessageDirectly", "-i", results[2].offset_msg_id, "-g", "MoreGroup",
                  "-d", "10.0.0.9@1@nobody", check=False)
    assert nobody.returncode == 1 and "not online" in nobody.stderr
