"""Golden bytes of the HA channel's frames (cluster/broker/ha_format.py)."""

import pytest

from rocketbox.cluster.broker import ha_format as f


def test_slave_messages_golden():
    assert f.slave_message(f.REPORT, 0) == [b"R", b"\x00" * 8]
    assert f.slave_message(f.ACK, 0x0102030405060708) == [b"A", bytes.fromhex("0102030405060708")]
    assert f.parse_slave_message([b"A", bytes.fromhex("0000000000001000")]) == (b"A", 4096, None, 0)
    # With the last epoch of its log and where it starts: the master checks the log is a prefix of its own.
    assert f.slave_message(f.REPORT, 0x2000, 3, 0x1000) == [b"R", bytes.fromhex(
        "0000000000002000" "0000000000000003" "0000000000001000")]
    assert f.parse_slave_message(f.slave_message(f.ACK, 0x2000, 3, 0x1000)) == (b"A", 0x2000, 3, 0x1000)


def test_data_header_golden():
    header = f.DataHeader(offset=1 << 30, master_epoch=3, epoch=2, epoch_start=0x1000, record_crc_from=0x800)
    golden = bytes.fromhex("0000000040000000" "0000000000000003" "0000000000000002" "0000000000001000"
                           "0000000000000800")
    assert f.data_header(header) == [b"D", golden]
    assert f.parse_data_header(b"D", golden) == header
    # No promise: all ones (0 is a promise from the log's start).
    assert f.data_header(f.DataHeader(5)) == [b"D", bytes.fromhex("0000000000000005") + b"\x00" * 24 + b"\xff" * 8]
    assert f.parse_data_header(b"D", f.data_header(f.DataHeader(5, record_crc_from=0))[1]).record_crc_from == 0
    # A sender without the field (32 bytes) promises nothing.
    assert f.parse_data_header(b"D", golden[:32]) == header._replace(record_crc_from=None)


@pytest.mark.parametrize("frames", [[b"A"], [b"A", b"\x00" * 7], [b"X", b"\x00" * 8], [b"R", b"\x00" * 9],
                                    [b"R", b"\x00" * 16],
                                    [b"A", b"\x00" * 8, b"extra"]])
def test_malformed_slave_messages_are_refused(frames):
    with pytest.raises(f.HAFrameError):
        f.parse_slave_message(frames)


def test_malformed_data_headers_are_refused():
    with pytest.raises(f.HAFrameError):
        f.parse_data_header(b"A", b"\x00" * 32)
    with pytest.raises(f.HAFrameError):
        f.parse_data_header(b"D", b"\x00" * 8)
    with pytest.raises(f.HAFrameError):
        f.parse_data_header(b"D", b"\x00" * 48)
    with pytest.raises(f.HAFrameError):
        f.slave_message(b"D", 1)


def test_truncate_message_golden():
    assert f.truncate_message(0x10000) == [b"T", bytes.fromhex("0000000000010000")]
    assert f.parse_truncate([b"T", bytes.fromhex("0000000000010000")]) == 0x10000
    assert f.parse_truncate([b"D", b"\x00" * 8]) is None          # another kind: not ours to judge
    with pytest.raises(f.HAFrameError):
        f.parse_truncate([b"T", b"\x00" * 4])
