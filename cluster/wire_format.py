"""Bytes on the wire: one RPC command as ZeroMQ frames. The only module that packs them.

A command travels as two ZeroMQ frames, ``[header, body]``. The header is
RocketMQ's own binary header serialisation (``RocketMQSerializable``, serializeType 1),
with one change on our ZeroMQ door: the code is 4 bytes, not 2, because RocketMQ 5's pop
codes (200050...) do not fit RocketMQ's int16 (Java's ``(short) code`` wraps them). The
remoting door's serializeType 1 asks for RocketMQ's exact layout (``rocketmq_layout``).
The body is opaque bytes (records, JSON, a batch).

Header, big-endian:

| bytes | field |
| --- | --- |
| 4 (2) | code (int32; int16 in RocketMQ's layout): request code, or response code in a response |
| 1 | language (LanguageCode: JAVA=0, CPP=1, PYTHON=3, ...) |
| 2 | version (int16) |
| 4 | opaque (int32): request id, echoed by the response |
| 4 | flag (int32): bit 0 response, bit 1 one-way |
| 4 + n | remark: int32 length (0 = none) + UTF-8 |
| 4 + m | extFields: int32 total length, then { int16 key length, key, int32 value length, value }* |

Pure: no I/O.
"""

from __future__ import annotations

import itertools
import struct
from dataclasses import dataclass, field

LANGUAGE_JAVA = 0
LANGUAGE_CPP = 1
LANGUAGE_PYTHON = 3
# Our MQVersion ordinal: RocketMQ V4_9_4 (401) and later speak standard JSON routes.
VERSION = 401

FLAG_RESPONSE = 0x1
FLAG_ONEWAY = 0x2

DOOR_NATIVE = ""
DOOR_REMOTING = "remoting"

_FIXED = struct.Struct(">iBhii")  # code, language, version, opaque, flag
NATIVE_FIXED = _FIXED   # what a reader that only peeks at a native header unpacks (fast_failure.py)
_FIXED_ROCKETMQ = struct.Struct(">hBhii")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">H")
HEADER_BYTES_MAX = 1 << 20


_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """A fresh request id of this process (RocketMQ's opaque: 31 bits, never negative)."""
    return next(_opaque_counter) & 0x7FFFFFFF


class FrameError(ValueError):
    """A header that does not decode: answered with an error, never a crash."""


@dataclass(slots=True)
class Command:
    """One request or response, independent of how it is framed."""

    code: int
    fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    opaque: int = 0
    flag: int = 0
    remark: str = ""
    language: int = LANGUAGE_PYTHON
    version: int = VERSION
    # Where the request came from (IPv4 text) and its TCP port (0 where the door does not know it:
    # ZeroMQ's), set by the transport; never on the wire.
    peer_address: str = ""
    peer_port: int = 0
    # The door it came through ("" for the native ZeroMQ one, DOOR_REMOTING for RocketMQ's TCP
    # protocol): a NameServer answers with the addresses of that door. Never on the wire.
    door: str = ""
    # The client's CURVE public key (z85) on a CURVE-secured native door (acl/zap.py); never on the wire.
    curve_key: str = ""
    # Access control's check for what a handler finds only in the store (a record's real topic):
    # ``access.require(needed)`` raises the refusal, ``access.allows(needed)`` tells (acl/records.py).
    # Set by acl/guard.py on an account's request; None without access control or for the cluster's
    # own processes. Never on the wire.
    access: object = None
    # Set when access control let the request through (acl/guard.py): with access control, what
    # proves a remoting connection (remoting_admission.py). Never on the wire.
    access_granted: bool = False
    # The read this request came in with others (``request_dispatch.ReadPass``): a handler may
    # defer work to the pass's end, before the answers are written. None when it came alone.
    read_pass: object = None

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    def response(self, code: int, fields: dict[str, str] | None = None, body: bytes = b"",
                 remark: str = "") -> "Command":
        """The answer to this request: same opaque, response flag set."""
        return Command(code, fields or {}, body, self.opaque, FLAG_RESPONSE, remark)


def encode_header(cmd: Command, rocketmq_layout: bool = False) -> bytes:
    fixed = _FIXED_ROCKETMQ if rocketmq_layout else _FIXED
    try:
        parts = [fixed.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)]
    except struct.error:
        raise FrameError(f"code {cmd.code} does not fit RocketMQ's int16 code field") from None
    remark = cmd.remark.encode() if cmd.remark else b""
    parts.append(_INT.pack(len(remark)))
    parts.append(remark)
    ext = []
    for key, value in cmd.fields.items():
        k = key.encode()
        v = str(value).encode()
        ext.append(_SHORT.pack(len(k)))
        ext.append(k)
        ext.append(_INT.pack(len(v)))
        ext.append(v)
    ext_bytes = b"".join(ext)
    parts.append(_INT.pack(len(ext_bytes)))
    parts.append(ext_bytes)
    return b"".join(parts)


def decode_header(raw: bytes | memoryview, rocketmq_layout: bool = False) -> Command:
    """The command a header frame holds (body left empty); FrameError when malformed."""
    fixed = _FIXED_ROCKETMQ if rocketmq_layout else _FIXED
    if type(raw) is not bytes:
        raw = bytes(raw)
    n = len(raw)
    if n > HEADER_BYTES_MAX:
        raise FrameError(f"header of {n} bytes exceeds {HEADER_BYTES_MAX}")
    if n < fixed.size + 8:
        raise FrameError(f"header of {n} bytes is shorter than the {fixed.size + 8}-byte minimum")
    code, language, version, opaque, flag = fixed.unpack_from(raw, 0)
    p = fixed.size
    (remark_len,) = _INT.unpack_from(raw, p)
    p += 4
    if remark_len < 0 or p + remark_len + 4 > n:
        raise FrameError(f"remark length {remark_len} runs past the header")
    try:
        remark = raw[p:p + remark_len].decode()
    except UnicodeDecodeError as exc:
        raise FrameError(f"remark is not UTF-8: {exc}") from None
    p += remark_len
    (ext_len,) = _INT.unpack_from(raw, p)
    p += 4
    if ext_len < 0 or p + ext_len != n:
        raise FrameError(f"extFields length {ext_len} does not match the {n - p} bytes left")
    fields: dict[str, str] = {}
    try:
        while p < n:
            if p + 2 > n:
                raise FrameError("truncated extFields key length")
            (klen,) = _SHORT.unpack_from(raw, p)
            p += 2
            key = raw[p:p + klen].decode()
            p += klen
            if p + 4 > n:
                raise FrameError("truncated extFields value length")
            (vlen,) = _INT.unpack_from(raw, p)
            p += 4
            if vlen < 0 or p + vlen > n:
                raise FrameError(f"extFields value of {vlen} bytes runs past the header")
            fields[key] = raw[p:p + vlen].decode()
            p += vlen
    except UnicodeDecodeError as exc:
        raise FrameError(f"extFields are not UTF-8: {exc}") from None
    return Command(code, fields, b"", opaque, flag, remark, language, version)


def to_frames(cmd: Command) -> list[bytes]:
    return [encode_header(cmd), cmd.body]


def from_frames(frames: list) -> Command:
    """A command from ``[header, body]`` (a missing body frame means an empty body)."""
    if not frames or len(frames) > 2:
        raise FrameError(f"expected 1 or 2 frames (header, body), got {len(frames)}")
    header = frames[0]
    cmd = decode_header(header.bytes if hasattr(header, "bytes") else header)
    if len(frames) == 2:
        body = frames[1]
        cmd.body = body.bytes if hasattr(body, "bytes") else bytes(body)
    return cmd
