"""The message record (cluster/message/record_format.py): round trips, every truncation point, every
single-bit flip, batches, the whole-record CRC property, records as delivered."""

import zlib

import pytest
from hypothesis import given, settings, strategies as st

from rocketbox.cluster import _native
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import offset_msg_id, pack_host
from rocketbox.cluster.message.properties import encode_properties
from rocketbox.cluster.message.sysflags import SYSFLAG_TRANSACTION_PREPARED
from rocketbox.cluster.shm.commitlog_format import looks_torn
from rocketbox.cluster.shm.store import MessageToStore

HOST = pack_host("10.0.0.1", 10911)
BORN = pack_host("192.168.1.2", 5555)

int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)
fields_strategy = st.fixed_dictionaries({
    "queue_id": int32, "flag": int32, "queue_offset": int64, "phys_offset": int64,
    "sys_flag": int32, "born_timestamp_ms": int64, "born_host": st.binary(min_size=8, max_size=8),
    "store_timestamp_ms": int64, "store_host": st.binary(min_size=8, max_size=8),
    "reconsume_times": int32, "prepared_transaction_offset": int64,
    "body": st.binary(max_size=300), "topic": st.text(max_size=40).map(lambda t: t.encode()[:127]),
    "properties": st.binary(max_size=200),
})


def sample(**over):
    fields = dict(queue_id=3, flag=7, queue_offset=42, phys_offset=1000, sys_flag=0,
                  born_timestamp_ms=1_700_000_000_000, born_host=BORN,
                  store_timestamp_ms=1_700_000_000_123, store_host=HOST, reconsume_times=1,
                  prepared_transaction_offset=0, body=b"hello body", topic=b"TopicA",
                  properties=encode_properties({"TAGS": "A", "KEYS": "k1 k2"}))
    fields.update(over)
    return fields


@settings(max_examples=200)
@given(fields_strategy)
def test_round_trip(fields):
    raw = fmt.encode(**fields)
    rec = fmt.decode_at(raw, 0)
    assert type(rec) is fmt.Record
    assert rec.total_size == len(raw)
    for name, value in fields.items():
        if name == "topic":
            assert rec.topic == value.decode("utf-8", "replace")
        elif name == "properties":
            assert rec.properties_raw == value
        else:
            assert getattr(rec, name) == value, name
    assert rec.body_crc == zlib.crc32(fields["body"]) & 0x7FFFFFFF


def test_every_truncation_point_is_incomplete():
    raw = fmt.encode(**sample())
    for cut in range(len(raw)):
        assert type(fmt.decode_at(raw[:cut], 0)) is fmt.Incomplete, cut
        # Same inside a larger zero-filled buffer, as in a mapped file.
        # BODYCRC does not cover topic and properties: a record cut there may still
        # decode, and recovery rejects it by its zero last byte.
        padded = raw[:cut] + bytes(len(raw) + 64)
        got = fmt.decode_at(padded, 0)
        assert type(got) in (fmt.Incomplete, fmt.Corrupt) or looks_torn(got), cut
    # The same without properties: the record then ends with the topic.
    # Cutting its zero properties length changes no byte: that record is whole.
    raw = fmt.encode(**sample(properties=b""))
    whole = fmt.decode_at(raw, 0)
    assert not looks_torn(whole)
    for cut in range(len(raw)):
        got = fmt.decode_at(raw[:cut] + bytes(len(raw)), 0)
        assert type(got) in (fmt.Incomplete, fmt.Corrupt) or looks_torn(got) or got == whole, cut


