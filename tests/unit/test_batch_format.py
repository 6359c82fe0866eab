"""The batch body format (cluster/message/batch_format.py): golden bytes, round trips, refusals."""

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketbox.cluster.message import batch_format as bf
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message import record_format

HOST = pack_host("10.0.0.1", 10911)

items_strategy = st.lists(
    # Properties never hold NUL (pairs are name\x01value\x02; batches with NUL are refused).
    st.tuples(st.integers(-2**31, 2**31 - 1), st.binary(max_size=200),
              st.binary(max_size=60).map(lambda b: b.replace(b"\x00", b"\x02"))),
    max_size=8)


def test_golden_item():
    # TOTALSIZE 22+2+3, magic 0, crc 0, flag 7, body length 2, body, properties length 3, properties
    assert bf.encode_items([(7, b"hi", b"a\x01b")]) == (
        bytes.fromhex("0000001b" "00000000" "00000000" "00000007" "00000002")
        + b"hi" + bytes.fromhex("0003") + b"a\x01b")


def test_empty_batch_has_no_items():
    assert bf.decode_items(b"") == []
    assert bf.measure_batch(b"", 3) == (0, 0)


@given(items_strategy)
def test_items_round_trip(items):
    assert bf.decode_items(bf.encode_items(items)) == [bf.BatchItem(*item) for item in items]


@given(items_strategy, st.integers(0, 127), st.booleans())
def test_measure_is_the_sum_of_record_sizes(items, topic_len, record_crc):
    count, total = bf.measure_batch(bf.encode_items(items), topic_len, record_crc=record_crc)
    assert count == len(items)
    assert total == sum(record_format.record_size(len(body), topic_len, len(record_format.stored_properties(props, record_crc)))
                        for _, body, props in items)


def test_client_magic_and_crc_are_ignored():
    raw = bytearray(bf.encode_items([(1, b"body", b"")]))
    struct.pack_into(">ii", raw, 4, 0x12345678, -5)
    assert bf.decode_items(raw) == [bf.BatchItem(1, b"body", b"")]


def _item(total, body_len, body, props_len, props, flag=0):
    return struct.pack(">iiiii", total, 0, 0, flag, body_len) + body + struct.pack(">h", props_len) + props


@pytest.mark.parametrize("batch", [
    b"\x00" * 21,                                   # shorter than an item head
    _item(21, 0, b"", 0, b""),                      # TOTALSIZE below 22
    _item(40, 0, b"", 0, b""),                      # TOTALSIZE past the end
    _item(22 + 3, -1, b"abc", 0, b""),              # negative body length
    _item(22 + 3, 4, b"abc", 0, b""),               # body longer than the item
    _item(22 + 3, 3, b"abc", -1, b""),              # negative properties length
    _item(22 + 3 + 2, 3, b"abc", 1, b"xy"),         # sizes do not add up
    bf.encode_items([(0, b"ok", b"")]) + b"\x00",   # trailing byte
], ids=["short", "total-small", "total-past-end", "body-negative", "body-long",
        "props-negative", "sizes", "trailing"])
def test_malformed_batches_are_refused(batch):
    with pytest.raises(bf.MalformedBatch):
        bf.decode_items(batch)
    with pytest.raises(bf.MalformedBatch):
        bf.measure_batch(batch, 1)


def test_every_cut_inside_an_item_is_malformed():
    batch = bf.encode_items([(1, b"first", b"K\x01V\x02"), (2, b"second", b"")])
    boundaries = {0, 22 + 5 + 4, len(batch)}
    for cut in range(len(batch) + 1):
        if cut in boundaries:
            bf.decode_items(batch[:cut])
        else:
            with pytest.raises(bf.MalformedBatch):
                bf.decode_items(batch[:cut])


def test_encode_batch_writes_records_decode_at_reads():
    batch = bf.encode_items([(5, b"one", b"TAGS\x01a\x02"), (6, b"two!", b"")])
    dst = bytearray(500)
    written, count, ends = bf.encode_batch(dst, 3, batch, b"TopicA", 2, 40, 1000, 0, 111, HOST, 222, HOST)
    first = record_format.decode_at(dst, 3)
    second = record_format.decode_at(dst, ends[0])
    assert (count, list(ends)) == (2, [3 + first.total_size, 3 + written])
    assert written == first.total_size + second.total_size
    assert (first.body, first.flag, first.queue_offset, first.phys_offset, first.topic) == (b"one", 5, 40, 1000, "TopicA")
    assert first.properties == {"TAGS": "a"}
    assert (second.body, second.queue_offset, second.phys_offset) == (b"two!", 41, 1000 + first.total_size)
    assert second.born_timestamp_ms == 111 and second.store_timestamp_ms == 222
    assert second.reconsume_times == 0 and second.prepared_transaction_offset == 0


