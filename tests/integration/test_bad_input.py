"""Bad input gets an error answer with a readable reason, and the process keeps serving."""

from __future__ import annotations

import zmq

from rocketbox.cluster import Admin, Message, MessageInvalid, Producer, PullConsumer
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.message import batch_format
from rocketbox.cluster.wire_format import Command, decode_header, to_frames
from rocketbox.cluster.zmq_transport import RpcClient
from tests.conftest import client_config


def _raw_exchange(endpoint: str, frames: list[bytes]) -> list[bytes]:
    context = zmq.Context.instance()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    try:
        sock.send_multipart(frames)
        assert sock.poll(5000), "no answer to a malformed frame"
        return sock.recv_multipart()
    finally:
        sock.close()


def test_broker_and_namesrv_survive_malformed_frames_and_bad_requests(start_cluster):
    cluster = start_cluster(broker_overrides={"auto_create_topic_enabled": False})
    cfg = client_config(cluster)
    broker = f"tcp://{cluster.topology.brokers[0].address}"
    namesrv = cluster.topology.namesrv_endpoints[0]
    for endpoint in (broker, namesrv):
        for frames in ([b"\x00"], [b"garbage" * 3, b"body"], [b"a", b"b", b"c"],
                       [b"\x00\x0a\x03\x01\x91\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"]):
            answer = decode_header(_raw_exchange(endpoint, frames)[0])
            assert answer.code == ResponseCode.SYSTEM_ERROR and "malformed" in answer.remark
        unknown = decode_header(_raw_exchange(endpoint, to_frames(Command(9999, {"x": "y"})))[0])
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999" in unknown.remark
    rpc = RpcClient()
    try:
        missing = rpc.call(broker, Command(RequestCode.PULL_MESSAGE, {"topic": "X"}))
        assert missing.code != ResponseCode.SUCCESS and "missing" in missing.remark
        not_int = rpc.call(broker, Command(RequestCode.GET_MAX_OFFSET, {"topic": "X", "queueId": "zero"}))
        assert not_int.code != ResponseCode.SUCCESS
    finally:
        rpc.close()
    with Admin(config=cfg) as admin:
        admin.create_topic("Good", 1)
    with Producer("PG", config=cfg) as producer:
        try:
            producer.send(Message("Good", b"x" * (4 * 1024 * 1024 + 1)))
            raise AssertionError("an oversized message was accepted by the client")
        except MessageInvalid:
            pass
        # Bypass the client's own checks: the broker must refuse these itself.
        for fields, body, expected in [
            ({"b": "Good", "e": "0"}, b"x" * (4 * 1024 * 1024 + 1), ResponseCode.MESSAGE_ILLEGAL),
            ({"b": "bad topic!", "e": "0"}, b"x", ResponseCode.MESSAGE_ILLEGAL),
            ({"b": "t" * 128, "e": "0"}, b"x", ResponseCode.MESSAGE_ILLEGAL),
            ({"b": "NoSuchTopic", "e": "0"}, b"x", ResponseCode.TOPIC_NOT_EXIST),
            ({"b": "Good", "e": "7"}, b"x", ResponseCode.MESSAGE_ILLEGAL),
        ]:
            answer = producer.rpc.call(broker, Command(RequestCode.SEND_MESSAGE_V2, {"a": "PG", **fields}, body))
            assert answer.code == expected, (fields, answer)
            assert answer.remark
        for fields, body in [
            ({"b": "Good", "e": "0", "f": "-1"}, b"x"),            # every sysFlag bit
            ({"b": "Good", "e": "0", "f": "4"}, b"x"),             # a half message without PGROUP / UNIQ_KEY
            ({"b": "Good", "e": "0", "g": str(1 << 70)}, b"x"),    # bornTimestamp past int64
            ({"b": "Good", "e": "0", "i": "KEYS\x01k\x02x\x01\x00"}, b"x"),  # NUL in properties
        ]:
            answer = producer.rpc.call(broker, Command(RequestCode.SEND_MESSAGE_V2, {"a": "PG", **fields}, body))
            assert answer.code == ResponseCode.MESSAGE_ILLEGAL, (fields, answer)
        prepared_batch = producer.rpc.call(broker, Command(
            RequestCode.SEND_BATCH_MESSAGE, {"a": "PG", "b": "Good", "e": "0", "f": "4"},
            batch_format.encode_items([(0, b"x", b"UNIQ_KEY\x01A\x02")])))
        assert prepared_batch.code == ResponseCode.MESSAGE_ILLEGAL and "transactional" in prepared_batch.remark
        batch = producer.rpc.call(broker, Command(RequestCode.SEND_BATCH_MESSAGE, {"a": "PG", "b": "Good", "e": "0"},
                                                  b"\x00\x00\x00\x05junk"))
        assert batch.code == ResponseCode.MESSAGE_ILLEGAL and "batch" in batch.remark
        assert producer.send(Message("Good", b"still serving")).status.name == "SEND_OK"
    with PullConsumer("CG", config=cfg) as consumer:
        mq = consumer.queues("Good")[0]
        try:
            consumer.commit_offset(mq, 10_000)
            raise AssertionError("an offset past the end was accepted")
        except BrokerError as exc:
            assert "outside" in str(exc)
        bad_commit = consumer.rpc.call(broker, Command(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "CG", "topic": "Good", "queueId": "0", "queueOffset": "0", "sysFlag": "5",
            "subscription": "*", "commitOffset": "soon"}))   # commit + its own subscription (else the heartbeat's)
        assert bad_commit.code != ResponseCode.SUCCESS
        assert bad_commit.remark.startswith("the header field 'commitOffset' is not an integer"), bad_commit.remark
        bad_group = consumer.rpc.call(broker, Command(RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": "bad group!", "topic": "Good", "queueId": "0", "commitOffset": "0"}))
        assert bad_group.code != ResponseCode.SUCCESS and "group" in bad_group.remark
    with Admin(config=cfg) as admin:
        assert "Good" in admin.topic_list()
        bad_perm = admin.rpc.call(broker, Command(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "P", "perm": str(1 << 40)}))
        assert bad_perm.code != ResponseCode.SUCCESS and "perm" in bad_perm.remark
    namesrv_rpc = RpcClient()
    try:
        for fields, body in [({"brokerName": "b", "brokerId": "0", "brokerAddr": "not a host", "clusterName": "C"}, b"{}"),
                             ({"brokerName": "b", "brokerId": "0", "brokerAddr": "h:1", "clusterName": "C"}, b"[1]"),
                             ({"brokerName": "b", "brokerId": "0", "brokerAddr": "h:1", "clusterName": "C"},
                              b'{"topicConfigTable": {"T": {"readQueueNums": "x"}}}')]:
            answer = namesrv_rpc.call(namesrv, Command(RequestCode.REGISTER_BROKER, fields, body))
            assert answer.code != ResponseCode.SUCCESS and answer.remark, (fields, body)
        assert "h:1" not in namesrv_rpc.call(namesrv, Command(RequestCode.GET_BROKER_CLUSTER_INFO)).body.decode()
        bad_heartbeat = namesrv_rpc.call(broker, Command(RequestCode.HEART_BEAT, {}, b'{"consumerDataSet": [1]}'))
        assert bad_heartbeat.code != ResponseCode.SUCCESS and "malformed" in bad_heartbeat.remark
    finally:
        namesrv_rpc.close()
    assert cluster.child("broker-a")["restarts"] == 0
    assert cluster.child("namesrv-0")["restarts"] == 0


def test_a_frame_over_the_limit_is_dropped_before_it_is_buffered(start_cluster):
    cluster = start_cluster()
    broker = f"tcp://{cluster.topology.brokers[0].address}"
    context = zmq.Context.instance()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(broker)
    try:
        # 4 MiB message limit + 1 MiB header limit: a 6 MiB frame cannot be legitimate.
        sock.send_multipart(to_frames(Command(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "Big", "e": "0"},
                                              b"x" * (6 * 1024 * 1024))))
        assert not sock.poll(1000), "an oversized frame was answered instead of dropped"
    finally:
        sock.close()
    rpc = RpcClient()
    try:
        assert rpc.call(broker, Command(RequestCode.GET_BROKER_RUNTIME_INFO)).code == ResponseCode.SUCCESS
    finally:
        rpc.close()
    assert cluster.child("broker-a")["restarts"] == 0
