"""The native helper against the Python paths: zlib.crc32, cluster.message.batch_format,
record_format.encode_into / decode_at, commitlog_format.decode_segment_at; and its memory calls on a real mmap file."""

import errno
import mmap
import os
import struct
import subprocess
import sys
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketbox.cluster import _native
from rocketbox.cluster.message import batch_format as bf
from rocketbox.cluster.message.ids import offset_msg_id, pack_host
from rocketbox.cluster.message import record_format
from rocketbox.cluster.shm import commitlog_format
from rocketbox.cluster.shm.store import MessageToStore as Single

HOST_A = pack_host("10.0.0.1", 10911)
HOST_B = pack_host("192.168.1.20", 40000)
PAGE = mmap.PAGESIZE

int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)
# Properties never hold NUL (pairs are name\x01value\x02; batches with NUL are refused). Some are
# pairs with "__CRC32#" among the names: the store drops those, in C and in Python alike.
no_nul = st.binary(max_size=80).map(lambda b: b.replace(b"\x00", b"\x02"))
pairs_with_crc_names = st.tuples(
    st.lists(st.tuples(st.sampled_from([b"__CRC32#", b"__CRC32#x", b"TAGS", b"", b"K"]), no_nul), max_size=5),
    st.booleans()).map(lambda p: b"\x02".join(name + b"\x01" + value for name, value in p[0]) + b"\x02" * p[1])
items_strategy = st.lists(st.tuples(int32, st.binary(max_size=300), st.one_of(no_nul, pairs_with_crc_names)),
                          max_size=10)
fields_strategy = st.fixed_dictionaries({
    "topic": st.binary(max_size=127),
    "queue_id": int32,
    "queue_offset_first": st.integers(0, 2**62),
    "phys_offset_first": st.integers(0, 2**62),
    "sys_flag": int32,
    "born_timestamp_ms": int64,
    "born_host": st.binary(min_size=8, max_size=8),
    "store_timestamp_ms": int64,
    "store_host": st.binary(min_size=8, max_size=8),
})


# ---- CRC ----

def test_crc_known_values():
    assert _native.crc32(b"") == 0
    assert _native.crc32(b"123456789") == 0xCBF43926
    assert _native.body_crc(b"123456789") == 0xCBF43926 & 0x7FFFFFFF


def test_crc_matches_zlib_for_every_length_and_alignment():
    data = os.urandom(1100)
    for length in list(range(0, 70)) + [255, 256, 257, 1023, 1024, 1025]:
        for shift in range(8):  # unaligned starts
            chunk = memoryview(data)[shift:shift + length]
            assert _native.crc32(chunk) == zlib.crc32(chunk), (length, shift)


@given(st.binary(max_size=4096), st.integers(0, 2**32 - 1))
def test_crc_matches_zlib(data, value):
    assert _native.crc32(data, value) == zlib.crc32(data, value)
    assert _native.body_crc(data) == record_format.body_crc(data)


def test_crc_of_a_large_buffer_and_chained():
    data = os.urandom(3 * 1024 * 1024 + 5)
    assert _native.crc32(data) == zlib.crc32(data)
    assert _native.crc32(data[1000:], _native.crc32(data[:1000])) == zlib.crc32(data)


# ---- batch -> records ----

def encode_record_by_record(dst, dst_pos, batch, f, record_crc=False):
    """The reference: each item through record_format.encode_into, one after another."""
    pos = dst_pos
    for i, item in enumerate(bf.decode_items(batch)):
        pos += record_format.encode_into(
            dst, pos, queue_id=f["queue_id"], flag=item.flag, queue_offset=f["queue_offset_first"] + i,
            phys_offset=f["phys_offset_first"] + pos - dst_pos, sys_flag=f["sys_flag"],
            born_timestamp_ms=f["born_timestamp_ms"], born_host=f["born_host"],
            store_timestamp_ms=f["store_timestamp_ms"], store_host=f["store_host"], reconsume_times=0,
            prepared_transaction_offset=0, body=item.body, topic=f["topic"],
            properties=record_format.stored_properties(item.properties, record_crc), record_crc=record_crc)
    return pos - dst_pos