def test_encode_batch_seals_each_record_with_the_whole_record_crc():
    """Golden: a client's own "__CRC32#" pair is dropped, a missing closing \\x02 added, and the
    property's digits are the record's CRC before them, least significant digit first."""
    batch = bf.encode_items([(5, b"one", b"TAGS\x01a"), (6, b"two!", b"__CRC32#\x011\x02K\x01v\x02"), (7, b"", b"")])
    dst = bytearray(600)
    written, count, ends = bf.encode_batch(dst, 0, batch, b"TopicA", 2, 40, 1000, 0, 111, HOST, 222, HOST,
                                           record_crc=True)
    starts = [0, *ends[:-1]]
    records = [record_format.decode_at(dst, start, check_crc=True) for start in starts]
    assert [r.properties_raw[:-record_format.RECORD_CRC_SIZE] for r in records] == [b"TAGS\x01a\x02", b"K\x01v\x02", b""]
    for start, end, record in zip(starts, ends, records):
        crc = zlib.crc32(dst[start:end - 20]) & 0x7FFFFFFF
        assert dst[end - 20:end] == b"__CRC32#\x01" + str(crc).zfill(10)[::-1].encode() + b"\x02"
        assert record_format.stored_record_crc(record.properties_raw) == crc
    assert written == ends[-1] and count == 3


def test_stored_properties_past_the_int16_limit_are_refused():
    room = record_format.PROPERTIES_LENGTH_MAX - record_format.RECORD_CRC_SIZE
    fits, too_long = b"K\x01" + b"v" * (room - 3) + b"\x02", b"K\x01" + b"v" * (room - 2) + b"\x02"
    assert bf.measure_batch(bf.encode_items([(0, b"", fits)]), 1, record_crc=True)[0] == 1
    assert bf.measure_batch(bf.encode_items([(0, b"", too_long)]), 1)[0] == 1
    with pytest.raises(bf.MalformedBatch):
        bf.measure_batch(bf.encode_items([(0, b"", too_long)]), 1, record_crc=True)


def test_encode_batch_is_all_or_nothing():
    batch = bf.encode_items([(0, b"x" * 10, b"")] * 3)
    _, total = bf.measure_batch(batch, 1)
    dst = bytearray(total + 10)
    with pytest.raises(bf.DestinationTooSmall):
        bf.encode_batch(dst, 11, batch, b"T", 0, 0, 0, 0, 0, HOST, 0, HOST)
    with pytest.raises(bf.DestinationTooSmall):
        bf.encode_batch(dst, 0, batch, b"T", 0, 0, 0, 0, 0, HOST, 0, HOST, dst_limit=total - 1)
    assert dst == bytearray(total + 10)
    assert bf.encode_batch(dst, 10, batch, b"T", 0, 0, 0, 0, 0, HOST, 0, HOST)[0] == total


def test_shared_properties_encoding_equals_the_general_one():
    from rocketbox.cluster.message.batch_format import encode_items, encode_items_sharing_properties
    bodies = [b"a", b"bb" * 100, bytes(range(256))]
    ids = [b"%032X" % i for i in range(3)]
    shared = b"TAGS\x01TagA\x02"
    general = encode_items([(7, body, shared + b"UNIQ_KEY\x01" + uid + b"\x02") for body, uid in zip(bodies, ids)])
    assert encode_items_sharing_properties(7, bodies, shared, ids) == general
    assert encode_items_sharing_properties(0, [], b"", []) == b""


def test_properties_with_nul_are_refused():
    """Recovery reads a record whose properties end in NUL as a torn write: none may be stored."""
    import pytest as _pytest
    with _pytest.raises(bf.MalformedBatch):
        bf.decode_items(bf.encode_items([(0, b"body", b"KEYS\x01k\x02x\x01\x00")]))
    from rocketbox.cluster import _native
    with _pytest.raises(ValueError):
        _native.measure_batch(bf.encode_items([(0, b"body", b"A\x01\x00\x02")]), 1)
