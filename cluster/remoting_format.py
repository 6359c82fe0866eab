"""Bytes on RocketMQ's remoting TCP connections: the only module that frames them. Pure: no I/O.

A frame (all integers big-endian; ``../shared/rocketmq-protocol.md`` §1):

| bytes | field |
| --- | --- |
| 4 | length: everything after this word (4 + header length + body length) |
| 1 | serialize type: 0 JSON, 1 ROCKETMQ (binary, ``wire_format.encode_header``) |
| 3 | header length |
| H | header |
| rest | body |

The JSON header is ``{"code", "language", "version", "opaque", "flag", "remark", "extFields"}``.
Typing rules the real clients depend on (§1.3): a response's extFields values are always JSON
strings (the C++ client ignores any other type), and ``code``/``opaque``/``flag``/``version`` are
integers; a request's extFields may hold numbers and booleans (the C++ client sends ``queueId``,
``sysFlag`` ... as numbers), which become the strings the handlers read. A response goes back
in the serialize type of its request: the C++ client only reads JSON.
"""

from __future__ import annotations

import struct

import orjson

from rocketbox.cluster.wire_format import (HEADER_BYTES_MAX, LANGUAGE_PYTHON, Command, FrameError, decode_header,
                                           encode_header)

SERIALIZE_JSON = 0
SERIALIZE_ROCKETMQ = 1
SERIALIZE_TYPES = (SERIALIZE_JSON, SERIALIZE_ROCKETMQ)

# RocketMQ's LanguageCode, in ordinal order (the binary header carries the ordinal, JSON the name).
LANGUAGES = ("JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
             "OMS", "RUST")
_LANGUAGE_ORDINAL = {name: i for i, name in enumerate(LANGUAGES)}

_PREFIX = struct.Struct(">ii")   # length, (serialize type << 24) | header length
PREFIX_BYTES = _PREFIX.size
HEADER_LENGTH_MASK = 0xFFFFFF
# Java's NettyDecoder default (com.rocketmq.remoting.frameMaxLength).
FRAME_BYTES_MAX_DEFAULT = 16 * 1024 * 1024
_INT32 = (-(1 << 31), (1 << 31) - 1)


def encode_json_header(cmd: Command) -> bytes:
    fields = cmd.fields
    try:   # every value a string already (the usual case) is one C call to find out
        "".join(fields.values())
    except TypeError:
        fields = {key: str(value) for key, value in fields.items()}
    header = {
        "code": cmd.code,
        "extFields": fields,
        "flag": cmd.flag,
        "language": LANGUAGES[cmd.language] if 0 <= cmd.language < len(LANGUAGES) else "OTHER",
        "opaque": cmd.opaque,
        "remark": cmd.remark or None,
        "serializeTypeCurrentRPC": "JSON",
        "version": cmd.version,
    }
    try:
        return orjson.dumps(header)
    except TypeError as exc:   # a str orjson will not encode (a lone surrogate), or a non-str key
        raise FrameError(f"header cannot be encoded as JSON: {exc}") from None


def _all_str(values: dict) -> bool:
    """Whether every value is a str: joining them is one C call that raises on anything else."""
    try:
        "".join(values.values())
        return True
    except TypeError:
        return False


def _header_int(header: dict, name: str, default: int | None = None) -> int:
    value = header.get(name, default)
    if type(value) is int and _INT32[0] <= value <= _INT32[1]:
        return value
    if value is None:
        raise FrameError(f"header field {name!r} is missing")
    if isinstance(value, str) and value.lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not _INT32[0] <= value <= _INT32[1]:
        raise FrameError(f"header field {name!r} is not a 32-bit integer: {str(value)[:40]!r}")
    return value


def _ext_value(key: str, value) -> str:
    if isinstance(value, bool):          # before int: a bool is an int to Python
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    raise FrameError(f"extFields[{key[:40]!r}] is a {type(value).__name__}, not a string or number")


def decode_json_header(raw: bytes | memoryview) -> Command:
    """The command a JSON header holds (body left empty); FrameError when it is not one."""
    try:
        # orjson: a fifth of json's time for a send's header, and deep nesting is a decode error,
        # not a RecursionError out of the door's read.
        header = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FrameError(f"header is not JSON: {exc}") from None
    try:   # as RocketMQ's clients write a request: every field there, extFields all strings, no remark
        code, opaque, flag, version = header["code"], header["opaque"], header["flag"], header["version"]
        language, fields = _LANGUAGE_ORDINAL[header["language"]], header["extFields"]
        if type(code) is type(opaque) is type(flag) is type(version) is int and type(fields) is dict \
                and header.get("remark") is None and _INT32[0] <= code <= _INT32[1] \
                and _INT32[0] <= opaque <= _INT32[1] and _INT32[0] <= flag <= _INT32[1] \
                and _INT32[0] <= version <= _INT32[1]:
            "".join(fields.values())   # TypeError unless every value is a str
            return Command(code, fields, b"", opaque, flag, "", language, version)
    except (KeyError, TypeError):   # the checks below say what is wrong, or read what is unusual
        pass
    return _decode_json_object(header)