def call_encode(encode, dst, dst_pos, batch, f, **kwargs):
    return encode(dst, dst_pos, batch, f["topic"], f["queue_id"], f["queue_offset_first"],
                  f["phys_offset_first"], f["sys_flag"], f["born_timestamp_ms"], f["born_host"],
                  f["store_timestamp_ms"], f["store_host"], **kwargs)


@given(items_strategy, fields_strategy, st.integers(0, 50), st.booleans())
def test_encode_batch_is_byte_identical_to_python(items, fields, dst_pos, record_crc):
    batch = bf.encode_items(items)
    count, total = _native.measure_batch(batch, len(fields["topic"]), record_crc=record_crc)
    assert (count, total) == bf.measure_batch(batch, len(fields["topic"]), record_crc=record_crc)
    size = dst_pos + total + 7
    native_dst, twin_dst, reference_dst = bytearray(size), bytearray(size), bytearray(size)

    written, native_count, ends = call_encode(_native.encode_batch, native_dst, dst_pos, batch, fields,
                                              record_crc=record_crc)
    assert (written, native_count) == (total, count)
    assert call_encode(bf.encode_batch, twin_dst, dst_pos, batch, fields, record_crc=record_crc) == \
        (written, count, ends)
    assert encode_record_by_record(reference_dst, dst_pos, batch, fields, record_crc) == written
    assert native_dst == twin_dst == reference_dst

    pos = dst_pos
    for i, end in enumerate(ends):
        record = record_format.decode_at(native_dst, pos, check_crc=True)
        assert isinstance(record, record_format.Record)
        stored = record_format.stored_properties(items[i][2], record_crc)
        kept = len(stored) - record_format.RECORD_CRC_SIZE * record_crc
        assert (record.flag, record.body, record.properties_raw[:kept]) == (items[i][0], items[i][1], stored[:kept])
        crc = zlib.crc32(native_dst[pos:end - record_format.RECORD_CRC_SIZE]) & 0x7FFFFFFF if record_crc else None
        assert record_format.stored_record_crc(record.properties_raw) == crc
        assert pos + record.total_size == end
        pos = end


@pytest.mark.parametrize("body_len", [0, 255, 256, 257, 1024, 5000, 70_000])
def test_sealed_records_of_long_bodies_equal_python(body_len):
    """Past a few hundred bytes the C encoder derives the record's CRC from the body's (no second
    pass over the body): the bytes must not change."""
    batch = bf.encode_items([(1, os.urandom(body_len), b"TAGS\x01a\x02"), (2, b"x" * body_len, b"")])
    f = dict(topic=b"T", queue_id=1, queue_offset_first=0, phys_offset_first=0, sys_flag=0,
             born_timestamp_ms=1, born_host=HOST_A, store_timestamp_ms=2, store_host=HOST_B)
    _, total = bf.measure_batch(batch, 1, record_crc=True)
    native_dst, twin_dst = bytearray(total), bytearray(total)
    ends = call_encode(_native.encode_batch, native_dst, 0, batch, f, record_crc=True)[2]
    call_encode(bf.encode_batch, twin_dst, 0, batch, f, record_crc=True)
    assert native_dst == twin_dst
    for start, end in zip([0, *ends[:-1]], ends):
        assert native_dst[end - 11:end - 1] == str(zlib.crc32(native_dst[start:end - 20]) & 0x7FFFFFFF).zfill(10)[::-1].encode()


