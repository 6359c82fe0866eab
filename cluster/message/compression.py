"""A compressed message body: how to inflate it as its sysFlag names its compression.

Pure: no I/O. The bits are ``message/sysflags.py``'s (RocketMQ MessageSysFlag): bit 0 says the
stored body is compressed, bits 8-10 with what (1 LZ4, 2 ZSTD, 3 ZLIB, and 0 from clients before
4.9.7, RocketMQ's C++ client, ours, reads as ZLIB). The Java
client 4.9.8 compresses a body over 4 KiB with ZLIB by default (sysFlag 0x301 = 769), or LZ4 / ZSTD
when ``rocketmq.message.compressType`` says so; each writes its library's frame format (lz4-java's
LZ4FrameOutputStream, zstd-jni's ZstdOutputStream, java.util.zip's Deflater with a zlib header).
The broker stores the body and the bits as sent; every reader inflates here.
"""

from __future__ import annotations

import zlib

import lz4.frame
import zstandard

from rocketbox.cluster.message.sysflags import (COMPRESSION_LZ4 as LZ4, COMPRESSION_NAMES, COMPRESSION_ZLIB as ZLIB,
                                                COMPRESSION_ZSTD as ZSTD, SYSFLAG_COMPRESSED, compression_type)


def inflate(body: bytes, sys_flag: int) -> bytes:
    """The body as its producer gave it; ``body`` itself when ``sys_flag`` says it is not compressed.

    ValueError when it is flagged compressed and does not inflate with the type the flag names, or
    the type is one RocketMQ does not know (4-7)."""
    if not sys_flag & SYSFLAG_COMPRESSED:
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
        raise ValueError(f"the body is flagged {COMPRESSION_NAMES[kind]}-compressed but does not inflate: {exc}") from None
    raise ValueError(f"sysFlag {sys_flag:#x} names compression type {kind}, which is not one of RocketMQ's "
                     f"(1 LZ4, 2 ZSTD, 3 ZLIB)")
