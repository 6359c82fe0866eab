"""`cluster up -c broker.conf` and `cluster config show`, and updateBrokerConfig on
a running broker: a file's RocketMQ keys reach every broker, flags win over the file, unknown keys
are warned about, a live change reaches the allocate worker's retention and outlives a restart."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from rocketbox.cluster import Admin, Message, Producer
from rocketbox.cluster.config import ClientConfig
from rocketbox.cluster.testing import wait_until
from tests.cli_helpers import PORT_FLAGS_COUNT, port_flags, run_cli, up_on_free_ports

pytestmark = pytest.mark.timeout(240)

BROKER_CONF = """\
# RocketMQ's keys, as in a broker.conf
brokerClusterName=ConfCluster
flushDiskType=SYNC_FLUSH
mappedFileSizeCommitLog=262144
maxMessageSize=65536
fileReservedTime=72
cleanResourceInterval=300
deleteCommitLogFilesInterval=0
defaultTopicQueueNums=2
sendMessageThreadPoolNums=16
"""


def _cli(data_dir: str, *args: str, check: bool = True):
    return run_cli(*args, data_dir=data_dir, check=check)


def _broker_config(data_dir: str, namesrv: str) -> dict[str, str]:
    answer = json.loads(_cli(data_dir, "getBrokerConfig", "-n", namesrv, "-c", "ConfCluster", "--json").stdout)
    (config,) = answer.values()
    return config


def _segments(data_dir: str) -> list[str]:
    return sorted(n for n in os.listdir(os.path.join(data_dir, "broker-a", "store", "commitlog")) if n.isdigit())


def test_broker_conf_flags_win_live_updates_last(tmp_path):
    data_dir = str(tmp_path / "conf")
    conf = tmp_path / "broker.conf"
    conf.write_text(BROKER_CONF)

    # Up on fresh ports if one was taken meanwhile (the HA port, broker + 1, is not among the picked).
    ports, up = up_on_free_ports(PORT_FLAGS_COUNT, lambda picked: ["up", "--detach", "-c", str(conf), "--flush-mode",
                                                                   "async", *port_flags(picked)], data_dir=data_dir)
    namesrv_port, broker_port, namesrv_remoting, broker_remoting, metrics = ports
    namesrv = f"127.0.0.1:{namesrv_port}"
    try:
        shown = json.loads(_cli(data_dir, "config", "show", "-c", str(conf), "--flush-mode", "async",
                                *port_flags(ports), "--json").stdout)
        assert shown["broker-a"]["brokerClusterName"] == "ConfCluster"
        assert shown["broker-a"]["flushDiskType"] == "ASYNC_FLUSH"
        assert "unknown key sendMessageThreadPoolNums" in up.stderr
        config = _broker_config(data_dir, namesrv)
        assert {key: config[key] for key in ("brokerClusterName", "flushDiskType", "mappedFileSizeCommitLog",
                                             "fileReservedTime", "defaultTopicQueueNums", "listenPort")} == {
            "brokerClusterName": "ConfCluster", "flushDiskType": "ASYNC_FLUSH", "mappedFileSizeCommitLog": "262144",
            "fileReservedTime": "72", "defaultTopicQueueNums": "2", "listenPort": str(broker_remoting)}
        assert shown["broker-a"] == config   # config show said what up started

        refused = _cli(data_dir, "updateBrokerConfig", "-n", namesrv, "-c", "ConfCluster", "-k", "maxMessageSize",
                       "-v", "1024", check=False)
        assert refused.returncode == 1 and "cannot change while the broker runs" in refused.stderr

        cfg = ClientConfig(namesrv_endpoints=(f"tcp://{namesrv}",))
        with Admin(config=cfg) as admin:
            admin.create_topic("ConfTopic", 2)
        with Producer("ConfPG", config=cfg) as producer:
            for i in range(60):   # ~1.2 MB: five segments of 256 KiB
                producer.send_batch([Message("ConfTopic", b"%d|" % i + b"." * 1000) for _ in range(20)])
        assert len(_segments(data_dir)) >= 5
        used = shutil.disk_usage(data_dir)
        if used.used / used.total < 0.02:
            pytest.skip("the disk is under 2 % used: a ratio of 1 % would not be exceeded")
        # Live: above 1 % of the disk in use, retention deletes the oldest segments, expired or not.
        _cli(data_dir, "updateBrokerConfig", "-n", namesrv, "-c", "ConfCluster", "-k", "diskMaxUsedSpaceRatio",
             "-v", "1")
        wait_until(lambda: len(_segments(data_dir)) <= 2, 30, what="the allocate worker applying the new ratio")
        assert _broker_config(data_dir, namesrv)["diskMaxUsedSpaceRatio"] == "1"
    finally:
        down = _cli(data_dir, "down", check=False)
    assert down.returncode == 0, down.stderr

    # The data dir remembers its broker.conf, and the broker its live change (--data-dir given after
    # the subcommand this time, as the README lists it).
    run_cli("up", "--detach", "--data-dir", data_dir)
    try:
        config = _broker_config(data_dir, namesrv)
        assert config["brokerClusterName"] == "ConfCluster" and config["diskMaxUsedSpaceRatio"] == "1"
        assert json.loads(run_cli("status", "--json", "--data-dir", data_dir).stdout)["children"]
    finally:
        down = run_cli("down", "--data-dir", data_dir, check=False)
    assert down.returncode == 0, down.stderr
