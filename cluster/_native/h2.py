"""The gRPC door's HTTP/2 front end (``h2_conn.c``, ``h2_answer.c``, ``h2_hpack.c``): one connection's
frames, HPACK and gRPC message prefixes in C, no I/O. ``H2Connection.feed`` takes what the door read and returns the
events it made; the answer calls frame what Python answers; ``output`` is what to send next.
"""

from __future__ import annotations

import struct

from rocketbox.cluster._native import ffi, lib

EVENT_HEADERS = lib.RB_H2_EVENT_HEADERS
EVENT_MESSAGE = lib.RB_H2_EVENT_MESSAGE
EVENT_END = lib.RB_H2_EVENT_END
EVENT_RESET = lib.RB_H2_EVENT_RESET
CLOSE = lib.RB_E_H2_CLOSE
_EVENT_HEAD = struct.Struct(">BII")
_ANSWER_HEAD = struct.Struct(">II")
_MESSAGE_PREFIX = struct.Struct(">BI")   # gRPC's length-prefixed message: flag 0 (not compressed), length


def fields_of(payload: bytes) -> list[tuple[str, str]]:
    """A HEADERS event's fields as (name, value) strings (latin-1: header bytes are kept as they came)."""
    parts = iter(payload.decode("latin-1").split("\0"))
    return list(zip(parts, parts))   # the text ends with a NUL: its last, empty part is left out


class H2Connection:
    """One client connection's HTTP/2 state (the server side); our SETTINGS are in ``output`` at once."""

    def __init__(self, max_streams: int, max_message: int, max_buffered: int):
        self._c = ffi.gc(lib.rb_h2_new(max_streams, max_message, max_buffered), lib.rb_h2_free)
        if self._c == ffi.NULL:
            raise MemoryError("rb_h2_new")
        self._size = ffi.new("size_t *")
        self._state = ffi.new("uint64_t[]", lib.RB_H2_STATE_COLUMNS)
        self.closed = False

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]] | None:
        """(kind, stream, payload) of each event the bytes made; None when the connection must end
        (a GOAWAY is in the output; ``reason`` says why)."""
        if lib.rb_h2_feed(self._c, data, len(data)) < 0:
            self.closed = True
            return None
        pointer = lib.rb_h2_events(self._c, self._size)
        if not self._size[0]:
            return []
        blob = ffi.buffer(pointer, self._size[0])[:]
        events, at, end = [], 0, len(blob)
        while at < end:
            kind, stream, length = _EVENT_HEAD.unpack_from(blob, at)
            at += 9
            events.append((kind, stream, blob[at:at + length]))
            at += length
        return events

    def output(self):
        """The bytes to send next (a view valid until the next call on this connection)."""
        pointer = lib.rb_h2_output(self._c, self._size)
        return ffi.buffer(pointer, self._size[0])

    def sent(self, count: int) -> None:
        lib.rb_h2_sent(self._c, count)

    def headers(self, stream: int) -> bool:
        return lib.rb_h2_headers(self._c, stream) == 1

    def message(self, stream: int, message: bytes) -> bool:
        return lib.rb_h2_message(self._c, stream, message, len(message)) == 1

    def messages(self, stream: int, messages: list[bytes]) -> bool:
        """A run of the stream's messages framed by one call: one append, DATA frames as the windows
        allow, several messages a frame (``message`` once each frames one message at least a frame)."""
        framed = b"".join([_MESSAGE_PREFIX.pack(0, len(message)) + message for message in messages])
        return lib.rb_h2_messages(self._c, stream, framed, len(framed)) == 1

    def trailers(self, stream: int, status: int, message: str = "") -> bool:
        text = message.encode("utf-8", "replace")
        return lib.rb_h2_trailers(self._c, stream, status, text, len(text)) == 1

    def answers(self, answers: list[tuple[int, bytes]]) -> int:
        """Each (stream, message) answered whole: headers, the message, status 0."""
        packed = b"".join(_ANSWER_HEAD.pack(stream, len(message)) + message for stream, message in answers)
        return lib.rb_h2_answers(self._c, packed, len(packed))

    def drain(self) -> None:
        """The first GOAWAY of a graceful shutdown (last stream 2^31-1): no new streams, open ones go on."""
        lib.rb_h2_drain(self._c)

    def goaway(self, error: int = 0) -> None:
        lib.rb_h2_goaway(self._c, error)
        self.closed = True

    def unsent(self) -> int:
        """Bytes framed and not yet taken by ``sent`` (``state()["unsent"]`` without the dict: asked
        after every message a stream writes)."""
        lib.rb_h2_state(self._c, self._state)
        return self._state[1]

    def state(self) -> dict[str, int]:
        lib.rb_h2_state(self._c, self._state)
        s = self._state
        return {"open": s[0], "unsent": s[1], "buffered": s[2], "refused": s[3], "closing": s[4], "preface": s[5]}

    @property
    def reason(self) -> str:
        return ffi.string(lib.rb_h2_reason(self._c)).decode("utf-8", "replace")
