from rocketbox.cluster.shm import indexfile_format as ixf


def test_header_golden_bytes():
    h = ixf.IndexHeader(1_700_000_000_000, 1_700_000_005_000, 0x100, 0x2000, 3, 7)
    raw = ixf.encode_header(h)
    assert len(raw) == ixf.HEADER_SIZE == 40
    assert raw == bytes.fromhex(
        "0000018bcfe56800" "0000018bcfe57b88" "0000000000000100" "0000000000002000"
        "00000003" "00000007")
    assert ixf.decode_header(raw) == h
    assert h.entries_used == 6


def test_entry_golden_bytes():
    e = ixf.IndexEntry(key_hash=0x7FFFFFFF, phys_offset=0x0A0B, time_diff_s=5, prev_index=2)
    raw = ixf.encode_entry(e)
    assert raw == bytes.fromhex("7fffffff" "0000000000000a0b" "00000005" "00000002")
    assert ixf.decode_entry(raw, 0) == e


def test_positions_and_sizes():
    assert ixf.file_size_bytes(5_000_000, 20_000_000) == 420_000_040
    assert ixf.slot_position(0) == 40
    assert ixf.slot_position(3) == 52
    assert ixf.entry_position(64, 1) == 40 + 64 * 4 + 20


def test_key_hash_is_non_negative_and_min_int_is_zero():
    assert ixf.key_hash("polygenelubricants") == 0  # hashCode is -2^31
    assert ixf.key_hash("hello") == 99162322
    negative = "zzzzzzzzzz"
    assert ixf.key_hash(negative) >= 0
    assert ixf.index_key("T", "k1") == "T#k1"


def test_time_diff_clamps():
    assert ixf.time_diff_seconds(5_000, 0) == 0
    assert ixf.time_diff_seconds(1_000, 5_000) == 0
    assert ixf.time_diff_seconds(7_999, 5_000) == 2
    assert ixf.time_diff_seconds(1 << 60, 1) == ixf.INT32_MAX
