"""A message's sysFlag bits (RocketMQ MessageSysFlag). Pure: no I/O.

Vocabulary, not layout: the producer sets them, the consumer reads them and the store keeps them as
sent in the record's SYSFLAG field. Bit 0 says the body is compressed and bits 8-10 with what
(CompressionType: 1 LZ4, 2 ZSTD, 3 ZLIB; 0, from clients before 4.9.7, reads as ZLIB;
``message/compression.py`` inflates); bits 2-3 are the transaction state of the message.
"""

from __future__ import annotations

SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_TRANSACTION_COMMIT = 0x8
SYSFLAG_TRANSACTION_ROLLBACK = 0xC
SYSFLAG_TRANSACTION_MASK = 0xC
SYSFLAG_COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_TYPE_SHIFT = 8
COMPRESSION_LZ4, COMPRESSION_ZSTD, COMPRESSION_ZLIB = 1, 2, 3
COMPRESSION_NAMES = {0: "ZLIB", COMPRESSION_LZ4: "LZ4", COMPRESSION_ZSTD: "ZSTD", COMPRESSION_ZLIB: "ZLIB"}


def compression_type(sys_flag: int) -> int:
    """The compression type of ``sys_flag``'s bits 8-10 (0 for a flag written before types existed)."""
    return (sys_flag & SYSFLAG_COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT
