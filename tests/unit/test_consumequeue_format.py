from rocketbox.cluster.shm import consumequeue_format as cqf


def test_entry_golden_bytes():
    raw = cqf.encode_entry(0x0102030405060708, 0x11223344, -2)
    assert raw == bytes.fromhex("0102030405060708" "11223344" "fffffffffffffffe")
    assert cqf.ENTRY_SIZE == 20
    assert cqf.decode_entry(raw) == (0x0102030405060708, 0x11223344, -2)
