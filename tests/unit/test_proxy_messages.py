"""The proxy's pure parts: a gRPC message made into what the broker stores and a stored record made
into a gRPC message (rocketmq-protocol.md §7.4), transaction ids, route queue numbering, the checks
on names, tags and properties."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from rocketbox.cluster.proxy import messages, validation
from rocketbox.cluster.proxy.protos import Code, pb
from rocketbox.cluster.proxy.routes import queue_permissions
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import ProxyError, code_of_broker
from rocketbox.cluster.proxy.transactions import parse_transaction_id, transaction_id
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message.properties import decode_properties, encode_properties
from rocketbox.cluster.message.sysflags import SYSFLAG_COMPRESSED, SYSFLAG_TRANSACTION_PREPARED

SETTINGS = ProxySettings(namesrv_endpoints=("tcp://127.0.0.1:1",), max_body_size=1024)
NOW_MS = 1_700_000_000_000


def grpc_message(body=b"hello", **system) -> pb.Message:
    fields = {"message_id": "01ABCDEF", "message_type": pb.NORMAL, "body_encoding": pb.IDENTITY, **system}
    return pb.Message(topic=pb.Resource(name="T"), body=body, system_properties=pb.SystemProperties(**fields))


def refusal(message) -> int:
    with pytest.raises(ProxyError) as caught:
        messages.outgoing(message, SETTINGS, NOW_MS)
    return caught.value.code


def test_a_grpc_message_becomes_rocketmq_properties():
    message = grpc_message(tag="TagA", keys=["k1", "k2"], message_group="g1", trace_context="tc")
    message.user_properties["color"] = "red"
    out = messages.outgoing(message, SETTINGS, NOW_MS, peer_host="10.0.0.1:5")
    assert out.properties["UNIQ_KEY"] == "01ABCDEF" and out.properties["TAGS"] == "TagA"
    assert out.properties["KEYS"] == "k1 k2" and out.properties["__SHARDINGKEY"] == "g1"
    assert out.properties["color"] == "red" and out.properties["__BORNHOST"] == "10.0.0.1:5"
    assert out.properties["TRACE_CONTEXT"] == "tc" and out.type_name == "FIFO" and out.sys_flag == 0


def test_a_trace_context_with_control_characters_is_not_stored():
    """Found by tests/fuzz: a trace context holding \x02 rewrote the stored properties text, so
    "x\x02DELAY\x013" made a NORMAL message a delayed one past the topic's type check."""
    out = messages.outgoing(grpc_message(trace_context="x\x02DELAY\x013"), SETTINGS, NOW_MS)
    assert "TRACE_CONTEXT" not in out.properties
    assert decode_properties(out.properties_text.encode()) == out.properties
    assert "DELAY" not in decode_properties(out.properties_text.encode()) and out.type_name == "NORMAL"


def test_delay_and_transaction_properties_and_gzip_bodies():
    delayed = grpc_message(message_type=pb.DELAY, delivery_timestamp=messages.timestamp(NOW_MS + 5000))
    out = messages.outgoing(delayed, SETTINGS, NOW_MS)
    assert out.properties["TIMER_DELIVER_MS"] == str(NOW_MS + 5000) and out.type_name == "DELAY"
    half = messages.outgoing(grpc_message(message_type=pb.TRANSACTION), SETTINGS, NOW_MS)
    assert half.properties["TRAN_MSG"] == "true" and half.sys_flag & SYSFLAG_TRANSACTION_PREPARED
    gzipped = zlib.compressobj(wbits=31)
    body = gzipped.compress(b"inflated") + gzipped.flush()
    assert messages.outgoing(grpc_message(body=body, body_encoding=pb.GZIP), SETTINGS, NOW_MS).body == b"inflated"