def test_encode_batch_into_an_mmap_and_with_client_magic_and_crc(tmp_path):
    batch = bytearray(bf.encode_items([(1, b"a" * 100, b"KEYS\x01k1 k2\x02"), (0, b"", b"")]))
    struct.pack_into(">ii", batch, 4, 0x1234, 0x5678)  # clients may send anything here
    f = dict(topic=b"T", queue_id=1, queue_offset_first=0, phys_offset_first=0, sys_flag=0,
             born_timestamp_ms=1, born_host=HOST_A, store_timestamp_ms=2, store_host=HOST_B)
    with open_map(tmp_path, 4 * PAGE) as m:
        written, count, _ = call_encode(_native.encode_batch, m, 100, batch, f)
        expected = bytearray(4 * PAGE)
        encode_record_by_record(expected, 100, batch, f)
        assert m[:] == expected and count == 2 and written > 0


@given(st.binary(max_size=200), st.integers(0, 127), st.booleans())
@settings(max_examples=300)
def test_measure_agrees_with_python_on_arbitrary_bytes(junk, topic_len, record_crc):
    assert outcome(_native.measure_batch, junk, topic_len, record_crc=record_crc) == \
        outcome(bf.measure_batch, junk, topic_len, record_crc=record_crc)


def outcome(function, *args, **kwargs):
    try:
        return function(*args, **kwargs)
    except bf.MalformedBatch:
        return "malformed"


def test_every_truncation_and_corruption_of_a_batch_agrees_with_python():
    batch = bf.encode_items([(1, b"first", b"K\x01V\x02"), (2, b"second body", b""), (3, b"", b"P")])
    for cut in range(len(batch) + 1):
        assert outcome(_native.measure_batch, batch[:cut], 4) == outcome(bf.measure_batch, batch[:cut], 4)
    for pos in range(len(batch)):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            damaged = batch[:pos] + bytes([value]) + batch[pos + 1:]
            assert outcome(_native.measure_batch, damaged, 4) == outcome(bf.measure_batch, damaged, 4)


single_fields = st.fixed_dictionaries({
    "topic": st.binary(max_size=127), "queue_id": int32, "queue_offset": st.integers(0, 2**62),
    "phys_offset": st.integers(0, 2**62), "flag": int32, "reconsume_times": st.integers(0, 2**31 - 1),
    "sys_flag": int32,   # transaction PREPARED and ROLLBACK too: they store queue offset 0
    "born_timestamp_ms": int64, "born_host": st.binary(min_size=8, max_size=8),
    "store_timestamp_ms": int64, "store_host": st.binary(min_size=8, max_size=8),
    "prepared_transaction_offset": int64,
})


def encode_single_in_python(body, properties, f, record_crc):
    message = Single(body, f["flag"], properties, f["sys_flag"], f["born_timestamp_ms"], f["born_host"],
                     f["reconsume_times"], f.get("prepared_transaction_offset", 0))
    stored = [record_format.stored_properties(properties, record_crc)]
    sizes = record_format.batch_record_sizes(len(f["topic"]), [message], stored)
    data, _ = record_format.encode_batch([message], sizes, topic=f["topic"], queue_id=f["queue_id"],
                               queue_offset_first=f["queue_offset"], phys_offset_first=f["phys_offset"],
                               store_timestamp_ms=f["store_timestamp_ms"], store_host=f["store_host"],
                               record_crc=record_crc, properties=stored)
    return data


def call_encode_record(dst, dst_pos, size, body, properties, f, record_crc):
    _native.encode_record(dst, dst_pos, size, body, properties, f["topic"], flag=f["flag"],
                          reconsume_times=f["reconsume_times"], queue_id=f["queue_id"],
                          queue_offset=f["queue_offset"], phys_offset=f["phys_offset"], sys_flag=f["sys_flag"],
                          born_timestamp_ms=f["born_timestamp_ms"], born_host=f["born_host"],
                          store_timestamp_ms=f["store_timestamp_ms"], store_host=f["store_host"],
                          prepared_transaction_offset=f.get("prepared_transaction_offset", 0), record_crc=record_crc)


