"""broker.conf / namesrv.conf (config_file.py, cli/up_config.py): every setting has a key and reads
back; files fill the flags the command line left out; unknown keys are warned about; keys the
topology sets per process are refused with the flag to use."""

import argparse
import dataclasses

import pytest

from rocketbox.cluster.cli.up_config import read_up_files
from rocketbox.cluster.config import BrokerConfig, NamesrvConfig, StoreConfig
from rocketbox.cluster.config_file import BROKER_TABLE, NAMESRV_TABLE, read_settings, settings_text
from rocketbox.cluster.live_settings import with_values
from rocketbox.cluster.rocketmq_keys import parse_properties, properties_text


def test_every_setting_has_a_key_and_reads_back():
    store = StoreConfig(store_dir="/x/store", file_reserved_time_ms=48 * 3_600_000, delete_when="03;15",
                        consumequeue_entries_per_file=1000)
    cfg = BrokerConfig(store=store, namesrv_endpoints=("tcp://127.0.0.1:9871", "tcp://127.0.0.1:9872"),
                       enable_property_filter=True)
    fields = {f.name for f in dataclasses.fields(BrokerConfig)} - {"store"}
    assert {k.path for k in BROKER_TABLE.values()} == fields | {f"store.{f.name}" for f in dataclasses.fields(StoreConfig)}
    text = properties_text(settings_text(cfg, BROKER_TABLE))
    assert "fileReservedTime=48\n" in text and "mappedFileSizeConsumeQueue=20000\n" in text
    assert "deleteWhen=03;15\n" in text and "flushLogicsIntervalMs=1000\n" in text
    values = read_settings(parse_properties(text), BROKER_TABLE).values
    assert with_values(BrokerConfig(store=StoreConfig(store_dir="")), values) == cfg
    namesrv = NamesrvConfig(remoting_port=9876, controller_peers=("a:1", "b:2"))
    back = read_settings(parse_properties(properties_text(settings_text(namesrv, NAMESRV_TABLE))), NAMESRV_TABLE)
    assert dataclasses.replace(NamesrvConfig(), **back.values) == namesrv


def test_bad_values_name_their_key():
    with pytest.raises(ValueError, match="enablePropertyFilter='yes'"):
        read_settings({"enablePropertyFilter": "yes"}, BROKER_TABLE)
    with pytest.raises(ValueError, match="fileReservedTime='soon'"):
        read_settings({"fileReservedTime": "soon"}, BROKER_TABLE)


def _up_args(**given):
    names = ("broker_name", "host", "broker_role", "flush_mode", "no_auto_create_topic", "commitlog_file_size_bytes",
             "broker_remoting_port", "namesrv", "namesrv_remoting_port")
    return argparse.Namespace(**{name: given.get(name) for name in names}, config="broker.conf",
                              namesrv_config="namesrv.conf")


FILES = {
    "broker.conf": "brokerClusterName=Prod\nflushDiskType=SYNC_FLUSH\nbrokerRole=SYNC_MASTER\n"
                   "fileReservedTime=48\ndeleteWhen=03\nmappedFileSizeCommitLog=33554432\n"
                   "autoCreateTopicEnable=false\nlistenPort=20911\nsendMessageThreadPoolNums=4\n",
    "namesrv.conf": "listenPort=19876\nscanNotActiveBrokerInterval=2000\n",
}


def test_files_fill_the_flags_left_out_and_the_rest_becomes_settings():
    args = _up_args(flush_mode="async")   # given on the command line: it wins
    settings = read_up_files(args, FILES.__getitem__)
    assert args.flush_mode == "async" and args.broker_role == "sync" and args.no_auto_create_topic is True
    assert args.commitlog_file_size_bytes == 33554432 and args.broker_remoting_port == 20911
    assert args.namesrv_remoting_port == 19876
    assert settings.broker == {"cluster_name": "Prod"}
    assert settings.store == {"file_reserved_time_ms": 48 * 3_600_000, "delete_when": "03"}
    assert settings.namesrv == {"scan_interval_ms": 2000}
    assert settings.warnings == ["broker.conf: unknown key sendMessageThreadPoolNums (ignored)"]


def test_keys_the_topology_sets_are_refused_with_the_flag():
    files = {"broker.conf": "haPort=20000\nbrokerId=1\n", "namesrv.conf": ""}
    with pytest.raises(ValueError, match="--slave-id for brokerId.*--broker-port"):
        read_up_files(_up_args(), files.__getitem__)
    with pytest.raises(ValueError, match="brokerRole='SLAVE'.*--slave-id"):
        read_up_files(_up_args(), {"broker.conf": "brokerRole=SLAVE\n", "namesrv.conf": ""}.__getitem__)