def test_refusals_carry_apaches_codes():
    assert refusal(grpc_message(body=b"x" * 1025)) == Code.MESSAGE_BODY_TOO_LARGE
    assert refusal(grpc_message(body=b"")) == Code.MESSAGE_BODY_EMPTY
    assert refusal(grpc_message(message_id=" ")) == Code.ILLEGAL_MESSAGE_ID
    assert refusal(grpc_message(tag="a|b")) == Code.ILLEGAL_MESSAGE_TAG
    assert refusal(grpc_message(keys=["bad\x01key"])) == Code.ILLEGAL_MESSAGE_KEY
    assert refusal(grpc_message(message_group="g" * 64)) == Code.ILLEGAL_MESSAGE_GROUP
    assert refusal(grpc_message(body=b"not gzip", body_encoding=pb.GZIP)) == Code.MESSAGE_CORRUPTED
    far = grpc_message(delivery_timestamp=messages.timestamp(NOW_MS + SETTINGS.max_delay_ms + 1000))
    assert refusal(far) == Code.ILLEGAL_DELIVERY_TIME
    for key in ("DELAY", "TRAN_MSG", "UNIQ_KEY"):
        message = grpc_message()
        message.user_properties[key] = "1"
        assert refusal(message) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    many = grpc_message()
    for i in range(SETTINGS.max_user_properties + 1):
        many.user_properties[f"p{i}"] = "v"
    assert refusal(many) == Code.MESSAGE_PROPERTIES_TOO_LARGE


def stored(properties: dict, body: bytes = b"stored body", topic: str = "T", sys_flag: int = 0) -> fmt.Record:
    raw = fmt.encode(queue_id=2, flag=0, queue_offset=7, phys_offset=1234, sys_flag=sys_flag,
                     born_timestamp_ms=NOW_MS, born_host=pack_host("10.0.0.2", 40000),
                     store_timestamp_ms=NOW_MS + 3, store_host=pack_host("127.0.0.1", 10911), reconsume_times=1,
                     prepared_transaction_offset=0, body=body, topic=topic.encode(),
                     properties=encode_properties(properties))
    return messages.records(raw)[0]


def test_a_stored_record_becomes_a_grpc_message():
    record = stored({"UNIQ_KEY": "ID1", "TAGS": "TagA", "KEYS": "k1 k2", "color": "red", "__SHARDINGKEY": "g"})
    message = messages.incoming(record, receipt_handle="h", delivery_attempt=3)
    system = message.system_properties
    assert (message.topic.name, message.body, dict(message.user_properties)) == ("T", b"stored body", {"color": "red"})
    assert (system.message_id, system.tag, list(system.keys)) == ("ID1", "TagA", ["k1", "k2"])
    assert system.body_digest.checksum == hashlib.md5(b"stored body").hexdigest().upper()
    assert (system.queue_id, system.queue_offset, system.delivery_attempt) == (2, 7, 3)
    assert system.message_type == pb.FIFO and system.message_group == "g" and system.receipt_handle == "h"
    assert system.born_host == "10.0.0.2:40000" and system.store_host == "127.0.0.1:10911"
    assert messages.millis(system.store_timestamp) == NOW_MS + 3
    # Without a pop's attempt count: reconsume times + 1; without UNIQ_KEY: the offset message id.
    bare = messages.incoming(stored({}))
    assert bare.system_properties.delivery_attempt == 2 and len(bare.system_properties.message_id) == 32


def test_the_whole_record_crc_property_is_no_grpc_user_property():
    """RocketMQ's proxy leaves system properties, __CRC32# among them, out of user_properties and
    refuses them from producers (GrpcConverter.buildUserAttributes, MessageConst.STRING_HASH_SET)."""
    raw = fmt.encode(queue_id=2, flag=0, queue_offset=7, phys_offset=1234, sys_flag=0, born_timestamp_ms=NOW_MS,
                     born_host=pack_host("10.0.0.2", 40000), store_timestamp_ms=NOW_MS + 3,
                     store_host=pack_host("127.0.0.1", 10911), reconsume_times=0, prepared_transaction_offset=0,
                     body=b"sealed", topic=b"T", record_crc=True,
                     properties=fmt.stored_properties(encode_properties({"UNIQ_KEY": "ID3", "color": "red"}), True))
    record = messages.records(raw)[0]
    assert "__CRC32#" in record.properties
    assert dict(messages.incoming(record).user_properties) == {"color": "red"}
    message = grpc_message()
    message.user_properties["__CRC32#"] = "0000000001"
    assert refusal(message) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY


