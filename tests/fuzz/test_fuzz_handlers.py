"""Request handlers over what they parse: a broker service and a NameServer built in this process
(no fork; the broker over a 64 KiB-segment store, its reput run in process) take random requests:
codes of their tables, realistic and random header fields, JSON bodies shaped as heartbeats, lock
batches, subscription group and topic configs (and not), batch bodies, properties texts, SQL92
subscriptions, receipt handles. Every request is answered (or parked, for the codes that wait) by
the handler itself, never by the dispatcher's catch-all; every answer encodes for both doors;
whatever state the requests left, the broker and the NameServer still serve a send, a pull, a
heartbeat and a route afterwards."""

from __future__ import annotations

import json
import tempfile

import pytest
from hypothesis import strategies as st

from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.wire_format import Command, encode_header
from tests.fuzz import request_strategies
from tests.fuzz.budget import run_hypothesis
from tests.in_process import InProcessBroker, InProcessNameServer, answer

# Codes whose handler may keep ``reply`` and answer later (a long poll, a pop's poll time).
PARKING = {RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE}


class InProcessCluster:
    """One in-process broker (manual clock) and one NameServer, each answer checked for shape."""

    def __init__(self, root: str):
        self.in_process = InProcessBroker(f"{root}/store")
        self.broker = self.in_process.service
        self.namesrv = InProcessNameServer().service

    def call(self, handlers: dict, request: Command) -> Command | None:
        response = answer(handlers, request)
        if response is None:
            assert request.code in PARKING, f"code {request.code} left unanswered"
            return None
        assert isinstance(response.code, int) and isinstance(response.remark, str)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in response.fields.items()), response.fields
        encode_header(response)
        rf.encode_frame(response, rf.SERIALIZE_JSON)
        assert not (response.code == ResponseCode.SYSTEM_ERROR and "handler" in response.remark), response
        return response

    def tick(self) -> None:
        self.in_process.tick()

    def still_serves(self) -> None:
        created = self.call(self.broker.handlers, Command(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "FuzzCheck", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}))
        assert created.code == ResponseCode.SUCCESS, created
        send = self.call(self.broker.handlers, Command(RequestCode.SEND_MESSAGE_V2, {
            "a": "FuzzPG", "b": "FuzzCheck", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0",
            "i": properties_text([("UNIQ_KEY", "check")])}, b"still serving"))
        assert send.code == ResponseCode.SUCCESS, send
        self.tick()
        pull = self.call(self.broker.handlers, Command(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "FuzzCG", "topic": "FuzzCheck", "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"}))
        assert pull.code == ResponseCode.SUCCESS and b"still serving" in pull.body, pull
        heartbeat = self.call(self.broker.handlers, Command(RequestCode.HEART_BEAT, {}, json.dumps(
            {"clientID": "fuzz-check", "consumerDataSet": [{"groupName": "FuzzCG", "subscriptionDataSet": [
                {"topic": "FuzzCheck", "subString": "*"}]}]}).encode()))
        assert heartbeat.code == ResponseCode.SUCCESS, heartbeat
        for code in (RequestCode.GET_BROKER_RUNTIME_INFO, RequestCode.GET_ALL_TOPIC_CONFIG,
                     RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, RequestCode.GET_BROKER_METRICS):
            assert self.call(self.broker.handlers, Command(code, {})).code == ResponseCode.SUCCESS
        register = self.call(self.namesrv.handlers, Command(RequestCode.REGISTER_BROKER, {
            "brokerName": "broker-a", "brokerId": "0", "brokerAddr": "127.0.0.1:10911", "clusterName": "C"},
            json.dumps({"topicConfigTable": {"FuzzCheck": {"readQueueNums": 1, "writeQueueNums": 1,
                                                           "perm": 6}}}).encode()))
        assert register.code == ResponseCode.SUCCESS, register
        route = self.call(self.namesrv.handlers, Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "FuzzCheck"}))
        assert route.code == ResponseCode.SUCCESS and json.loads(route.body)["queueDatas"], route
        for code in (RequestCode.GET_BROKER_CLUSTER_INFO, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER):
            assert self.call(self.namesrv.handlers, Command(code, {})).code == ResponseCode.SUCCESS

    def close(self) -> None:
        self.in_process.close()


@pytest.fixture(scope="module")
def in_process(tmp_path_factory):
    cluster = InProcessCluster(str(tmp_path_factory.mktemp("fuzz-handlers")))
    yield cluster
    cluster.close()


def _requests(handlers: dict) -> st.SearchStrategy:
    return st.lists(st.sampled_from(sorted(handlers)).flatmap(request_strategies.request), min_size=1, max_size=4)


@pytest.mark.fuzz(weight=3.0)
def test_broker_and_namesrv_handlers_answer_any_request_and_serve_on(fuzz_seconds, in_process):
    broker, namesrv = in_process.broker.handlers, in_process.namesrv.handlers
    strategy = st.one_of(st.tuples(st.just("broker"), _requests(broker)),
                         st.tuples(st.just("namesrv"), _requests(namesrv)))
    checked = [0]

    def check(value) -> None:
        side, requests = value
        handlers = broker if side == "broker" else namesrv
        for request in requests:
            in_process.call(handlers, request)
            in_process.tick()
        checked[0] += 1
        if checked[0] % 50 == 0:
            in_process.still_serves()

    run_hypothesis("broker and namesrv handlers", fuzz_seconds, strategy, check)
    in_process.still_serves()


def test_the_in_process_cluster_serves_before_any_fuzz():
    with tempfile.TemporaryDirectory() as root:
        cluster = InProcessCluster(root)
        try:
            cluster.still_serves()
        finally:
            cluster.close()