@given(st.binary(max_size=300), st.one_of(no_nul, pairs_with_crc_names), single_fields, st.integers(0, 50),
       st.booleans())
def test_encode_record_is_byte_identical_to_python(body, properties, fields, dst_pos, record_crc):
    """Any record the store writes but a batch body's, from one C call: the bytes the Python encoder
    (the oracle) makes for it, and the size the store reserves for it (record_size)."""
    expected = encode_single_in_python(body, properties, fields, record_crc)
    assert _native.record_size(len(body), properties, len(fields["topic"]), record_crc=record_crc) == len(expected)
    dst = bytearray(dst_pos + len(expected) + 5)
    call_encode_record(dst, dst_pos, len(expected), body, properties, fields, record_crc)
    assert dst[dst_pos:dst_pos + len(expected)] == expected
    assert dst[:dst_pos] == bytes(dst_pos) and dst[dst_pos + len(expected):] == bytes(5)
    record = record_format.decode_at(dst, dst_pos, check_crc=True)
    assert (record.flag, record.reconsume_times, record.body) == (fields["flag"], fields["reconsume_times"], body)


def test_encode_record_refuses_before_writing_a_byte():
    f = dict(topic=b"T", queue_id=0, queue_offset=0, phys_offset=0, flag=0, reconsume_times=0, sys_flag=0,
             born_timestamp_ms=0, born_host=HOST_A, store_timestamp_ms=0, store_host=HOST_A)
    size = len(encode_single_in_python(b"body", b"K\x01v\x02", f, True))
    dst = bytearray(size + 10)
    with pytest.raises(ValueError, match="invalid argument"):   # the caller reserved another size
        call_encode_record(dst, 0, size - 1, b"body", b"K\x01v\x02", f, True)
    with pytest.raises(ValueError, match="invalid argument"):
        call_encode_record(dst, 0, size + 1, b"body", b"K\x01v\x02", f, True)
    with pytest.raises(bf.MalformedBatch):                     # a NUL in the properties
        call_encode_record(dst, 0, size, b"body", b"K\x01\x00\x02", f, True)
    with pytest.raises(bf.MalformedBatch):
        _native.record_size(4, b"K\x01\x00\x02", 1, record_crc=True)
    with pytest.raises(bf.MalformedBatch):                     # stored properties over 32767 bytes
        call_encode_record(dst, 0, size, b"body", b"K\x01" + b"v" * 32760, f, True)
    with pytest.raises(ValueError):
        call_encode_record(dst, 0, size, b"body", b"K\x01v\x02", dict(f, born_host=b"short"), True)
    with pytest.raises(ValueError):
        call_encode_record(dst, 11, size, b"body", b"K\x01v\x02", f, True)   # past the buffer
    with pytest.raises(OverflowError):
        call_encode_record(dst, 0, size, b"body", b"K\x01v\x02", dict(f, flag=2**31), True)
    assert dst == bytearray(size + 10)


def test_malformed_batch_is_a_value_error_and_writes_nothing():
    batch = bf.encode_items([(0, b"ok", b"")])[:-1]
    dst = bytearray(1000)
    f = dict(topic=b"T", queue_id=0, queue_offset_first=0, phys_offset_first=0, sys_flag=0,
             born_timestamp_ms=0, born_host=HOST_A, store_timestamp_ms=0, store_host=HOST_A)
    with pytest.raises(ValueError):
        call_encode(_native.encode_batch, dst, 0, batch, f)
    with pytest.raises(bf.MalformedBatch):
        call_encode(_native.encode_batch, dst, 0, batch, f)
    assert dst == bytearray(1000)


