"""Golden tests of ``cluster/proxy/received_wire.py`` and its C writer (``_native/grpc_message.c``): a
popped record's ReceiveMessageResponse{message} bytes are the protobuf library's serialization of what
``messages.incoming`` builds for the same record; byte for byte, or (a map of several user properties,
whose order protobuf leaves open) the same message parsed back."""

from __future__ import annotations

import random
import socket
import struct

import pytest

from rocketbox.cluster._native import ffi, lib
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import SYSTEM_PROPERTIES, decode_properties
from rocketbox.cluster.proxy import messages, received_wire
from rocketbox.cluster.proxy.protos import service

HOST = socket.inet_aton("127.0.0.1") + struct.pack(">I", 10911)
HANDLE = "v1 1234 1764342915000 60000 0 2 7 123456 broker-a"


def record_of(properties: bytes, body: bytes = b"x" * 100, *, topic: bytes = b"TopicA", queue_id: int = 2,
              queue_offset: int = 7, phys_offset: int = 12_345, sys_flag: int = 0, born_ms: int = 1_764_342_915_123,
              store_ms: int = 1_764_342_915_200, born_host: bytes = HOST, store_host: bytes = HOST,
              reconsume_times: int = 0) -> fmt.Record:
    """A stored record, encoded and decoded as the pop answer's records are."""
    raw = fmt.encode(queue_id=queue_id, flag=0, queue_offset=queue_offset, phys_offset=phys_offset, sys_flag=sys_flag,
                     born_timestamp_ms=born_ms, born_host=born_host, store_timestamp_ms=store_ms,
                     store_host=store_host, reconsume_times=reconsume_times, prepared_transaction_offset=0,
                     body=body, topic=topic, properties=properties)
    return next(fmt.iter_records(raw))


def pairs(*items: tuple[str, str]) -> bytes:
    return b"".join(f"{name}\x01{value}\x02".encode() for name, value in items)


def library(record, handle, attempt, topic) -> bytes:
    """What the proxy wrote before: messages.incoming's Message, serialized by the library."""
    return service.ReceiveMessageResponse(message=messages.incoming(
        record, receipt_handle=handle, delivery_attempt=attempt, topic=topic)).SerializeToString()


def c_writer(record, handle: str, attempt: int, topic: str) -> int | bytes:
    """The C writer's own answer: its bytes, or its (negative) code."""
    out = ffi.new("uint8_t[]", 1 << 22)
    t, h = (topic or record.topic).encode(), (handle or "").encode()
    n = lib.rb_grpc_received(out, 1 << 22, received_wire.NAMES, len(received_wire.NAMES), t, len(t), record.body,
                             len(record.body), record.properties_raw, len(record.properties_raw), h, len(h),
                             record.born_host, record.store_host, record.born_timestamp_ms, record.store_timestamp_ms,
                             record.phys_offset, record.queue_id, record.queue_offset, attempt)
    return ffi.buffer(out, n)[:] if n >= 0 else n


def assert_same(record, handle=HANDLE, attempt=1, topic=None, *, covered=True):
    ours, theirs = received_wire.received(record, handle, attempt, topic), library(record, handle, attempt, topic)
    user = [name for name in decode_properties(record.properties_raw) if name not in SYSTEM_PROPERTIES]
    if len(user) <= 1:
        assert ours == theirs
    else:
        assert service.ReceiveMessageResponse.FromString(ours) == service.ReceiveMessageResponse.FromString(theirs)
    if covered:   # written by C, not by the fallback
        resolved = attempt or min(record.reconsume_times + 1, received_wire.INT32_MAX)   # as incoming resolves it
        assert c_writer(record, handle, resolved, topic) == ours
    return ours