def _decode_json_object(header) -> Command:
    if not isinstance(header, dict):
        raise FrameError(f"header is a JSON {type(header).__name__}, not an object")
    ext = header.get("extFields") or {}
    if not isinstance(ext, dict):
        raise FrameError(f"extFields is a JSON {type(ext).__name__}, not an object")
    fields = ext if _all_str(ext) else \
        {str(key): _ext_value(str(key), value) for key, value in ext.items() if value is not None}
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise FrameError("remark is not a string")
    language = header.get("language", LANGUAGES[LANGUAGE_PYTHON])
    language = _LANGUAGE_ORDINAL.get(language, _LANGUAGE_ORDINAL["OTHER"]) if isinstance(language, str) \
        else _header_int(header, "language")
    return Command(_header_int(header, "code"), fields, b"", _header_int(header, "opaque", 0),
                   _header_int(header, "flag", 0), remark or "", language, _header_int(header, "version", 0))


def encode_frame(cmd: Command, serialize_type: int = SERIALIZE_JSON) -> bytes:
    if serialize_type == SERIALIZE_JSON:
        header = encode_json_header(cmd)
    else:
        header = encode_header(cmd, rocketmq_layout=True)
    return b"".join((_PREFIX.pack(4 + len(header) + len(cmd.body), (serialize_type << 24) | len(header)),
                     header, cmd.body))


def decode_frame_payload(payload: bytes | memoryview) -> tuple[Command, int]:
    """``(command, serialize type)`` from one frame without its length word."""
    if len(payload) < 4:
        raise FrameError(f"frame of {len(payload)} bytes has no header length")
    (word,) = struct.unpack_from(">I", payload, 0)
    serialize_type, header_len = word >> 24, word & HEADER_LENGTH_MASK
    if serialize_type not in SERIALIZE_TYPES:
        raise FrameError(f"unknown serialize type {serialize_type}")
    if header_len > len(payload) - 4:
        raise FrameError(f"header length {header_len} runs past the {len(payload) - 4} bytes of the frame")
    if header_len > HEADER_BYTES_MAX:
        raise FrameError(f"header of {header_len} bytes exceeds {HEADER_BYTES_MAX}")
    header = payload[4:4 + header_len]
    if serialize_type == SERIALIZE_JSON:
        cmd = decode_json_header(header)
    else:
        cmd = decode_header(header, rocketmq_layout=True)
    cmd.body = bytes(payload[4 + header_len:])
    return cmd, serialize_type


# ZMTP's greeting opens with 0xFF: read as a length word, a negative one.
ZMTP_SIGNATURE_FIRST_BYTE = 0xFF


class BadFrameLength(FrameError):
    """A length word above the limit: the stream cannot be resynchronised, the connection closes.
    ``frames``: the complete frames the same ``feed`` cut before it, still owed their answers."""

    def __init__(self, message: str, frames: list[bytes] | None = None, zeromq_greeting: bool = False):
        super().__init__(message)
        self.frames = frames or []
        # The length word is the start of ZMTP's greeting (0xFF ...): a ZeroMQ peer, e.g. a RocketBox
        # native client given this port, or the cluster command's door probe (cli/door_probe.py).
        self.zeromq_greeting = zeromq_greeting


class FrameDecoder:
    """Cuts a byte stream into frames, whatever the pieces it arrives in.

    ``feed`` returns the complete frames' payloads (each without its length word), to be decoded
    one by one with ``decode_frame_payload``: a bad header spoils one request, not the stream. A
    length word that is negative or over ``frame_bytes_max`` raises BadFrameLength (nothing after
    it can be trusted), which carries the frames cut before it."""

    def __init__(self, frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT):
        self.frame_bytes_max = frame_bytes_max
        self._buffer = bytearray()

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buffer
        buf += data
        frames = []
        start = 0
        while len(buf) - start >= 4:
            (length,) = struct.unpack_from(">i", buf, start)
            if length < 4 or length > self.frame_bytes_max:
                zeromq_greeting = buf[start] == ZMTP_SIGNATURE_FIRST_BYTE
                del buf[:start]
                raise BadFrameLength(f"frame length {length} is outside 4..{self.frame_bytes_max}", frames,
                                     zeromq_greeting)
            end = start + 4 + length
            if end > len(buf):
                break
            frames.append(bytes(buf[start + 4:end]))
            start = end
        del buf[:start]
        return frames