def test_destination_too_small_is_distinct_and_writes_nothing():
    batch = bf.encode_items([(0, b"x" * 50, b"")] * 4)
    _, total = _native.measure_batch(batch, 5)
    f = dict(topic=b"Topic", queue_id=0, queue_offset_first=0, phys_offset_first=0, sys_flag=0,
             born_timestamp_ms=0, born_host=HOST_A, store_timestamp_ms=0, store_host=HOST_A)
    dst = bytearray(total + 16)
    with pytest.raises(_native.DestinationTooSmall) as caught:
        call_encode(_native.encode_batch, dst, 17, batch, f)
    assert not isinstance(caught.value, ValueError)
    with pytest.raises(_native.DestinationTooSmall):  # room kept for the end-of-file blank
        call_encode(_native.encode_batch, dst, 16, batch, f, dst_limit=total + 15)
    assert dst == bytearray(total + 16)
    assert call_encode(_native.encode_batch, dst, 16, batch, f)[0] == total


def test_bad_arguments_are_refused():
    batch = bf.encode_items([(0, b"x", b"")])
    f = dict(topic=b"T" * 128, queue_id=0, queue_offset_first=0, phys_offset_first=0, sys_flag=0,
             born_timestamp_ms=0, born_host=HOST_A, store_timestamp_ms=0, store_host=HOST_A)
    for encode in (_native.encode_batch, bf.encode_batch):
        with pytest.raises(ValueError):
            call_encode(encode, bytearray(500), 0, batch, f)  # topic over 127 bytes
        with pytest.raises(ValueError):
            call_encode(encode, bytearray(500), 0, batch, dict(f, topic=b"T", born_host=b"1234"))
        with pytest.raises(ValueError):
            call_encode(encode, bytearray(500), 501, batch, dict(f, topic=b"T"))
    with pytest.raises(BufferError):
        call_encode(_native.encode_batch, b"read-only" * 100, 0, batch, dict(f, topic=b"T"))


def test_empty_batch_writes_nothing():
    f = dict(topic=b"T", queue_id=0, queue_offset_first=0, phys_offset_first=0, sys_flag=0,
             born_timestamp_ms=0, born_host=HOST_A, store_timestamp_ms=0, store_host=HOST_A)
    written, count, ends = call_encode(_native.encode_batch, bytearray(10), 10, b"", f)
    assert (written, count, list(ends)) == (0, 0, [])


# ---- scanning ----

def python_scan(buf, start, end, check_crc=False, max_rows=1024):
    """The reference: walk with commitlog_format.decode_segment_at, stop as scan_records does."""
    rows, pos = [], start
    while True:
        if pos == end:
            return rows, pos, _native.SCAN_END
        if len(rows) == max_rows:
            return rows, pos, _native.SCAN_LIMIT
        record = commitlog_format.decode_segment_at(buf, pos, end, check_crc=check_crc)
        if isinstance(record, commitlog_format.EndOfFile):
            return rows, pos, _native.SCAN_BLANK
        if isinstance(record, record_format.Incomplete):
            return rows, pos, _native.SCAN_INCOMPLETE
        if isinstance(record, record_format.Corrupt):
            return rows, pos, _native.SCAN_CORRUPT
        body_pos = pos + record_format.HEAD_SIZE
        topic_len = buf[body_pos + len(record.body)]  # record.topic is decoded text
        topic_pos = body_pos + len(record.body) + 1
        rows.append(_native.ScannedRecord(
            pos, record.total_size, record.queue_id, record.queue_offset, record.phys_offset,
            record.sys_flag, record.store_timestamp_ms, body_pos, len(record.body), topic_pos,
            topic_len, topic_pos + topic_len + 2, len(record.properties_raw)))
        pos += record.total_size


def native_scan(buf, start, end, check_crc=False, max_rows=1024):
    result = _native.scan_records(buf, start, end, check_crc=check_crc, max_rows=max_rows)
    assert len(result.rows) == result.count * _native.SCAN_COLUMNS
    return result.records(), result.next_pos, result.stop