def _flip_outcome(raw: bytes, bit: int):
    damaged = bytearray(raw)
    damaged[bit // 8] ^= 1 << (bit % 8)
    return fmt.decode_at(bytes(damaged) + bytes(16), 0)  # never raises


def test_every_single_bit_flip_is_detected_or_decodes_differently():
    """Where a flipped bit lands decides the outcome: in a size, the magic, the CRC or the body
    the record is refused (Corrupt, or Incomplete when TOTALSIZE now claims more bytes than
    there are); in a field the CRC does not cover it decodes to a different Record."""
    fields = sample()
    raw = fmt.encode(**fields)
    original = fmt.decode_at(raw, 0)
    body_len_at = fmt.HEAD_SIZE - 4
    topic_len_at = fmt.HEAD_SIZE + len(fields["body"])
    props_len_at = topic_len_at + 1 + len(fields["topic"])
    refused = {*range(0, 12), *range(body_len_at, topic_len_at + 1), *range(props_len_at, props_len_at + 2)}
    for bit in range(len(raw) * 8):
        got = _flip_outcome(raw, bit)
        if bit // 8 < 4:  # TOTALSIZE
            assert type(got) in (fmt.Corrupt, fmt.Incomplete), (bit, got)
        elif bit // 8 in refused:
            assert type(got) is fmt.Corrupt, (bit, got)
        else:
            assert type(got) is fmt.Record and got != original, (bit, got)


def test_a_blank_is_no_record():
    """A pull body never holds the CommitLog's end-of-file blank: read as a record, it is refused."""
    blank = bytes.fromhex("00000030cbd43194") + bytes(40)
    assert fmt.decode_at(blank, 0) == fmt.Corrupt("bad magic 0xcbd43194 at 0")
    with pytest.raises(ValueError):
        list(fmt.iter_records(fmt.encode(**sample()) + blank))


@settings(max_examples=50)
@given(st.lists(st.tuples(st.binary(max_size=100), st.binary(max_size=50), int32), min_size=1,
                max_size=6))
def test_encode_batch_equals_record_by_record(items):
    messages = [MessageToStore(body=b, flag=f, properties=p, sys_flag=0, born_timestamp_ms=5,
                               born_host=BORN) for b, p, f in items]
    sizes = fmt.batch_record_sizes(2, messages)
    data, next_offset = fmt.encode_batch(messages, sizes, topic=b"TB", queue_id=1,
                                         queue_offset_first=10, phys_offset_first=500,
                                         store_timestamp_ms=9, store_host=HOST)
    assert next_offset == 10 + len(items)
    expected = b""
    phys = 500
    for i, (m, size) in enumerate(zip(messages, sizes)):
        one = fmt.encode(queue_id=1, flag=m.flag, queue_offset=10 + i, phys_offset=phys, sys_flag=0,
                         born_timestamp_ms=5, born_host=BORN, store_timestamp_ms=9, store_host=HOST,
                         reconsume_times=0, prepared_transaction_offset=0, body=m.body,
                         topic=b"TB", properties=m.properties)
        assert len(one) == size
        expected += one
        phys += size
    assert data == expected


def test_encode_batch_half_messages_take_no_queue_offset():
    normal = MessageToStore(b"a", 0, b"", 0, 1, BORN)
    prepared = normal._replace(sys_flag=SYSFLAG_TRANSACTION_PREPARED)
    msgs = [normal, prepared, normal]
    sizes = fmt.batch_record_sizes(1, msgs)
    data, next_offset = fmt.encode_batch(msgs, sizes, topic=b"T", queue_id=0, queue_offset_first=5,
                                         phys_offset_first=0, store_timestamp_ms=1, store_host=HOST)
    assert next_offset == 7
    recs = list(fmt.iter_records(data))
    assert [r.queue_offset for r in recs] == [5, 0, 6]


def test_field_readers_are_the_records():
    """Golden: the readers of TOTALSIZE and PHYSICALOFFSET used outside the decoder, and the offset
    message id of a record."""
    raw = fmt.encode(**sample())
    assert fmt.total_size_at(raw, 0) == len(raw)
    assert fmt.phys_offset_at(raw) == 1000
    assert offset_msg_id(HOST, 1000) == HOST.hex().upper() + "00000000000003E8"


# ---- the whole-record CRC property (RocketMQ's enabledAppendPropCRC) ----

def sealed_sample(**over):
    fields = sample(**over)
    fields["properties"] = fmt.stored_properties(fields["properties"], record_crc=True)
    return fmt.encode(**fields, record_crc=True)


def test_record_crc_property_golden():
    """CommitLog.CRC32_RESERVED_LEN bytes: the name, \\x01, ten digits least significant first
    (MessageDecoder.createCrc32 pads with '0' on the right), \\x02."""
    assert fmt.RECORD_CRC_SIZE == len("__CRC32#") + 1 + 10 + 1 == 20
    assert fmt.record_crc_property(123) == b"__CRC32#\x013210000000\x02"
    assert fmt.record_crc_property(0) == b"__CRC32#\x010000000000\x02"
    assert fmt.record_crc_property(2**31 - 1) == b"__CRC32#\x017463847412\x02"
    assert fmt.stored_record_crc(b"K\x01v\x02" + fmt.record_crc_property(123)) == 123
    assert fmt.stored_record_crc(fmt.record_crc_property(2**31 - 1)) == 2**31 - 1
    assert fmt.stored_record_crc(b"K\x01v\x02") is None
    assert fmt.stored_record_crc(b"X__CRC32#\x013210000000\x02") is None   # another pair's name
    assert fmt.stored_record_crc(b"__CRC32#\x01321000000x\x02") == -1      # garbled digits
    assert fmt.stored_record_crc(b"__CRC32#\x019999999999\x02") == -1      # past 31 bits
    assert fmt.stored_record_crc(b"__CRC32#\x013210000000\x03") == -1


@pytest.mark.parametrize("sent, stored_plain, stored_sealed", [
    (b"", b"", b""),
    (b"TAGS\x01A\x02", b"TAGS\x01A\x02", b"TAGS\x01A\x02"),
    (b"TAGS\x01A", b"TAGS\x01A", b"TAGS\x01A\x02"),                   # the closing \x02 RocketMQ adds
    (b"__CRC32#\x01123\x02K\x01v\x02", b"K\x01v\x02", b"K\x01v\x02"),  # a client's own pair goes
    (b"K\x01v\x02__CRC32#\x01123", b"K\x01v", b"K\x01v\x02"),
    (b"__CRC32#x\x01v\x02", b"__CRC32#x\x01v\x02", b"__CRC32#x\x01v\x02"),  # another name stays
    (b"K\x01__CRC32#\x02", b"K\x01__CRC32#\x02", b"K\x01__CRC32#\x02"),     # a value stays
])
def test_stored_properties_golden(sent, stored_plain, stored_sealed):
    assert fmt.stored_properties(sent, record_crc=False) == stored_plain
    assert fmt.stored_properties(sent, record_crc=True) == stored_sealed + fmt.RECORD_CRC_PLACEHOLDER


def test_sealed_record_golden_bytes():
    raw = sealed_sample()
    assert raw == bytes.fromhex(
        "00000091" "daa320a7" "3e933d59" "00000003" "00000007" "000000000000002a" "00000000000003e8"
        "00000000" "0000018bcfe56800" "c0a80102000015b3" "0000018bcfe5687b" "0a00000100002a9f"
        "00000001" "0000000000000000" "0000000a") + b"hello body" + b"\x06TopicA" + \
        bytes.fromhex("0026") + b"TAGS\x01A\x02KEYS\x01k1 k2\x02" + b"__CRC32#\x01" + b"2217003331" + b"\x02"
    # The digits are crc32 of every byte before the property, masked to 31 bits, reversed.
    crc = zlib.crc32(raw[:-20]) & 0x7FFFFFFF
    assert crc == 1333007122 and raw[-11:-1] == str(crc).zfill(10)[::-1].encode()
    rec = fmt.decode_at(raw, 0, check_crc=True)
    assert type(rec) is fmt.Record and rec.properties == {"TAGS": "A", "KEYS": "k1 k2", "__CRC32#": "2217003331"}


def test_every_single_bit_flip_of_a_sealed_record_is_refused():
    """Unlike the body CRC alone, the CRC property sees a flip in the header, topic or properties.
    A flip in the property's own name leaves a record that looks written without one: only the
    store's promise (record_crc_promise.py) tells recovery it must have had it."""
    raw = sealed_sample()
    name_at = len(raw) - fmt.RECORD_CRC_SIZE
    for bit in range(len(raw) * 8):
        got = _flip_outcome(raw, bit)
        if name_at - 1 <= bit // 8 < name_at + len(fmt.RECORD_CRC_NAME) and type(got) is fmt.Record:
            assert fmt.stored_record_crc(got.properties_raw) is None, bit
        else:
            assert type(got) in (fmt.Corrupt, fmt.Incomplete), (bit, got)
    # Without the CRC checks a flip in the queue id decodes: the CRC property is what refuses it.
    damaged = bytearray(raw)
    damaged[fmt.OFF_QUEUEID + 3] ^= 1
    assert type(fmt.decode_at(damaged, 0, check_crc=False)) is fmt.Record
    assert fmt.decode_at(damaged, 0, check_crc=True) == fmt.Corrupt("record CRC mismatch at 0")


def test_encode_batch_seals_as_encode_into_does():
    messages = [MessageToStore(body=b"x" * n, flag=n, properties=fmt.stored_properties(p, True), sys_flag=0,
                               born_timestamp_ms=5, born_host=BORN)
                for n, p in ((0, b""), (3, b"TAGS\x01a"), (200, b"K\x01v\x02"))]
    sizes = fmt.batch_record_sizes(2, messages)
    data, _ = fmt.encode_batch(messages, sizes, topic=b"TB", queue_id=1, queue_offset_first=10,
                               phys_offset_first=500, store_timestamp_ms=9, store_host=HOST, record_crc=True)
    expected, phys = b"", 500
    for i, m in enumerate(messages):
        expected += fmt.encode(queue_id=1, flag=m.flag, queue_offset=10 + i, phys_offset=phys, sys_flag=0,
                               born_timestamp_ms=5, born_host=BORN, store_timestamp_ms=9, store_host=HOST,
                               reconsume_times=0, prepared_transaction_offset=0, body=m.body, topic=b"TB",
                               properties=m.properties, record_crc=True)
        phys += sizes[i]
    assert data == expected
    assert all(fmt.stored_record_crc(r.properties_raw) is not None for r in fmt.iter_records(data, check_crc=True))


def test_delivered_records_leave_the_crc_property_out_golden():
    """What a consumer gets of a sealed record: the record as it would be stored without the CRC
    property (TOTALSIZE 0x91 - 20 = 0x7d, properties 0x26 - 20 = 0x12), as RocketMQ 4 delivers it."""
    sealed = sealed_sample()
    plain = fmt.encode(**sample())
    expected = bytes.fromhex(
        "0000007d" "daa320a7" "3e933d59" "00000003" "00000007" "000000000000002a" "00000000000003e8"
        "00000000" "0000018bcfe56800" "c0a80102000015b3" "0000018bcfe5687b" "0a00000100002a9f"
        "00000001" "0000000000000000" "0000000a") + b"hello body" + b"\x06TopicA" + \
        bytes.fromhex("0012") + b"TAGS\x01A\x02KEYS\x01k1 k2\x02"
    assert plain == expected
    for deliver in (fmt.delivered_records, _native.delivered_records):
        assert deliver(sealed) == expected
        assert deliver(sealed + plain + sealed) == expected * 3   # back to back; one without stays as it is
        assert deliver(b"") == b""
        for cut in (1, 50, len(sealed) - 1):
            with pytest.raises(ValueError):
                deliver(sealed[:cut])


@settings(max_examples=200)
@given(st.lists(st.tuples(st.binary(max_size=60), st.binary(max_size=80), st.booleans()), max_size=5))
def test_delivered_records_c_and_python_agree(items):
    payload = b"".join(fmt.encode(**sample(body=body, properties=fmt.stored_properties(props, sealed)))
                       for body, props, sealed in items)
    assert _native.delivered_records(payload) == fmt.delivered_records(payload)
