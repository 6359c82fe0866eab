"""The native door's SendMessage calls of one read handled as one batch (``grpc_batch_calls``,
``proxy/producer_batch.py``): one broker request a queue for the read, each call still answered on
its own (its message id, its offset, its own refusal), a message group's messages in their order;
with the setting off, one broker request a message (so the count below is what batching changed).
Raw HTTP/2 puts the calls in one read; RocketMQ 5's Python client sends with many in flight."""

from __future__ import annotations

import asyncio
import struct

import pytest

from rocketbox.cluster.testing import LocalCluster, broker_runtime_info
from tests.grpc.grpc_client import received, require_grpc_client, run_grpc, sent
from tests.grpc.test_grpc_native_front import (CLIENT_ID, DATA, END_STREAM, HEADERS, PREFACE, SETTINGS, END_HEADERS,
                                               exchange, frame, request_block)

TOPIC = "NativeBatch"


@pytest.fixture(scope="module", params=[True, False], ids=["batched", "one-by-one"])
def cluster(request, tmp_path_factory):
    require_grpc_client()
    overrides = {"grpc_front": "native", "grpc_batch_calls": request.param}
    with LocalCluster(str(tmp_path_factory.mktemp("native-batch")), proxy=True, proxy_overrides=overrides) as started:
        from rocketbox.cluster.client.admin import Admin
        with Admin(started.namesrv) as admin:
            admin.create_topic(TOPIC, 2)
            admin.create_topic(TOPIC + "Client", 2)
        started.batched = request.param
        yield started


def broker_requests(cluster) -> int:
    cfg = next(cfg for cfg in cluster.topology.brokers if cfg.broker_name == "broker-a")
    return broker_runtime_info(cfg.address, timeout_ms=5000)["doors"]["native"]["requestsServed"]


def send_request(message_id: str, body: bytes, group: str = ""):
    from rocketbox.cluster.proxy.protos import pb, service
    system = pb.SystemProperties(message_id=message_id, message_type=pb.FIFO if group else pb.NORMAL,
                                 body_encoding=pb.IDENTITY)
    if group:
        system.message_group = group
    message = pb.Message(topic=pb.Resource(name=TOPIC), body=body, system_properties=system)
    return service.SendMessageRequest(messages=[message]).SerializeToString()


def one_read(requests: list[bytes]) -> bytes:
    return one_read_of("SendMessage", requests)


def one_read_of(rpc: str, requests: list[bytes]) -> bytes:
    """HTTP/2's preface and every call's HEADERS and DATA, sent by one ``sendall``."""
    out = PREFACE + frame(SETTINGS, 0, 0)
    for k, payload in enumerate(requests):
        stream = 1 + 2 * k
        out += frame(HEADERS, END_HEADERS, stream, request_block(rpc))
        out += frame(DATA, END_STREAM, stream, b"\x00" + struct.pack(">I", len(payload)) + payload)
    return out


def answers(frames, response_type=None) -> dict[int, object]:
    from rocketbox.cluster.proxy.protos import service
    response_type = response_type or service.SendMessageResponse
    return {stream: response_type.FromString(payload[5:]) for kind, _, stream, payload in frames if kind == DATA}


async def _receive(cluster, group: str, count: int) -> list:
    """Up to ``count`` (message id, receipt handle) popped through ReceiveMessage (grpcio's C-core client)."""
    import grpc
    from rocketbox.cluster.proxy.protos import pb, service
    from google.protobuf.duration_pb2 import Duration
    request = service.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=count,
        invisible_duration=Duration(seconds=60), long_polling_timeout=Duration(seconds=1))
    got = []
    async with grpc.aio.insecure_channel(cluster.proxy_endpoint) as channel:
        receive = channel.unary_stream("/apache.rocketmq.v2.MessagingService/ReceiveMessage")
        for _ in range(10):
            async for raw in receive(request.SerializeToString(), metadata=(("x-mq-client-id", CLIENT_ID),),
                                     timeout=10):
                answer = service.ReceiveMessageResponse.FromString(raw)
                if answer.HasField("message"):
                    system = answer.message.system_properties
                    got.append((system.message_id, system.receipt_handle))
            if len(got) >= count:
                break
    return got


@pytest.mark.timeout(60)
def test_a_reads_sends_are_one_broker_request_each_answered_on_its_own(cluster):
    from rocketbox.cluster.proxy.protos import Code
    exchange(cluster, one_read([send_request("warm-up-0", b"warm")]), timeout_s=3)   # route and config cached
    plan = [("n0", b"a", ""), ("g1-0", b"b", "g1"), ("n1", b"c", ""), ("empty", b"", ""), ("g1-1", b"d", "g1"),
            ("n2", b"e", ""), ("g2-0", b"f", "g2"), ("g1-2", b"g", "g1"), ("n3", b"h", ""), ("g2-1", b"i", "g2")]
    before = broker_requests(cluster)
    frames, _ = exchange(cluster, one_read([send_request(*step) for step in plan]), timeout_s=3)
    served = broker_requests(cluster) - before - 1   # the second runtime-info request counts itself
    got = answers(frames)
    assert len(got) == len(plan), frames
    by_id = {}
    for k, (message_id, body, group) in enumerate(plan):
        response = got[1 + 2 * k]
        if not body:   # refused by itself; the others are stored
            assert response.status.code == Code.MESSAGE_BODY_EMPTY and not response.entries
            continue
        assert response.status.code == Code.OK, response
        (entry,) = response.entries
        assert entry.message_id == message_id and entry.status.code == Code.OK
        by_id[message_id] = entry.offset
    for group in ("g1", "g2"):   # a message group's messages in their order, one queue
        offsets = [by_id[m] for m, _, g in plan if g == group]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), offsets
    plain = [by_id[m] for m, body, g in plan if body and not g]
    if cluster.batched:
        # The plain messages went to one queue (a group's may share it) in their order: offsets rising;
        # at most one request for each of the two queues (and a heartbeat that may fall in).
        assert plain == sorted(plain) and len(set(plain)) == len(plain), plain
        assert served <= 3, served
    else:
        assert served >= len(by_id), served


