"""What only a CommitLog file holds besides its records: the end-of-file blank, and what a position
of a segment can hold (a record or the blank). The record itself, as stored and as delivered, is
``cluster/message/record_format.py`` (the client and the proxy read it too); this module is the
store's. Pure: no I/O.

The end-of-file blank, big-endian: TOTALSIZE (= bytes left in the file, 4) + BLANK_MAGIC (4); the
rest of the file after it is not read, and the next record starts in the next file. A file always
keeps room for it (``BLANK_SIZE_MIN``).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from rocketbox.cluster.message import record_format

BLANK_MAGIC = 0xCBD43194
# BLANK_MAGIC as the signed int the struct yields.
BLANK_MAGIC_SIGNED = BLANK_MAGIC - (1 << 32)
BLANK_HEAD = struct.Struct(">ii")
BLANK_SIZE_MIN = BLANK_HEAD.size


class EndOfFile(NamedTuple):
    """The blank that fills the rest of a file; the next record starts in the next file."""

    total_size: int


def encode_blank_into(buf, pos: int, remaining: int) -> None:
    """Mark the rest of a file, ``remaining`` bytes from ``pos``, as an end-of-file blank."""
    BLANK_HEAD.pack_into(buf, pos, remaining, BLANK_MAGIC_SIGNED)


def decode_segment_at(buf, pos: int, limit: int | None = None, *, check_crc: bool = True):
    """What a CommitLog segment holds at ``buf[pos:]``, reading no further than ``limit``: ``EndOfFile``
    for the blank, else what ``record_format.decode_at`` reads there (``Record``, ``Incomplete``,
    ``Corrupt``)."""
    item = record_format.decode_at(buf, pos, limit, check_crc=check_crc)
    if type(item) is not record_format.Corrupt:
        return item
    # Read as a record, a blank is refused for its magic: records are many and a blank ends a file,
    # so a record costs no second look.
    end = len(buf) if limit is None else min(limit, len(buf))
    if end - pos >= BLANK_HEAD.size:
        total_size, magic = BLANK_HEAD.unpack_from(buf, pos)
        if magic == BLANK_MAGIC_SIGNED:
            if total_size < BLANK_SIZE_MIN:
                return record_format.Corrupt(f"blank of size {total_size}")
            return EndOfFile(total_size)
    return item


def looks_torn(rec: record_format.Record) -> bool:
    """True when a decoded record is probably a torn write (recovery's extra check).

    BODYCRC covers the body only, so a record without the whole-record CRC property whose
    topic or properties were cut short (the rest of a preallocated file is zeros) still
    decodes. Its tail tells:
    properties, when present, end with the \\x02 that closes every pair, and a topic
    (non-empty, [%|a-zA-Z0-9_-]) never ends in NUL. Appends are sequential copies, so
    a torn record ends in zeros.
    """
    if rec.properties_raw:
        return rec.properties_raw[-1] == 0
    return not rec.topic or rec.topic[-1] == "\x00"


def unusable_topic(topic: str) -> bool:
    """True for a topic no broker writes and no ConsumeQueue directory can be named after: empty,
    ``.``, ``..``, or holding ``/`` or NUL. Only damaged bytes make one (in a record without the
    whole-record CRC property, whose body CRC covers the body only):
    dispatched, NUL made ``os.path`` raise and ``/`` put the queue's files outside the store."""
    return topic in ("", ".", "..") or "/" in topic or "\x00" in topic
