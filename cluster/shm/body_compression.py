"""A compressed message body: how sysFlag names its compression, and how to inflate it.

Pure: no I/O. RocketMQ's MessageSysFlag: bit 0 (COMPRESSED_FLAG) says the stored body is
compressed; bits 8-10 (COMPRESSION_TYPE_COMPARATOR 0x700) say with what (CompressionType): 1 LZ4,
2 ZSTD, 3 ZLIB, and 0 (clients before 4.9.7, RocketMQ's C++ client, ours) reads as ZLIB. The Java
client 4.9.8 compresses a body over 4 KiB with ZLIB by default (sysFlag 0x301 = 769), or LZ4 / ZSTD
when ``rocketmq.message.compressType`` says so; each writes its library's frame format (lz4-java's
LZ4FrameOutputStream, zstd-jni's ZstdOutputStream, java.util.zip's Deflater with a zlib header).
The broker stores the body and the bits as sent; every reader inflates here.
"""

from __future__ import annotations

import zlib

import lz4.frame
import zstandard

COMPRESSED = 0x1
TYPE_MASK = 0x700
TYPE_SHIFT = 8
LZ4, ZSTD, ZLIB = 1, 2, 3
TYPE_NAMES = {0: "ZLIB", LZ4: "LZ4", ZSTD: "ZSTD", ZLIB: "ZLIB"}


def compression_type(sys_flag: int) -> int:
    """The compression type of ``sys_flag``'s bits 8-10 (0 for a flag written before types existed)."""
    return (sys_flag & TYPE_MASK) >> TYPE_SHIFT


def inflate(body: bytes, sys_flag: int) -> bytes:
    """The body as its producer gave it; ``body`` itself when ``sys_flag`` says it is not compressed.

    ValueError when it is flagged compressed and does not inflate with the type the flag names, or
    the type is one RocketMQ does not know (4-7)."""
    if not sys_flag & COMPRESSED:
        return body
    kind = compression_type(sys_flag)
    try:
        if kind in (0, ZLIB):
            return zlib.decompress(body)
        if kind == LZ4:
            return lz4.frame.decompress(body)
        if kind == ZSTD:
            # A stream may not state its content size up front: decompress by reading it through.
            return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    except (zlib.error, RuntimeError, zstandard.ZstdError) as exc:
        raise ValueError(f"the body is flagged {TYPE_NAMES[kind]}-compressed but does not inflate: {exc}") from None
    raise ValueError(f"sysFlag {sys_flag:#x} names compression type {kind}, which is not one of RocketMQ's "
                     f"(1 LZ4, 2 ZSTD, 3 ZLIB)")