def test_golden_bytes_of_a_node_clients_message():
    record = record_of(pairs(("UNIQ_KEY", "7F0000010B6D1B2C3D4E5F6071829300"), ("__BORNHOST", "127.0.0.1"),
                             ("BORN_TIMESTAMP", "1764342915123")), b"hello")
    ours = assert_same(record, topic="TopicA")
    assert ours == bytes.fromhex(
        "12d001"                                            # ReceiveMessageResponse.message (2), 208 bytes
        "0a08" "1206546f70696341"                           # topic (1): Resource.name (2) "TopicA"
        "1abc01"                                            # system_properties (3), 188 bytes:
        "1a20" + b"7F0000010B6D1B2C3D4E5F6071829300".hex()  # message_id (3)
        + "2224" "0802" "1220" + b"5D41402ABC4B2A76B9719D911017C592".hex()  # body_digest (4): MD5 (2), md5("hello")
        + "2801" "3001"                                     # body_encoding IDENTITY, message_type NORMAL
        "3a0b" "0883f9a6c906" "10c0a9d33a"                  # born_timestamp (7): 1764342915 s, 123,000,000 ns
        "4209" + b"127.0.0.1".hex()                         # born_host (8): __BORNHOST
        + "4a0b" "0883f9a6c906" "108084af5f"                # store_timestamp (9): 1764342915 s, 200,000,000 ns
        "520f" + b"127.0.0.1:10911".hex()                   # store_host (10): the record's
        + "6231" + HANDLE.encode().hex()                    # receipt_handle (12)
        + "6802" "7007" "800101"                            # queue_id 2, queue_offset 7, delivery_attempt 1
        "2205" + b"hello".hex())                            # body (4)


@pytest.mark.parametrize("size", [0, 1, 55, 56, 63, 64, 65, 119, 120, 127, 128, 1000, 70_000, 2_100_000])
def test_every_body_size_and_its_digest(size):
    assert_same(record_of(pairs(("UNIQ_KEY", "ID")), random.Random(size).randbytes(size)))


def test_the_fields_each_property_sets():
    for props in ([("TAGS", "TagA")], [("TAGS", "")], [("KEYS", "k1 k2  k3 ")], [("KEYS", "")],
                  [("UNIQ_KEY", "")], [], [("TRAN_MSG", "true")], [("TRAN_MSG", "false")],
                  [("__SHARDINGKEY", "g1")], [("__SHARDINGKEY", "")], [("TRACE_CONTEXT", "00-ab-01")],
                  [("BORN_TIMESTAMP", "-1500")], [("BORN_TIMESTAMP", "0")], [("__BORNHOST", "")],
                  [("__BORNHOST", "10.0.0.9:1")], [("user", "")], [("", "v")], [("é ✓", "ünï")],
                  [("a", "1"), ("b", "2"), ("c", "3"), ("TAGS", "t"), ("WAIT", "true"), ("__CRC32#", "1")]):
        assert_same(record_of(pairs(*props)))
    assert_same(record_of(b"noseparator"))                      # a pair without \x01: name, empty value
    assert_same(record_of(b"\x02\x02a\x01b\x02\x02"))            # empty pairs skipped
    assert_same(record_of(b"a\x01b\x01c\x02"))                   # the value keeps a second \x01


def test_numbers_at_their_edges():
    for born_ms, store_ms in ((0, 0), (-1, -1001), (999, 1000), (2 ** 62, 1), (-(2 ** 62), 5)):
        assert_same(record_of(pairs(("UNIQ_KEY", "I")), born_ms=born_ms, store_ms=store_ms))
    for queue_id, queue_offset in ((0, 0), (-1, -1), (2 ** 31 - 1, 2 ** 63 - 1), (-(2 ** 31), -(2 ** 63))):
        assert_same(record_of(pairs(("UNIQ_KEY", "I")), queue_id=queue_id, queue_offset=queue_offset))
    for attempt in (0, 1, 2 ** 31 - 1, -5):
        assert_same(record_of(pairs(("UNIQ_KEY", "I")), reconsume_times=3), attempt=attempt)
    assert_same(record_of(pairs(("UNIQ_KEY", "I")), reconsume_times=2 ** 31 - 1), attempt=None)
    for host in (b"\x00" * 8, b"\xff" * 8, bytes(range(8))):
        assert_same(record_of(b"", born_host=host, store_host=host, phys_offset=2 ** 63 - 1))   # offset message id
    assert_same(record_of(b""), handle="")
    assert_same(record_of(b""), handle=None)
    assert_same(record_of(b"", topic=b""), topic="")
    assert_same(record_of(b"", topic=b"%RETRY%G_T"), topic="T")


