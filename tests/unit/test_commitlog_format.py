"""What only a CommitLog file holds besides records (cluster/shm/commitlog_format.py): the end-of-file
blank's bytes, and what a position of a segment reads as."""

from rocketbox.cluster.message import record_format
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.shm import commitlog_format as fmt

RECORD = record_format.encode(
    queue_id=1, flag=0, queue_offset=5, phys_offset=16, sys_flag=0, born_timestamp_ms=1,
    born_host=pack_host("192.168.1.2", 5555), store_timestamp_ms=2, store_host=pack_host("10.0.0.1", 10911),
    reconsume_times=0, prepared_transaction_offset=0, body=b"b", topic=b"T", properties=b"")


def test_blank_golden_bytes_and_round_trip():
    buf = bytearray(64)
    fmt.encode_blank_into(buf, 16, 48)
    assert bytes(buf[16:24]) == bytes.fromhex("00000030cbd43194")
    assert fmt.decode_segment_at(buf, 16) == fmt.EndOfFile(48)


def test_a_blank_smaller_than_its_own_head_is_corrupt():
    assert fmt.decode_segment_at(bytes.fromhex("00000004cbd43194"), 0) == record_format.Corrupt("blank of size 4")


def test_a_segment_position_reads_a_record_zeros_or_a_blank():
    segment = bytearray(16) + RECORD + bytes(8)
    assert fmt.decode_segment_at(segment, 16) == record_format.decode_at(segment, 16)
    assert type(fmt.decode_segment_at(segment, 16)) is record_format.Record
    assert fmt.decode_segment_at(segment, 0) == record_format.Incomplete()
    # A blank cut short by the limit is read as far as the limit allows: not yet a blank.
    fmt.encode_blank_into(segment, 16 + len(RECORD), 8)
    assert fmt.decode_segment_at(segment, 16 + len(RECORD)) == fmt.EndOfFile(8)
    assert fmt.decode_segment_at(segment, 16 + len(RECORD), 16 + len(RECORD) + 4) == record_format.Incomplete()