def segment_with_records(items, fields, size_extra=0, record_crc=False):
    batch = bf.encode_items(items)
    _, total = bf.measure_batch(batch, len(fields["topic"]), record_crc=record_crc)
    buf = bytearray(total + size_extra)
    call_encode(bf.encode_batch, buf, 0, batch, fields, record_crc=record_crc)
    return buf, total


@given(items_strategy, fields_strategy, st.booleans())
def test_scan_agrees_with_decode_at(items, fields, record_crc):
    buf, total = segment_with_records(items, fields, size_extra=40, record_crc=record_crc)
    for check_crc in (False, True):
        assert native_scan(buf, 0, len(buf), check_crc) == python_scan(buf, 0, len(buf), check_crc)
        assert native_scan(buf, 0, total, check_crc) == python_scan(buf, 0, total, check_crc)
    rows, next_pos, stop = native_scan(buf, 0, len(buf), check_crc=True)
    assert (len(rows), next_pos) == (len(items), total)
    for row, (_, body, properties) in zip(rows, items):
        assert buf[row.body_pos:row.body_pos + row.body_len] == body
        assert buf[row.topic_pos:row.topic_pos + row.topic_len] == fields["topic"]
        stored = record_format.stored_properties(properties, record_crc)
        kept = len(stored) - record_format.RECORD_CRC_SIZE * record_crc
        assert buf[row.properties_pos:row.properties_pos + row.properties_len][:kept] == stored[:kept]


SCAN_FIELDS = dict(topic=b"TopicTest", queue_id=3, queue_offset_first=10, phys_offset_first=4096,
                   sys_flag=0, born_timestamp_ms=1700000000000, born_host=HOST_A,
                   store_timestamp_ms=1700000000001, store_host=HOST_B)
SCAN_ITEMS = [(0, b"body-%d" % i, b"TAGS\x01t%d\x02" % i) for i in range(5)]


def test_scan_stops_at_the_limit_blank_and_tail():
    buf, total = segment_with_records(SCAN_ITEMS, SCAN_FIELDS, size_extra=100)
    rows, next_pos, stop = native_scan(buf, 0, len(buf), max_rows=2)
    assert (len(rows), stop) == (2, _native.SCAN_LIMIT)
    assert native_scan(buf, next_pos, len(buf)) == python_scan(buf, next_pos, len(buf))
    assert native_scan(buf, 0, len(buf))[1:] == (total, _native.SCAN_INCOMPLETE)  # zeros after the tail
    commitlog_format.encode_blank_into(buf, total, len(buf) - total)
    assert native_scan(buf, 0, len(buf))[1:] == (total, _native.SCAN_BLANK)
    assert native_scan(buf, 0, len(buf), max_rows=0) == ([], 0, _native.SCAN_LIMIT)


@pytest.mark.parametrize("record_crc", [False, True])
def test_scan_every_truncation_and_bit_flip_agrees_with_decode_at(record_crc):
    buf, total = segment_with_records(SCAN_ITEMS[:2], SCAN_FIELDS, record_crc=record_crc)
    for end in range(total + 1):
        assert native_scan(buf, 0, end) == python_scan(buf, 0, end), end
    for bit in range(total * 8):
        damaged = bytearray(buf)
        damaged[bit // 8] ^= 1 << (bit % 8)
        for check_crc in (False, True):
            assert native_scan(damaged, 0, total, check_crc) == python_scan(damaged, 0, total, check_crc), bit


def test_scan_refuses_a_range_outside_the_buffer():
    with pytest.raises(ValueError):
        _native.scan_records(b"\x00" * 10, 5, 11)
    with pytest.raises(ValueError):
        _native.scan_records(b"\x00" * 10, 6, 5)
    with pytest.raises(ValueError):
        _native.scan_records(b"\x00" * 10, -1, 5)


# ---- memory calls on a real mmap file ----

class open_map:
    """A fresh zero file of ``size`` bytes mapped shared; closes (and so proves no export is left)."""

    def __init__(self, tmp_path, size, name="segment"):
        self.path = tmp_path / name
        if not self.path.exists():
            self.path.write_bytes(b"")
            os.truncate(self.path, size)
        self.size = size

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR)
        self.map = mmap.mmap(self.fd, self.size)
        return self.map

    def __exit__(self, *exc):
        self.map.close()  # BufferError here would mean a call kept the buffer exported
        os.close(self.fd)