@pytest.mark.timeout(60)
def test_a_reads_acks_are_one_broker_request_each_answered_on_its_own(cluster):
    from rocketbox.cluster.proxy.protos import Code, pb, service
    group = "AckBatch" + ("On" if cluster.batched else "Off")
    exchange(cluster, one_read([send_request(f"ack-{i}", b"ack me") for i in range(8)]), timeout_s=3)
    popped = asyncio.run(_receive(cluster, group, 8))
    assert len(popped) >= 6, popped
    forged = ("forged", "v1 nope")
    asked = popped[:2] + [forged] + popped[2:]

    def ack(message_id, handle):
        return service.AckMessageRequest(group=pb.Resource(name=group), topic=pb.Resource(name=TOPIC), entries=[
            service.AckMessageEntry(message_id=message_id, receipt_handle=handle)]).SerializeToString()
    exchange(cluster, one_read_of("AckMessage", [ack(*popped[0])]), timeout_s=3)   # acked already: NO_MESSAGE
    before = broker_requests(cluster)
    frames, _ = exchange(cluster, one_read_of("AckMessage", [ack(*one) for one in asked]), timeout_s=3)
    served = broker_requests(cluster) - before - 1
    got = answers(frames, service.AckMessageResponse)
    assert len(got) == len(asked), frames
    codes = [got[1 + 2 * k].status.code for k in range(len(asked))]
    # Acked before (the broker's NO_MESSAGE) and forged (the proxy's own check): each refused alone.
    assert codes[0] == codes[2] == Code.INVALID_RECEIPT_HANDLE, codes
    assert codes[1] == Code.OK and all(code == Code.OK for code in codes[3:]), codes
    for k, (message_id, handle) in enumerate(asked):
        (entry,) = got[1 + 2 * k].entries
        assert entry.message_id == message_id and entry.receipt_handle == handle
    if cluster.batched:
        assert served <= 2, served
    else:
        assert served >= len(asked) - 2, served


@pytest.mark.timeout(180)
def test_the_5x_client_with_sends_in_flight_gets_every_receipt_and_message(cluster, tmp_path):
    messages = [{"body": f"batch-{i}", "tag": "T", "keys": [f"k{i}"]} for i in range(40)]
    messages += [{"body": f"fifo-{i}", "group": "G"} for i in range(10)]
    lines = run_grpc("produce", {"endpoint": cluster.proxy_endpoint, "topic": TOPIC + "Client", "messages": messages,
                                 "in_flight": True}, tmp_path / "p")
    receipts = sent(lines)
    assert len(receipts) == 50 and len({r["message_id"] for r in receipts}) == 50, lines
    fifo = [r["offset"] for r in receipts if r["sent"].startswith("fifo-")]
    assert fifo == sorted(fifo), fifo
    lines = run_grpc("simple", {"endpoint": cluster.proxy_endpoint, "group": "BatchReader", "topic": TOPIC + "Client",
                                "expect": 50, "max_s": 60}, tmp_path / "c")
    got = {r["message_id"]: r for r in received(lines)}
    assert set(got) == {r["message_id"] for r in receipts}
    assert sorted(r["body"] for r in got.values()) == sorted(m["body"] for m in messages)
    assert all(r["tag"] == "T" and r["keys"] == [r["body"].replace("batch-", "k")]
               for r in got.values() if r["body"].startswith("batch-"))


@pytest.mark.timeout(60)
def test_a_receives_messages_are_written_as_one_run_of_data_frames(cluster):
    """Batched, a receive's stream (status, messages, delivery timestamp) goes out framed by one call: one
    DATA frame for them all while they fit one; one by one, a DATA frame a response."""
    from google.protobuf.duration_pb2 import Duration
    from rocketbox.cluster.proxy.protos import Code, pb, service
    group = "RunReader" + ("On" if cluster.batched else "Off")
    bodies = {f"run-{i}".encode() for i in range(6)}
    exchange(cluster, one_read([send_request(body.decode(), body) for body in sorted(bodies)]), timeout_s=3)
    request = service.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=32,
        invisible_duration=Duration(seconds=60), long_polling_timeout=Duration(seconds=1)).SerializeToString()
    frames, _ = exchange(cluster, one_read_of("ReceiveMessage", [request]), timeout_s=3)
    data = [payload for kind, _, stream, payload in frames if kind == DATA and stream == 1]
    stream, responses = b"".join(data), []
    while stream:
        length = struct.unpack(">I", stream[1:5])[0]
        responses.append(service.ReceiveMessageResponse.FromString(stream[5:5 + length]))
        stream = stream[5 + length:]
    assert responses[0].status.code == Code.OK and responses[-1].HasField("delivery_timestamp"), responses
    got = [r.message for r in responses[1:-1]]
    assert got and all(m.system_properties.receipt_handle and m.topic.name == TOPIC for m in got), responses
    assert {m.body for m in got} <= bodies | {b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"i", b"warm", b"ack me"}
    assert len(data) == (1 if cluster.batched else len(responses)), (len(data), len(responses))
