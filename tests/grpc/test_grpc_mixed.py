"""Three clients, three doors, one topic: RocketMQ's C++ client (remoting), RocketBox's own client
(native ZeroMQ) and RocketMQ 5's Python client (gRPC, through the proxy) each produce to one topic,
and a consumer group of each reads it side by side: a C++ push group, a native pull group and a
gRPC pop group. Every group gets every message once, with the same id, body, tag, keys and user
properties, whichever client sent it."""

from __future__ import annotations

import pytest

from rocketbox.cluster import Message, Producer, PullConsumer
from rocketbox.cluster.testing import read_topic
from tests.conftest import client_config
from tests.grpc.grpc_client import GrpcClient, received, run_grpc
from tests.remoting.cpp_client import CppClient, require_cpp_client, run_cpp, sent_ok

TOPIC = "MixedDoors"
EACH = 20


def _expected(source: str, i: int) -> dict:
    return {"body": f"{source}-{i}", "tag": source, "keys": [f"k-{source}-{i}"], "color": ("red", "blue")[i % 2]}


@pytest.mark.timeout(300)
def test_cpp_native_and_grpc_clients_exchange_messages_on_one_topic(grpc_cluster, admin, tmp_path):
    require_cpp_client()
    admin.create_topic(TOPIC, 4)
    # The gRPC pop group starts first: a new pop group starts at the queue's start only while the
    # queue still holds its first message (RocketMQ's rule), which holds here.
    grpc_consumer = GrpcClient("simple", {"endpoint": grpc_cluster.proxy_endpoint, "group": "MixedGrpcCG",
                                          "topic": TOPIC, "expect": 3 * EACH, "max_s": 120, "invisible_s": 30,
                                          "batch": 16, "await_s": 2}, tmp_path / "grpc-consumer")
    cpp_consumer = CppClient("consume", {"namesrv": grpc_cluster.remoting_namesrv, "group": "MixedCppCG",
                                         "topic": TOPIC, "expect": 3 * EACH, "timeout_s": 120, "quiet_s": 3},
                             tmp_path / "cpp-consumer")
    sent: dict[str, dict] = {}   # message id -> what was sent

    cpp_messages = [{"topic": TOPIC, "tags": "cpp", "keys": f"k-cpp-{i}", "body": f"cpp-{i}",
                     "properties": {"color": _expected("cpp", i)["color"]}} for i in range(EACH)]
    results = run_cpp("produce", {"namesrv": grpc_cluster.remoting_namesrv, "messages": cpp_messages},
                      tmp_path / "cpp-producer")
    for r in sent_ok(results):
        sent[r["msg_id"]] = _expected("cpp", r["i"])
    with Producer("MixedNativePG", config=client_config(grpc_cluster)) as producer:
        for i in range(EACH):
            expected = _expected("native", i)
            message = Message(TOPIC, expected["body"].encode(), tags="native", keys=expected["keys"][0],
                              properties={"color": expected["color"]})
            sent[producer.send(message).msg_id] = expected
    grpc_messages = [{"body": f"grpc-{i}", "tag": "grpc", "keys": f"k-grpc-{i}",
                      "properties": {"color": _expected("grpc", i)["color"]}} for i in range(EACH)]
    lines = run_grpc("produce", {"endpoint": grpc_cluster.proxy_endpoint, "topic": TOPIC,
                                 "messages": grpc_messages}, tmp_path / "grpc-producer")
    for line in lines:
        if line.get("sent"):
            sent[line["message_id"]] = _expected("grpc", int(line["sent"].split("-")[1]))
    assert len(sent) == 3 * EACH, f"{3 * EACH - len(sent)} sends failed"

    grpc_got = {r["message_id"]: r for r in received(grpc_consumer.finish(180))}
    cpp_got = {line["id"]: line for line in cpp_consumer.finish(180) if "id" in line}
    with PullConsumer("MixedNativeCG", config=client_config(grpc_cluster)) as consumer:
        native_got = {m.msg_id: m for m in read_topic(consumer, TOPIC)}

    assert sorted(grpc_got) == sorted(sent), "the gRPC pop group got a different set"
    assert sorted(cpp_got) == sorted(sent), "the C++ push group got a different set"
    assert sorted(native_got) == sorted(sent), "the native pull group got a different set"
    for message_id, expected in sent.items():
        g, c, n = grpc_got[message_id], cpp_got[message_id], native_got[message_id]
        assert g["body"] == c["body"] == n.body.decode() == expected["body"]
        assert g["tag"] == c["tags"] == n.tags == expected["tag"]
        assert g["keys"] == n.keys == expected["keys"] and c["keys"] == expected["keys"][0]
        assert g["properties"].get("color") == n.properties.get("color") == expected["color"], (g, n.properties)
        assert g["topic"] == c["topic"] == n.topic == TOPIC
        assert g["attempt"] == 1
