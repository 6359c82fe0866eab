"""The C helper's byte layouts against the Python format modules: every offset, size and code
the helper uses (cluster/_native/helper.h) must equal the Python constant of the same field,
so a change on one side alone fails here instead of corrupting records."""

from rocketbox.cluster._native import _rocketbox_native
from rocketbox.cluster.message import batch_format, record_format
from rocketbox.cluster.shm import commitlog_format, consumequeue_format as cqf, indexfile_format as ixf
from rocketbox.cluster.message.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from rocketbox.cluster.message.sysflags import (SYSFLAG_TRANSACTION_MASK, SYSFLAG_TRANSACTION_PREPARED,
                                                SYSFLAG_TRANSACTION_ROLLBACK)
from rocketbox.cluster.shm.indexfile import LOOKUP_CHAIN_STEPS_MAX

lib = _rocketbox_native.lib


def _field_offsets(fmt: str) -> list[int]:
    """Byte offset of each field of a big-endian struct format without padding."""
    import struct
    offsets, at = [], 0
    for code in __import__("re").findall(r"\d*[a-zA-Z]", fmt.lstrip(">")):
        offsets.append(at)
        at += struct.calcsize(">" + code)
    return offsets


def test_record_layout():
    head = _field_offsets(record_format.HEAD.format)
    # TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTIMESTAMP BORNHOST
    # STORETIMESTAMP STOREHOST RECONSUMETIMES PREPAREDOFFSET BODYLEN
    c_offsets = [lib.OFF_TOTALSIZE, lib.OFF_MAGIC, lib.OFF_BODYCRC, lib.OFF_QUEUEID, lib.OFF_FLAG,
                 lib.OFF_QUEUEOFFSET, lib.OFF_PHYSICALOFFSET, lib.OFF_SYSFLAG, lib.OFF_BORNTIMESTAMP,
                 lib.OFF_BORNHOST, lib.OFF_STORETIMESTAMP, lib.OFF_STOREHOST, lib.OFF_RECONSUMETIMES,
                 lib.OFF_PREPAREDOFFSET, lib.OFF_BODYLEN]
    assert c_offsets == head
    assert (lib.OFF_TOTALSIZE, lib.OFF_MAGIC, lib.OFF_BODYCRC, lib.OFF_QUEUEID, lib.OFF_QUEUEOFFSET,
            lib.OFF_PHYSICALOFFSET, lib.OFF_SYSFLAG, lib.OFF_STORETIMESTAMP) == (
        record_format.OFF_TOTALSIZE, record_format.OFF_MAGIC, record_format.OFF_BODYCRC, record_format.OFF_QUEUEID,
        record_format.OFF_QUEUEOFFSET, record_format.OFF_PHYSICALOFFSET, record_format.OFF_SYSFLAG,
        record_format.OFF_STORETIMESTAMP)
    assert lib.RECORD_HEAD_BYTES == record_format.HEAD_SIZE
    assert lib.RECORD_FIXED_BYTES == record_format.FIXED_SIZE
    assert lib.BLANK_BYTES_MIN == commitlog_format.BLANK_SIZE_MIN
    assert lib.TOPIC_BYTES_MAX == record_format.TOPIC_LENGTH_MAX
    assert (lib.rb_record_magic(0), lib.rb_record_magic(1)) == (record_format.MAGIC, commitlog_format.BLANK_MAGIC)


def test_record_codes():
    assert chr(lib.PROPERTY_NAME_VALUE_SEPARATOR) == NAME_VALUE_SEPARATOR
    assert chr(lib.PROPERTY_SEPARATOR) == PROPERTY_SEPARATOR
    assert (lib.SYSFLAG_TRANSACTION_PREPARED, lib.SYSFLAG_TRANSACTION_ROLLBACK, lib.SYSFLAG_TRANSACTION_MASK) == (
        SYSFLAG_TRANSACTION_PREPARED, SYSFLAG_TRANSACTION_ROLLBACK, SYSFLAG_TRANSACTION_MASK)


def test_batch_item_layout():
    item = _field_offsets(batch_format.ITEM_HEAD.format)  # TOTALSIZE MAGIC BODYCRC FLAG BODYLEN
    assert (lib.ITEM_OFF_TOTALSIZE, lib.ITEM_OFF_FLAG, lib.ITEM_OFF_BODYLEN) == (item[0], item[3], item[4])
    assert lib.ITEM_OFF_BODY == batch_format.ITEM_HEAD.size
    assert lib.ITEM_FIXED_BYTES == batch_format.ITEM_FIXED_SIZE


def test_consumequeue_entry_layout():
    assert lib.CQ_ENTRY_BYTES == cqf.ENTRY_SIZE
    assert [lib.CQ_OFF_PHYS, lib.CQ_OFF_SIZE, lib.CQ_OFF_TAG] == _field_offsets(cqf.ENTRY.format) \
        == [cqf.OFF_PHYS, cqf.OFF_SIZE, cqf.OFF_TAG]


def test_indexfile_layout():
    assert (lib.IX_HEADER_BYTES, lib.IX_SLOT_BYTES, lib.IX_ENTRY_BYTES) == (
        ixf.HEADER_SIZE, ixf.SLOT_SIZE, ixf.ENTRY_SIZE)
    # beginTimestamp endTimestamp beginPhyoffset endPhyoffset hashSlotCount indexCount
    assert [lib.IX_OFF_BEGIN_TS, lib.IX_OFF_END_TS, lib.IX_OFF_BEGIN_PHYS, lib.IX_OFF_END_PHYS,
            lib.IX_OFF_SLOTS_USED, lib.IX_OFF_INDEX_COUNT] == _field_offsets(ixf.HEADER.format)
    # key hash, phys offset, time diff, previous entry
    assert [lib.IX_ENTRY_OFF_HASH, lib.IX_ENTRY_OFF_PHYS, lib.IX_ENTRY_OFF_TIME_DIFF,
            lib.IX_ENTRY_OFF_PREV] == _field_offsets(ixf.ENTRY.format)
    assert lib.IX_CHAIN_STEPS_MAX == LOOKUP_CHAIN_STEPS_MAX