def test_a_record_at_the_last_reconsume_time_is_still_a_message():
    """Found by tests/fuzz: RECONSUMETIMES 2**31 - 1 made delivery_attempt overflow int32 (ValueError)."""
    record = fmt.decode_at(fmt.encode(
        queue_id=0, flag=0, queue_offset=0, phys_offset=0, sys_flag=0, born_timestamp_ms=NOW_MS,
        born_host=pack_host("10.0.0.2", 1), store_timestamp_ms=NOW_MS, store_host=pack_host("10.0.0.1", 2),
        reconsume_times=(1 << 31) - 1, prepared_transaction_offset=0, body=b"b", topic=b"T", properties=b""), 0)
    assert messages.incoming(record).system_properties.delivery_attempt == (1 << 31) - 1


def test_a_remoting_producers_compressed_body_is_inflated_for_grpc_readers():
    record = stored({"UNIQ_KEY": "ID2"}, body=zlib.compress(b"x" * 5000), sys_flag=SYSFLAG_COMPRESSED)
    message = messages.incoming(record)
    assert message.body == b"x" * 5000 and message.system_properties.body_encoding == pb.IDENTITY


def test_transaction_ids_name_their_half_and_nothing_else_parses():
    assert parse_transaction_id(transaction_id("broker-a", 123, 4)) == ("broker-a", 123, 4)
    for text in ("", "  ", "broker-a:1", "broker a:1:2", "broker-a:-1:2", "broker-a:x:2", "a:1:2:3"):
        with pytest.raises(ProxyError) as caught:
            parse_transaction_id(text)
        assert caught.value.code == Code.INVALID_TRANSACTION_ID


def test_route_queues_are_numbered_as_apaches_proxy_numbers_them():
    rw = 4 | 2
    assert queue_permissions({"perm": rw, "readQueueNums": 4, "writeQueueNums": 4}) == [pb.READ_WRITE] * 4
    assert queue_permissions({"perm": rw, "readQueueNums": 4, "writeQueueNums": 2}) == \
        [pb.READ, pb.READ, pb.READ_WRITE, pb.READ_WRITE]
    assert queue_permissions({"perm": 2, "readQueueNums": 4, "writeQueueNums": 3}) == [pb.WRITE] * 3
    assert queue_permissions({"perm": 0, "readQueueNums": 0, "writeQueueNums": 0}) == [pb.NONE]


def test_names_and_broker_codes():
    for bad, code in (("bad topic", Code.ILLEGAL_TOPIC), ("RMQ_SYS_TRANS_HALF_TOPIC", Code.ILLEGAL_TOPIC),
                      ("rmq_sys_REVIVE_LOG_x", Code.ILLEGAL_TOPIC), ("TBW102", Code.ILLEGAL_TOPIC)):
        with pytest.raises(ProxyError) as caught:
            validation.topic(bad)
        assert caught.value.code == code
    with pytest.raises(ProxyError):
        validation.consumer_group("CID_RMQ_SYS_TRANS")
    assert validation.topic("%DLQ%group") == "%DLQ%group"   # dead letters are readable
    assert code_of_broker(17) == Code.TOPIC_NOT_FOUND and code_of_broker(208) == Code.INVALID_RECEIPT_HANDLE
    assert code_of_broker(23) == Code.ILLEGAL_FILTER_EXPRESSION and code_of_broker(999) == Code.INTERNAL_SERVER_ERROR
