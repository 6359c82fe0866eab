"""RocketMQ's key names for the broker's settings, and mqadmin getBrokerConfig (GET_BROKER_CONFIG)
answered with them as Java properties text."""

from __future__ import annotations

import dataclasses
import json
import os

from rocketbox.cluster.config import SYNC_FLUSH, BrokerConfig
from rocketbox.cluster.config_file import broker_settings
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.rocketmq_defaults import broker_cpu_defaults
from rocketbox.cluster.rocketmq_keys import broker_properties, properties_text
from tests.java.apache_keys import APACHE_BROKER_CONFIG_KEYS
from tests.in_process import InProcessBroker
from tests.store_harness import tiny_config


def _cfg(tmp_path) -> BrokerConfig:
    store = dataclasses.replace(tiny_config(tmp_path / "store"), flush_mode=SYNC_FLUSH,
                                commitlog_file_size_bytes=1 << 20, consumequeue_entries_per_file=1000)
    return BrokerConfig(store=store, broker_name="broker-x", port=20811, remoting_port=20911,
                        namesrv_endpoints=("tcp://127.0.0.1:9871",), auto_create_topic_enabled=False)


def test_settings_under_rocketmq_keys(tmp_path):
    props = broker_properties(_cfg(tmp_path))
    assert props["brokerName"] == "broker-x" and props["brokerClusterName"] == "DefaultCluster"
    assert props["brokerId"] == "0" and props["brokerRole"] == "ASYNC_MASTER"
    assert props["flushDiskType"] == "SYNC_FLUSH"
    assert props["listenPort"] == "20911" and props["haListenPort"] == "20812"
    assert props["mappedFileSizeCommitLog"] == str(1 << 20)
    assert props["mappedFileSizeConsumeQueue"] == "20000"           # bytes: 1000 entries of 20
    assert props["autoCreateTopicEnable"] == "false"
    assert props["namesrvAddr"] == "127.0.0.1:9871"
    assert props["serverChannelMaxIdleTimeSeconds"] == "120"
    assert props["messageDelayLevel"].startswith("1s 5s 10s")


def test_properties_text_is_java_lines():
    assert properties_text({"b": "2", "a": "x y"}) == "a=x y\nb=2\n"


def test_get_broker_config_answers_the_properties(tmp_path):
    cfg = _cfg(tmp_path)
    broker = InProcessBroker(cfg=cfg)
    answer = broker.call(RequestCode.GET_BROKER_CONFIG, {})
    assert answer.code == ResponseCode.SUCCESS
    lines = dict(line.split("=", 1) for line in answer.body.decode().splitlines())
    assert lines.items() >= broker_settings(cfg).items() and lines.items() >= broker_properties(cfg).items()
    assert set(json.loads(answer.fields["version"])) == {"counter", "timestamp"}
    # Every key Apache RocketMQ 4.9.8's broker answers (its getBrokerConfig, stock settings).
    assert not APACHE_BROKER_CONFIG_KEYS - set(lines)
    assert lines["storePathCommitLog"] == os.path.join(cfg.store.store_dir, "commitlog")
    assert lines["enableDLegerCommitLog"] == "false" and lines["haSlaveFallbehindMax"] == str(cfg.ha_slave_fall_behind_max_bytes)
    assert lines["clientCallbackExecutorThreads"] == str(os.cpu_count())   # exportMetrics' "cpuNum"
    broker.crash()   # no clean shutdown: it would unregister from a NameServer that is not there




def test_cpu_derived_defaults_follow_apache():
    """BrokerConfig's initialisers, on a 2-processor and an 8-processor machine."""
    two = broker_cpu_defaults(2)
    assert (two["sendMessageThreadPoolNums"], two["pullMessageThreadPoolNums"], two["queryMessageThreadPoolNums"],
            two["endTransactionThreadPoolNums"], two["heartbeatThreadPoolNums"]) == ("2", "20", "10", "12", "2")
    eight = broker_cpu_defaults(8)
    assert (eight["sendMessageThreadPoolNums"], eight["endTransactionThreadPoolNums"],
            eight["clientCallbackExecutorThreads"]) == ("4", "24", "8")


def test_properties_text_parses_back_with_comments_and_both_separators():
    from rocketbox.cluster.rocketmq_keys import parse_properties, properties_text
    props = {"brokerName": "broker-a", "messageDelayLevel": "1s 5s 10s", "namesrvAddr": "127.0.0.1:9876"}
    assert parse_properties(properties_text(props)) == props
    text = "# a comment\n! another\n\nbrokerId : 1\nflushDiskType=SYNC_FLUSH\n  deleteWhen = 04 \nlonely\n"
    assert parse_properties(text) == {"brokerId": "1", "flushDiskType": "SYNC_FLUSH", "deleteWhen": "04",
                                      "lonely": ""}