def test_msync_ranges(tmp_path):
    with open_map(tmp_path, 8 * PAGE) as m:
        m[PAGE + 5:PAGE + 10] = b"hello"
        _native.msync_range(m, PAGE + 5, PAGE + 10)          # unaligned start, inside one page
        _native.msync_range(m, 3, 7 * PAGE + 1, sync=False)  # spans pages, MS_ASYNC
        _native.msync_range(m, 0, 8 * PAGE)
        _native.msync_range(m, 100, 100)                     # empty range: nothing to do
        with pytest.raises(ValueError):
            _native.msync_range(m, 0, 8 * PAGE + 1)
        with pytest.raises(ValueError):
            _native.msync_range(m, 10, 5)
    assert (tmp_path / "segment").read_bytes()[PAGE + 5:PAGE + 10] == b"hello"


def test_mlock_munlock(tmp_path):
    with open_map(tmp_path, 4 * PAGE) as m:
        _native.munlock(m, 0, 4 * PAGE)   # pages never locked: nothing to undo, no error
        try:
            _native.mlock(m, 10, PAGE)
        except OSError as exc:  # RLIMIT_MEMLOCK or no CAP_IPC_LOCK: a real errno, as promised
            assert exc.errno in (errno.EPERM, errno.ENOMEM, errno.EAGAIN)
        else:
            _native.munlock(m, 10, PAGE)
        with pytest.raises(ValueError):
            _native.mlock(m, 0, 4 * PAGE + 1)
        with pytest.raises(ValueError):
            _native.munlock(m, -1, 10)


def test_preheat_reads_every_page_and_changes_nothing(tmp_path):
    with open_map(tmp_path, 16 * PAGE) as m:
        m[5 * PAGE:5 * PAGE + 4] = b"data"
        assert _native.preheat_read(m, 0, 16 * PAGE, PAGE) == 16
        assert _native.preheat_read(m, 100, PAGE, PAGE) == 2     # touches two pages
        assert _native.preheat_read(m, 0, 0) == 0
        assert _native.preheat_read(m, 0, 16 * PAGE, 2 * PAGE) == 8
        with pytest.raises(ValueError):
            _native.preheat_read(m, 0, PAGE, 3000)                # not a power of two
        with pytest.raises(ValueError):
            _native.preheat_read(m, PAGE, 16 * PAGE)
        _native.msync_range(m, 0, 16 * PAGE)
    assert (tmp_path / "segment").read_bytes() == bytes(5 * PAGE) + b"data" + bytes(11 * PAGE - 4)


def test_preheat_accepts_a_read_only_buffer():
    assert _native.preheat_read(b"\x00" * PAGE, 0, PAGE) == 1


