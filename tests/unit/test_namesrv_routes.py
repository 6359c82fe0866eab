"""The NameServer's route table: registration, routes in RocketMQ's shape, expiry, deletion."""

from __future__ import annotations

import json

from rocketbox.cluster.config import NamesrvConfig
from rocketbox.cluster.namesrv import LiveBroker, NamesrvService, RouteTable
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import Command


def _register(service, name, broker_id, address, topics):
    body = json.dumps({"topicConfigTable": topics}).encode()
    return service.on_register_broker(Command(RequestCode.REGISTER_BROKER, {
        "brokerName": name, "brokerId": str(broker_id), "brokerAddr": address, "clusterName": "C"}, body))


def test_route_has_rocketmq_shape_and_merges_brokers():
    now = [1000]
    service = NamesrvService(NamesrvConfig(broker_expiry_ms=120_000), clock_ms=lambda: now[0])
    topic = {"readQueueNums": 4, "writeQueueNums": 4, "perm": 6}
    assert _register(service, "broker-a", 0, "127.0.0.1:1", {"T": topic}).code == ResponseCode.SUCCESS
    _register(service, "broker-b", 0, "127.0.0.1:2", {"T": topic})
    _register(service, "broker-a", 1, "127.0.0.1:3", {"T": topic})
    response = service.on_get_route(Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}))
    route = json.loads(response.body)
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a", "broker-b"]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:1", "1": "127.0.0.1:3"}
    assert set(route) == {"orderTopicConf", "queueDatas", "brokerDatas", "filterServerTable"}
    missing = service.on_get_route(Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"}))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST and "Nope" in missing.remark


def test_silent_broker_expires_and_deleted_topic_disappears():
    now = [0]
    service = NamesrvService(NamesrvConfig(broker_expiry_ms=120_000), clock_ms=lambda: now[0])
    _register(service, "broker-a", 0, "127.0.0.1:1", {"T": {"readQueueNums": 1, "writeQueueNums": 1}})
    _register(service, "broker-b", 0, "127.0.0.1:2", {"T": {"readQueueNums": 1, "writeQueueNums": 1}})
    now[0] = 100_000
    _register(service, "broker-b", 0, "127.0.0.1:2", {"T": {"readQueueNums": 1, "writeQueueNums": 1}})
    now[0] = 121_000
    service.scan_expired()
    route = service.table.route("T")
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-b"]
    # A topic no longer in a master's registration was deleted there.
    _register(service, "broker-b", 0, "127.0.0.1:2", {})
    assert service.table.route("T") is None


def test_bad_registration_is_refused():
    service = NamesrvService(NamesrvConfig())
    bad = service.on_register_broker(Command(RequestCode.REGISTER_BROKER, {"brokerName": "x"}, b"{}"))
    assert bad.code != ResponseCode.SUCCESS and "missing" in bad.remark
    not_json = service.on_register_broker(Command(RequestCode.REGISTER_BROKER, {
        "brokerName": "a", "brokerId": "0", "brokerAddr": "h:1", "clusterName": "C"}, b"{nope"))
    assert not_json.code != ResponseCode.SUCCESS and "JSON" in not_json.remark


def test_cluster_info():
    table = RouteTable()
    table.register(LiveBroker("C", "broker-a", 0, "h:1", 0), {})
    info = table.cluster_info()
    assert info["clusterAddrTable"] == {"C": ["broker-a"]}
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": "h:1"}


def test_master_registrations_are_fenced_by_epoch():
    service = NamesrvService(NamesrvConfig())
    topic = {"readQueueNums": 2, "writeQueueNums": 2, "perm": 6}

    def register(address, epoch):
        body = json.dumps({"topicConfigTable": {"T": topic}}).encode()
        return service.on_register_broker(Command(RequestCode.REGISTER_BROKER, {
            "brokerName": "broker-a", "brokerId": "0", "brokerAddr": address, "clusterName": "C",
            "masterEpoch": str(epoch)}, body))

    def master_address():
        route = json.loads(service.on_get_route(Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})).body)
        return route["brokerDatas"][0]["brokerAddrs"]["0"]

    assert register("127.0.0.1:1", 1).code == ResponseCode.SUCCESS
    assert register("127.0.0.1:2", 2).code == ResponseCode.SUCCESS     # the new master replaces the old
    assert master_address() == "127.0.0.1:2"
    stale = register("127.0.0.1:1", 1)                                 # the old one resumes, not knowing
    assert stale.code != ResponseCode.SUCCESS and "stale master" in stale.remark
    assert master_address() == "127.0.0.1:2"
    assert register("127.0.0.1:2", 2).code == ResponseCode.SUCCESS     # its own renewals go on