def test_records_it_leaves_to_python_still_read_the_same():
    for props in (pairs(("DELAY", "3")), pairs(("TIMER_DELIVER_MS", "1764342915000")), pairs(("TIMER_DELAY_SEC", "5")),
                  pairs(("TIMER_DELAY_MS", "5")), pairs(("INNER_MULTI_DISPATCH", "%LMQ%$T$lite")),
                  pairs(("_SYS_MSG_PRIORITY_", "3")), pairs(("DLQ_ORIGIN_TOPIC", "T"), ("DLQ_ORIGIN_MESSAGE_ID", "M")),
                  pairs(("a", "1"), ("a", "2")), pairs(("TAGS", "x"), ("TAGS", "y")), b"a\x01\xff\xfe\x02",
                  b"a\x01\xed\xa0\x80\x02", b"a\x01\xc0\x80\x02", pairs(("BORN_TIMESTAMP", " 12")),
                  pairs(("BORN_TIMESTAMP", "1_000")), pairs(("BORN_TIMESTAMP", "x")), pairs(("BORN_TIMESTAMP", "")),
                  pairs(("BORN_TIMESTAMP", "1" * 19)), b"".join(pairs((f"p{i}", "v")) for i in range(65))):
        record = record_of(props)
        assert c_writer(record, HANDLE, 1, None) == lib.RB_E_GRPC_UNCOVERED
        assert_same(record, covered=False)
    compressed = record_of(pairs(("UNIQ_KEY", "I")), b"x\x9c\xcbH\xcd\xc9\xc9\x07\x00\x06,\x02\x15", sys_flag=1)
    assert received_wire.received(compressed, HANDLE, 1, None) == library(compressed, HANDLE, 1, None)


def test_an_output_too_small_is_refused_without_writing_past_it():
    record = record_of(pairs(("UNIQ_KEY", "I"), ("u", "v")), b"b" * 300)
    whole = c_writer(record, HANDLE, 1, None)
    for size in (0, 3, 10, 50, len(whole) - 1):
        out = ffi.new("uint8_t[]", size + 64)
        ffi.memmove(out + size, b"\xaa" * 64, 64)
        t, h, body, props = b"TopicA", HANDLE.encode(), record.body, record.properties_raw
        n = lib.rb_grpc_received(out, size, received_wire.NAMES, len(received_wire.NAMES), t, len(t), body, len(body),
                                 props, len(props), h, len(h), record.born_host, record.store_host,
                                 record.born_timestamp_ms, record.store_timestamp_ms, record.phys_offset,
                                 record.queue_id, record.queue_offset, 1)
        assert n == lib.RB_E_DEST_TOO_SMALL
        assert ffi.buffer(out + size, 64)[:] == b"\xaa" * 64


def test_random_records_match_the_library():
    rng = random.Random(33)
    names = ["TAGS", "KEYS", "UNIQ_KEY", "TRAN_MSG", "__SHARDINGKEY", "BORN_TIMESTAMP", "__BORNHOST", "TRACE_CONTEXT",
             "WAIT", "REAL_TOPIC", "MIN_OFFSET", "user", "ü", "k", "", "DELAY", "_SYS_MSG_PRIORITY_"]
    values = ["", "true", "v", "a b", " ", "12", "-7", "1764342915123", "é✓", "x" * 300, "\x01"]
    text = "ab \x01\x02é"
    covered = 0
    for _ in range(3000):
        if rng.random() < 0.2:   # arbitrary text over the separators
            props = "".join(rng.choice(text) for _ in range(rng.randint(0, 20))).encode()
        else:
            props = pairs(*[(rng.choice(names), rng.choice(values)) for _ in range(rng.randint(0, 6))])
        record = record_of(props, rng.randbytes(rng.choice([0, 1, 64, 100, 200])), queue_id=rng.randint(-2, 8),
                           queue_offset=rng.randint(0, 2 ** 40), born_host=rng.randbytes(8),
                           store_host=rng.randbytes(8), born_ms=rng.randint(-(2 ** 41), 2 ** 41),
                           store_ms=rng.randint(0, 2 ** 41), reconsume_times=rng.randint(0, 20))
        c = c_writer(record, HANDLE, rng.randint(0, 9), None)
        covered += c != lib.RB_E_GRPC_UNCOVERED
        assert_same(record, rng.choice([HANDLE, ""]), rng.randint(0, 9), rng.choice([None, "Shown"]), covered=False)
    assert covered > 1000   # the C writer, not only the fallback, was compared


def test_a_run_of_records():
    popped = [type("Popped", (), {"record": record_of(pairs(("UNIQ_KEY", str(i))), b"y" * (i * 900)), "handle": HANDLE,
                                  "attempt": i + 1, "topic": "TopicA"})() for i in range(6)]
    assert received_wire.run(popped) == [library(p.record, p.handle, p.attempt, p.topic) for p in popped]
