"""The bytes of ZeroMQ's wire protocol (ZMTP 3.1, RFC 37) that a client with the NULL mechanism
speaks: the greeting, the READY handshake command, message frames and the PING/PONG heartbeat.
Pure: no I/O (zmtp_client.py owns the sockets).

Why speak it ourselves: a libzmq socket hands every message to libzmq's own I/O thread, a thread
wake-up each way on top of the caller's; on a small VM that is most of one sync call's time
(perf/RESULTS.md, "The native door as a user meets it"). A client that writes these bytes to its
own TCP socket talks to the same ROUTER door with none of them.

A frame: one flags byte (MORE 0x01, LONG 0x02: an 8-byte size follows instead of 1, COMMAND 0x04),
the size in network order, the data. A command's data: its name's length (1 byte), its name, its
body. READY's body is properties: a name's length (1 byte), the name, the value's length (4 bytes,
network order), the value. PING's body: a time-to-live (2 bytes) and up to 16 bytes of context,
which PONG sends back.
"""

from __future__ import annotations

import struct

GREETING_BYTES = 64
SIGNATURE = b"\xff" + b"\x00" * 8 + b"\x7f"
VERSION = b"\x03\x01"
MECHANISM_BYTES = 20
NULL_MECHANISM = b"NULL"

FLAG_MORE = 0x01
FLAG_LONG = 0x02
FLAG_COMMAND = 0x04
SHORT_SIZE_MAX = 255
PING_CONTEXT_MAX = 16

_LONG_SIZE = struct.Struct(">Q")
_PROPERTY_SIZE = struct.Struct(">I")


class ZmtpError(Exception):
    """The peer's bytes are not ZMTP 3.x as this client speaks it."""


def greeting(mechanism: bytes = NULL_MECHANISM, as_server: bool = False) -> bytes:
    """Our 64-byte greeting: signature, version 3.1, the mechanism, as-server, filler."""
    return SIGNATURE + VERSION + mechanism.ljust(MECHANISM_BYTES, b"\x00") + (b"\x01" if as_server else b"\x00") \
        + b"\x00" * 31


def parse_greeting(data: bytes) -> tuple[tuple[int, int], bytes]:
    """((major, minor), mechanism) of a peer's 64-byte greeting; ZmtpError when it is not ZMTP 3.x."""
    if len(data) != GREETING_BYTES or data[0] != 0xFF or not data[9] & 0x01:
        raise ZmtpError("the peer's greeting is not ZMTP's")
    major, minor = data[10], data[11]
    if major < 3:
        raise ZmtpError(f"the peer speaks ZMTP {major}.{minor}, not 3.x")
    return (major, minor), data[12:12 + MECHANISM_BYTES].rstrip(b"\x00")


def frame(data: bytes, more: bool = False, command: bool = False) -> bytes:
    flags = (FLAG_MORE if more else 0) | (FLAG_COMMAND if command else 0)
    if len(data) > SHORT_SIZE_MAX:
        return bytes((flags | FLAG_LONG,)) + _LONG_SIZE.pack(len(data)) + data
    return bytes((flags, len(data))) + data


def message(parts) -> bytes:
    """A message of one or more parts (bytes-like) as the frames that carry it."""
    last = len(parts) - 1
    return b"".join(frame(bytes(part), i < last) for i, part in enumerate(parts))


def command(name: bytes, body: bytes = b"") -> bytes:
    return frame(bytes((len(name),)) + name + body, command=True)


def ready(socket_type: bytes, routing_id: bytes = b"") -> bytes:
    """READY with Socket-Type and (as libzmq's DEALER sends it) Identity."""
    return command(b"READY", _property(b"Socket-Type", socket_type) + _property(b"Identity", routing_id))


def _property(name: bytes, value: bytes) -> bytes:
    return bytes((len(name),)) + name + _PROPERTY_SIZE.pack(len(value)) + value


def parse_command(data: bytes) -> tuple[bytes, bytes]:
    """(name, body) of a command frame's data."""
    if not data or len(data) < 1 + data[0]:
        raise ZmtpError("a command frame too short for its name")
    return data[1:1 + data[0]], data[1 + data[0]:]


def parse_properties(body: bytes) -> dict[bytes, bytes]:
    """READY's (or another metadata command's) properties."""
    out, i = {}, 0
    while i < len(body):
        size = body[i]
        name_end = i + 1 + size
        if name_end + 4 > len(body):
            raise ZmtpError("a property cut short")
        (value_size,) = _PROPERTY_SIZE.unpack_from(body, name_end)
        value_end = name_end + 4 + value_size
        if value_end > len(body):
            raise ZmtpError("a property value cut short")
        out[body[i + 1:name_end]] = body[name_end + 4:value_end]
        i = value_end
    return out


def error_reason(body: bytes) -> str:
    """The reason an ERROR command's body carries (its length in the first byte)."""
    return body[1:1 + body[0]].decode(errors="replace") if body else ""


def pong(ping_body: bytes) -> bytes:
    """The answer to a PING: its context (after the 2-byte time-to-live) sent back."""
    if len(ping_body) < 2 or len(ping_body) - 2 > PING_CONTEXT_MAX:
        raise ZmtpError("a PING of the wrong size")
    return command(b"PONG", ping_body[2:])


class FrameReader:
    """Frames out of a byte stream, fed as it arrives: each whole frame as (flags, data)."""

    def __init__(self, frame_bytes_max: int):
        self.frame_bytes_max = frame_bytes_max
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def __len__(self) -> int:
        return len(self._buffer)

    def take(self, count: int) -> bytes | None:
        """The next ``count`` bytes as they are (the greeting, which is not framed), or None until they came."""
        if len(self._buffer) < count:
            return None
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        return data

    def next_frame(self) -> tuple[int, bytes] | None:
        """The next whole frame, or None until more bytes come; ZmtpError past the size bound."""
        buffer = self._buffer
        if len(buffer) < 2:
            return None
        flags = buffer[0]
        if flags & ~(FLAG_MORE | FLAG_LONG | FLAG_COMMAND):
            raise ZmtpError(f"a frame with unknown flags {flags:#x}")
        if flags & FLAG_LONG:
            if len(buffer) < 9:
                return None
            (size,) = _LONG_SIZE.unpack_from(buffer, 1)
            start = 9
        else:
            size, start = buffer[1], 2
        if size > self.frame_bytes_max:
            raise ZmtpError(f"a frame of {size} bytes, over the {self.frame_bytes_max}-byte bound")
        end = start + size
        if len(buffer) < end:
            return None
        data = bytes(buffer[start:end])
        del buffer[:end]
        return flags, data
