"""Golden bytes of the HA channel's frames (cluster/broker/ha_format.py)."""

import pytest

from cluster.broker import ha_format as f


def test_slave_messages_golden():
    assert f.slave_message(f.REPORT, 0) == [b"R", b"\x00" * 8]
    assert f.slave_message(f.ACK, 0x0102030405060708) == [b"A", bytes.fromhex("0102030405060708")]
    assert f.parse_slave_message([b"A", bytes.fromhex("0000000000001000")]) == (b"A", 4096)


def test_data_header_golden():
    assert f.data_header(1 << 30) == [b"D", bytes.fromhex("0000000040000000")]
    assert f.parse_data_header(b"D", bytes.fromhex("0000000040000000")) == 1 << 30


@pytest.mark.parametrize("frames", [[b"A"], [b"A", b"\x00" * 7], [b"X", b"\x00" * 8], [b"R", b"\x00" * 9],
                                    [b"A", b"\x00" * 8, b"extra"]])
def test_malformed_slave_messages_are_refused(frames):
    with pytest.raises(f.HAFrameError):
        f.parse_slave_message(frames)


def test_malformed_data_headers_are_refused():
    with pytest.raises(f.HAFrameError):
        f.parse_data_header(b"A", b"\x00" * 8)
    with pytest.raises(f.HAFrameError):
        f.parse_data_header(b"D", b"\x00" * 4)
    with pytest.raises(f.HAFrameError):
        f.slave_message(b"D", 1)
