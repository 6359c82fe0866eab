"""The timer through RocketMQ's remoting door (issue 34 items 1 and 4): what RocketMQ's C++ client (a
4.x consumer) reads on a timed and on a delay-level message, as Apache's broker writes them; and
RECALL_MESSAGE (370) on both doors, with the send's recall handle and Apache's answers."""

from __future__ import annotations

import base64
import time

import pytest

from rocketbox.cluster import Admin, PullConsumer
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.remoting_client import RemotingRpcClient
from rocketbox.cluster.testing import pull_until, wait_until
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient
from tests.conftest import client_config
from tests.remoting.cpp_client import require_cpp_client, run_cpp, sent_ok

pytestmark = pytest.mark.timeout(240)
TIMER_NAMES = ("TIMER_DELIVER_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "DELAY", "REAL_TOPIC",
               "REAL_QID")


def test_a_cpp_consumer_reads_the_timer_properties_apache_writes(start_cluster, tmp_path):
    require_cpp_client()
    cluster = start_cluster()
    with Admin(config=client_config(cluster)) as admin:
        admin.create_topic("CppTimed", 1)
        deliver_ms = int(time.time() * 1000) + 2500
        messages = [{"topic": "CppTimed", "body": "timed", "properties": {"TIMER_DELIVER_MS": str(deliver_ms)}},
                    {"topic": "CppTimed", "body": "level", "delay_level": 1}]
        results = run_cpp("produce", {"namesrv": cluster.remoting_namesrv, "messages": messages}, tmp_path / "p")
        assert len(sent_ok(results)) == 2, results
        wait_until(lambda: sum(q["maxOffset"] for q in admin.queue_offsets("CppTimed")) == 2, 30,
                   what="both messages delivered to their topic")
    lines = run_cpp("consume", {"namesrv": cluster.remoting_namesrv, "group": "CID_CPP_TIMED", "topic": "CppTimed",
                                "expect": 2, "timeout_s": 60, "show_properties": TIMER_NAMES}, tmp_path / "c")
    got = {line["body"]: line["properties"] for line in lines if "body" in line}
    timed, level = got["timed"], got["level"]
    # TimerMessageStore: the timer properties stay, its slot and in/out times are added, the real
    # topic and queue are cleared.
    assert timed["TIMER_DELIVER_MS"] == str(deliver_ms), timed
    assert int(timed["TIMER_OUT_MS"]) == deliver_ms // 1000 * 1000 - (1000 if deliver_ms % 1000 == 0 else 0)
    assert int(timed["TIMER_DEQUEUE_MS"]) >= deliver_ms > int(timed["TIMER_ENQUEUE_MS"]) > 0, timed
    assert not timed["REAL_TOPIC"] and not timed["REAL_QID"] and not timed["DELAY"], timed
    # ScheduleMessageService: a delay level keeps DELAY and where it waited, and has no timer property.
    assert (level["DELAY"], level["REAL_TOPIC"], level["REAL_QID"]) == ("1", "CppTimed", "0"), level
    assert not level["TIMER_OUT_MS"] and not level["TIMER_DELIVER_MS"], level


def _send_timed(rpc, endpoint: str, topic: str, uniq_key: str, deliver_ms: int) -> Command:
    fields = {"producerGroup": "PG_RECALL", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
              "queueId": "0", "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
              "properties": properties_text([("UNIQ_KEY", uniq_key), ("TIMER_DELIVER_MS", str(deliver_ms))]),
              "reconsumeTimes": "0", "unitMode": "false", "batch": "false"}
    answer = rpc.call(endpoint, Command(RequestCode.SEND_MESSAGE, fields, b"body-" + uniq_key.encode()))
    assert answer.code == ResponseCode.SUCCESS, (answer.code, answer.remark)
    return answer


def _recall(rpc, endpoint: str, topic: str, handle: str) -> Command:
    return rpc.call(endpoint, Command(RequestCode.RECALL_MESSAGE, {"producerGroup": "PG_RECALL", "topic": topic,
                                                                   "recallHandle": handle}))


def test_recall_message_on_both_doors_with_apaches_answers(start_cluster):
    cluster = start_cluster()
    remoting = RemotingRpcClient(default_timeout_ms=5000)
    native = RpcClient()
    try:
        with Admin(config=client_config(cluster)) as admin, \
                Admin(config=client_config(cluster, transport="remoting")) as remoting_admin:
            admin.create_topic("RecallMe", 1)
            admin.create_topic("RecallOther", 1)
            (native_endpoint,) = admin.master_endpoints().values()
            (endpoint,) = remoting_admin.master_endpoints().values()
            due_ms = int(time.time() * 1000) + 4000
            handles = {key: _send_timed(remoting, endpoint, "RecallMe", key, due_ms + extra).fields["recallHandle"]
                       for key, extra in (("RECALL-A", 0), ("RECALL-B", 0), ("KEPT-C", 1000))}
            assert base64.urlsafe_b64decode(handles["RECALL-A"]).decode() == \
                f"v1 RecallMe broker-a {due_ms // 1000 * 1000 - (1000 if due_ms % 1000 == 0 else 0) + 1} RECALL-A"

            off = _recall(remoting, endpoint, "RecallMe", handles["RECALL-A"])
            assert (off.code, off.remark) == (ResponseCode.NO_PERMISSION, "recall failed, operation is forbidden")
            remoting_admin.update_broker_config(endpoint, {"recallMessageEnable": "true"})
            assert remoting_admin.broker_config(endpoint)["recallMessageEnable"] == "true"

            refusals = [(_recall(remoting, endpoint, "RecallMe", "not a handle"), "recall handle is invalid"),
                        (_recall(remoting, endpoint, "RecallOther", handles["RECALL-A"]),
                         "recall failed, topic not match")]
            for answer, remark in refusals:
                assert (answer.code, answer.remark) == (ResponseCode.ILLEGAL_OPERATION, remark)
            missing = _recall(remoting, endpoint, "NoSuchTopic", handles["RECALL-A"])
            assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST,
                                                      "recall failed, the topic[NoSuchTopic] not exist")

            by_native = _recall(native, native_endpoint, "RecallMe", handles["RECALL-A"])
            by_remoting = _recall(remoting, endpoint, "RecallMe", handles["RECALL-B"])
            assert (by_native.code, by_native.fields.get("msgId")) == (ResponseCode.SUCCESS, "RECALL-A")
            assert (by_remoting.code, by_remoting.fields.get("msgId")) == (ResponseCode.SUCCESS, "RECALL-B")

            # C is due a second after A and B: had either been delivered, it would stand before C.
            with PullConsumer("RecallCheckCG", config=client_config(cluster)) as consumer:
                pulled = pull_until(consumer, "RecallMe", 1)
            assert [(m.properties["UNIQ_KEY"], m.queue_offset) for m in pulled] == [("KEPT-C", 0)]

            late = _recall(remoting, endpoint, "RecallMe", handles["KEPT-C"])
            assert (late.code, late.remark) == (ResponseCode.ILLEGAL_OPERATION, "recall failed, timestamp invalid")
    finally:
        remoting.close()
        native.close()