def test_u64_slots_round_trip_across_two_maps_of_one_file(tmp_path):
    with open_map(tmp_path, PAGE, "control") as writer, open_map(tmp_path, PAGE, "control") as reader:
        w, r = _native.U64Slots(writer, PAGE // 8), _native.U64Slots(reader, PAGE // 8)
        try:
            for index, value in ((0, 1), (1, 2**64 - 1), (8, 0x0102030405060708), (PAGE // 8 - 1, 2**40 + 3)):
                w.store(index, value)
                assert r.load(index) == value
                assert struct.unpack_from("=Q", reader, index * 8)[0] == value  # native byte order
            struct.pack_into("=Q", writer, 16, 77)
            assert r.load(2) == r.loader(2)() == 77
            w.storer(3)(78)
            assert r.load(3) == 78
            with pytest.raises(IndexError):
                r.load(PAGE // 8)                  # past the end
            with pytest.raises(IndexError):
                w.storer(-1)
            with pytest.raises(OverflowError):
                w.store(0, -1)
            with pytest.raises(OverflowError):
                w.storer(0)(2**64)
            assert r.load(0) == 1                  # a refused store wrote nothing
        finally:
            w.release()
            r.release()


def test_u64_slots_refuse_a_short_or_misaligned_buffer(tmp_path):
    with pytest.raises(ValueError):
        _native.U64Slots(bytearray(15), 2)
    with open_map(tmp_path, PAGE, "control") as m:   # a mapping starts on a page boundary
        view = memoryview(m)
        try:
            with pytest.raises(ValueError):
                _native.U64Slots(view[4:20], 1)
        finally:
            view.release()


def test_u64_slots_are_seen_by_another_process(tmp_path):
    with open_map(tmp_path, PAGE, "control") as m:
        code = ("import mmap, os, sys; from rocketbox.cluster import _native; fd = os.open(sys.argv[1], os.O_RDWR); "
                "m = mmap.mmap(fd, mmap.PAGESIZE); s = _native.U64Slots(m, 2); s.store(1, 123456789); "
                "print(s.load(0)); s.release()")
        slots = _native.U64Slots(m, 2)
        try:
            slots.store(0, 42)
            out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "control")],
                                 check=True, capture_output=True, text=True).stdout
            assert out.strip() == "42"
            assert slots.load(1) == 123456789
        finally:
            slots.release()


# ---- errors ----

def test_check_turns_errno_into_oserror():
    with pytest.raises(PermissionError) as caught:
        _native._check(-errno.EPERM, "mlock")
    assert caught.value.errno == errno.EPERM
    with pytest.raises(OSError) as caught:
        _native._check(-errno.ENOMEM, "msync")
    assert caught.value.errno == errno.ENOMEM
    assert _native._check(7, "ok") == 7


def test_missing_extension_says_how_to_fix_it():
    code = ("import sys; sys.modules['rocketbox.cluster._native._rocketbox_native'] = None\n"
            "try:\n    import rocketbox.cluster._native\nexcept ImportError as exc:\n    print(exc)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "make install" in out and "pip install -e ." in out


def test_offset_msg_ids_match_the_format_module():
    from array import array

    host = pack_host("10.1.2.3", 10811)
    ends = array("q", [500 + 120, 500 + 250, 500 + 1000])
    text = _native.offset_msg_ids(host, 7_000_000_000, ends, 500)
    expected = [offset_msg_id(host, p) for p in (7_000_000_000, 7_000_000_120, 7_000_000_250)]
    assert text.split(",") == expected
    assert _native.offset_msg_ids(host, 0, array("q"), 0) == ""


def test_encode_items_shared_matches_the_python_encoder():
    from array import array

    from rocketbox.cluster.message.batch_format import encode_items_sharing_properties
    bodies = [b"a", b"bb" * 300, bytes(range(256)), b"z"]
    prefix = b"7F0000010ABC12345678"
    body, ids = _native.encode_items_shared(3, b"".join(bodies), array("q", map(len, bodies)),
                                            b"TAGS\x01T\x02", prefix, 0xFFF)
    expected_ids = [prefix + b"%012X" % (0xFFF + i) for i in range(len(bodies))]
    assert ids.split(",") == [i.decode() for i in expected_ids]
    assert body == encode_items_sharing_properties(3, bodies, b"TAGS\x01T\x02", expected_ids)
    assert _native.encode_items_shared(0, b"", array("q"), b"", prefix, 1) == (b"", "")
    with pytest.raises(ValueError):
        _native.encode_items_shared(0, b"abc", array("q", [2]), b"", prefix, 1)  # lengths do not add up
