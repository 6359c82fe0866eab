"""The NameServer's KV config (kvConfig.json, Apache's file) and admin requests, in process: what
outlives a restart, what a registration answers, QUERY_DATA_VERSION, a bad file."""

from __future__ import annotations

import json

import pytest

from rocketbox.cluster.config import NamesrvConfig
from rocketbox.cluster.namesrv import NamesrvService
from rocketbox.cluster.namesrv_kv import decode_kv_file, encode_kv_file
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import Command

pytestmark = pytest.mark.timeout(30)

# What Apache 4.9.8's NameServer wrote after updateKvConfig -s AdmNS -k k1 -v v1 and updateOrderConf put.
APACHE_KV_FILE = b'{"configTable":{"AdmNS":{"k1":"v1"},"ORDER_TOPIC_CONFIG":{"AdmT":"broker-a:2"}}}'


def _call(service, code: int, fields: dict | None = None, body: bytes = b"") -> Command:
    return service.handlers[code](Command(code, fields or {}, body), None)


def test_kv_file_is_apaches_and_reads_back():
    table = decode_kv_file(APACHE_KV_FILE)
    assert table == {"AdmNS": {"k1": "v1"}, "ORDER_TOPIC_CONFIG": {"AdmT": "broker-a:2"}}
    assert encode_kv_file(table) == APACHE_KV_FILE
    assert decode_kv_file(b"{}") == {}
    for bad in (b'{"configTable":[1]}', b'{"configTable":{"ns":"flat"}}', b"not json"):
        with pytest.raises(ValueError):
            decode_kv_file(bad)


def test_kv_config_and_live_settings_outlive_a_restart(tmp_path):
    cfg = NamesrvConfig(data_dir=str(tmp_path))
    service = NamesrvService(cfg)
    assert _call(service, RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T",
                                                      "value": "broker-a:4"}).code == ResponseCode.SUCCESS
    assert _call(service, RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"orderMessageEnable=true\n").code == \
        ResponseCode.SUCCESS
    assert json.loads((tmp_path / "kvConfig.json").read_text()) == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}}}

    again = NamesrvService(cfg)   # a restart: the same data dir
    assert again.cfg.order_message_enable
    assert _call(again, RequestCode.GET_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "T"}).fields == \
        {"value": "broker-a:4"}
    # RocketMQ answers a registration with the order config (its brokers mark those topics orderly).
    registered = _call(again, RequestCode.REGISTER_BROKER, {"brokerName": "broker-a", "brokerId": "0",
                                                            "brokerAddr": "127.0.0.1:1", "clusterName": "C"},
                       json.dumps({"topicConfigTable": {"T": {"readQueueNums": 4, "writeQueueNums": 4}}}).encode())
    assert json.loads(registered.body) == {"table": {"T": "broker-a:4"}}
    route = json.loads(_call(again, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}).body)
    assert route["orderTopicConf"] == "broker-a:4"


def test_an_unreadable_kv_file_starts_empty_and_is_kept(tmp_path):
    (tmp_path / "kvConfig.json").write_bytes(b"{broken")
    service = NamesrvService(NamesrvConfig(data_dir=str(tmp_path)))
    assert _call(service, RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "X"}).code == ResponseCode.QUERY_NOT_FOUND
    assert (tmp_path / "kvConfig.json").read_bytes() == b"{broken"


def test_query_data_version_compares_what_the_broker_registered():
    now = [1000]
    service = NamesrvService(NamesrvConfig(broker_expiry_ms=120_000), clock_ms=lambda: now[0])
    version = {"counter": 3, "timestamp": 99}
    _call(service, RequestCode.REGISTER_BROKER, {"brokerName": "b", "brokerId": "0", "brokerAddr": "127.0.0.1:1",
                                                 "clusterName": "C"},
          json.dumps({"topicConfigTable": {}, "dataVersion": version}).encode())
    now[0] = 50_000
    same = _call(service, RequestCode.QUERY_DATA_VERSION, {"brokerAddr": "127.0.0.1:1"}, json.dumps(version).encode())
    assert same.fields["changed"] == "false" and json.loads(same.body) == version
    assert service.table.brokers["127.0.0.1:1"].last_heartbeat_ms == 50_000   # counted as a heartbeat
    newer = _call(service, RequestCode.QUERY_DATA_VERSION, {"brokerAddr": "127.0.0.1:1"},
                  json.dumps({"counter": 4, "timestamp": 99}).encode())
    assert newer.fields["changed"] == "true"
    unknown = _call(service, RequestCode.QUERY_DATA_VERSION, {"brokerAddr": "127.0.0.1:9"}, b"{}")
    assert unknown.fields["changed"] == "true" and unknown.body == b""


def test_query_data_version_refuses_a_body_nested_too_deep():
    """json's decoder recurses once per nesting level: a body of brackets must get an error answer,
    not a RecursionError out of the handler (found by tests/fuzz/test_fuzz_handlers.py)."""
    service = NamesrvService(NamesrvConfig(), clock_ms=lambda: 1000)
    answer = _call(service, RequestCode.QUERY_DATA_VERSION, {"brokerAddr": "127.0.0.1:1"}, b"[" * 200_000)
    assert answer.code != ResponseCode.SUCCESS and "nests too deep" in answer.remark
