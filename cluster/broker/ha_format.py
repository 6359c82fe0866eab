"""The bytes of the HA channel between a master and its slaves (ZeroMQ frames). Pure: no I/O.

slave -> master: two frames, ``kind`` and ``offset``:
    kind   1 byte, ``R`` (report: "send from here": at start and after a gap) or ``A`` (ack)
    offset 8 bytes, big-endian unsigned: the slave's CommitLog end (its write_pos), then, from
           slaves that send it (24 bytes in all), the last epoch its log holds and where that
           epoch starts (two more u64): the master checks its log is a prefix of its own
master -> slave: three frames, ``D``, a 40-byte header, then the CommitLog bytes that start at
that physical offset (whole records, within one segment and one epoch). The header is five
big-endian u64: the physical ``offset``; the sender's ``master_epoch`` (its current term: a
slave refuses bytes from a master of another epoch than the controller named, which fences a
stale master); the ``epoch`` the bytes belong to and that epoch's ``epoch_start`` offset (the
slave records them in its epoch file); ``record_crc_from``, the offset from which every record of
the master's log carries the whole-record CRC property (``shm/record_crc_promise.py``), all ones
when it promises none (a 32-byte header, from a sender without the field, promises none too): the
slave makes the same promise before it appends, so its recovery can tell a record whose property
a torn write garbled from one written without it. Without a controller every epoch is 0.
master -> slave: two frames, ``T`` and a u64 ``offset`` (big-endian): "your log is longer than
mine; drop everything past this offset" (without a controller: a power cut took records from
the master that its slave had copied before they were flushed, never acknowledged).
On the master's ROUTER socket ZeroMQ puts the slave's identity frame first.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

REPORT = b"R"
ACK = b"A"
DATA = b"D"
TRUNCATE = b"T"
_OFFSET = struct.Struct(">Q")
_OFFSET_EPOCH = struct.Struct(">QQQ")
_DATA_HEADER = struct.Struct(">QQQQQ")
_DATA_HEADER_WITHOUT_PROMISE = struct.Struct(">QQQQ")
NO_PROMISE = (1 << 64) - 1


class DataHeader(NamedTuple):
    offset: int
    master_epoch: int = 0
    epoch: int = 0
    epoch_start: int = 0
    record_crc_from: int | None = None   # None: the master's records may lack the CRC property


class HAFrameError(ValueError):
    pass


class SlaveMessage(NamedTuple):
    kind: bytes
    offset: int
    last_epoch: int | None = None       # None: a slave that does not say (its log is taken as one epoch)
    last_epoch_start: int = 0


def slave_message(kind: bytes, offset: int, last_epoch: int | None = None, last_epoch_start: int = 0) -> list[bytes]:
    if kind not in (REPORT, ACK):
        raise HAFrameError(f"a slave sends R or A, not {kind!r}")
    if last_epoch is None:
        return [kind, _OFFSET.pack(offset)]
    return [kind, _OFFSET_EPOCH.pack(offset, last_epoch, last_epoch_start)]


def parse_slave_message(frames) -> SlaveMessage:
    """The message in the frames after the identity; HAFrameError when malformed."""
    if len(frames) != 2:
        raise HAFrameError(f"a slave message has 2 frames, not {len(frames)}")
    kind, offset = bytes(frames[0]), bytes(frames[1])
    if kind not in (REPORT, ACK):
        raise HAFrameError(f"unknown slave message kind {kind[:8]!r}")
    if len(offset) == _OFFSET_EPOCH.size:
        return SlaveMessage(kind, *_OFFSET_EPOCH.unpack(offset))
    if len(offset) != _OFFSET.size:
        raise HAFrameError(f"the offset frame has {len(offset)} bytes, not 8 or 24")
    return SlaveMessage(kind, _OFFSET.unpack(offset)[0])


def data_header(header: DataHeader) -> list[bytes]:
    """The first two frames of a DATA message; the caller appends the bytes (not copied here)."""
    offset, master_epoch, epoch, epoch_start, record_crc_from = header
    return [DATA, _DATA_HEADER.pack(offset, master_epoch, epoch, epoch_start,
                                    NO_PROMISE if record_crc_from is None else record_crc_from)]


def parse_data_header(kind: bytes, header: bytes) -> DataHeader:
    """The header of a DATA message from its first two frames; HAFrameError otherwise."""
    if bytes(kind) != DATA:
        raise HAFrameError(f"a master sends D, not {bytes(kind)[:8]!r}")
    header = bytes(header)
    if len(header) == _DATA_HEADER_WITHOUT_PROMISE.size:
        return DataHeader(*_DATA_HEADER_WITHOUT_PROMISE.unpack(header))
    if len(header) != _DATA_HEADER.size:
        raise HAFrameError(f"the data header frame has {len(header)} bytes, not {_DATA_HEADER.size}")
    *fields, record_crc_from = _DATA_HEADER.unpack(header)
    return DataHeader(*fields, None if record_crc_from == NO_PROMISE else record_crc_from)


def truncate_message(offset: int) -> list[bytes]:
    return [TRUNCATE, _OFFSET.pack(offset)]


def parse_truncate(frames) -> int | None:
    """The offset of a TRUNCATE message, None when the frames are another kind; HAFrameError
    when it is one but malformed."""
    if len(frames) != 2 or bytes(frames[0]) != TRUNCATE:
        return None
    offset = bytes(frames[1])
    if len(offset) != _OFFSET.size:
        raise HAFrameError(f"the offset frame has {len(offset)} bytes, not 8")
    return _OFFSET.unpack(offset)[0]
