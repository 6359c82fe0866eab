"""The bytes of ZeroMQ's wire protocol (ZMTP 3.1, RFC 37) with the NULL mechanism, both sides: the
greeting, the READY handshake command, message frames and the PING/PONG heartbeat, and the two
ends of one connection: ``ServerSession``, a ROUTER door's, and ``ClientSession``, a DEALER client's.
Pure: no I/O (zmtp_client.py and proxy/loop_calls.py own the clients' sockets, zmtp_door.py the
broker's).

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


class ZmtpStreamError(ZmtpError):
    """A connection's stream cannot be read on: the door closes it. ``messages``: those the same
    ``feed`` completed before the fault, still owed their answers."""

    def __init__(self, reason: str, messages: list | None = None):
        super().__init__(reason)
        self.messages = messages or []


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


def ping(ttl_deciseconds: int = 0, context: bytes = b"") -> bytes:
    """A heartbeat: the time-to-live the peer may wait for the next one (0: none said), and a
    context of up to 16 bytes the PONG carries back."""
    if len(context) > PING_CONTEXT_MAX:
        raise ZmtpError("a PING context over 16 bytes")
    return command(b"PING", ttl_deciseconds.to_bytes(2, "big") + context)


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

    def peek_byte(self) -> int:
        return self._buffer[0]

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


# The socket types a ROUTER talks to (libzmq's compatibility table); RocketBox's clients are DEALERs.
ROUTER_PEERS = frozenset((b"DEALER", b"REQ", b"ROUTER"))
# ... and those a DEALER talks to: the doors are ROUTERs.
DEALER_PEERS = frozenset((b"ROUTER", b"REP", b"DEALER"))
# Parts of one message a session takes: ours have two (header, body); a door answers a third as
# malformed (wire_format), a run of MORE frames past this closes the connection.
MESSAGE_PARTS_MAX = 16

_AWAIT_GREETING, _AWAIT_READY, _OPEN = range(3)


class MechanismRefused(ZmtpError):
    """The door does not take NULL connections (it runs CURVE: access control)."""

    def __init__(self, mechanism: bytes):
        super().__init__(f"the door's mechanism is {mechanism.decode(errors='replace') or 'not NULL'}")
        self.mechanism = mechanism


class _Session:
    """What both ends' sessions share: the frames read (``reader``), the bytes owed the peer
    (``outgoing``, emptied in place by ``take_outgoing``: a holder of it sees it fill), the peer's
    greeting."""

    def __init__(self, frame_bytes_max: int):
        self.reader = FrameReader(frame_bytes_max)
        self._state = _AWAIT_GREETING
        self._parts: list[bytes] = []
        self.outgoing = bytearray()

    @property
    def open(self) -> bool:
        """The handshake is done: what follows are messages."""
        return self._state == _OPEN

    def take_outgoing(self) -> bytes:
        data = bytes(self.outgoing)
        self.outgoing.clear()
        return data

    def feed(self, data: bytes, messages: list | None = None) -> list[list[bytes]]:
        """Every message ``data`` completes, added to ``messages`` (those before a ZmtpError stay there)."""
        self.reader.feed(data)
        messages = [] if messages is None else messages
        while (parts := self.next_message()) is not None:
            messages.append(parts)
        return messages

    def next_message(self) -> list[bytes] | None:
        """The next whole message of the bytes fed to ``reader``, or None until more come; the
        handshake on the way is the subclass's (``_greeted``, ``_peer_ready``)."""
        if self._state == _AWAIT_GREETING and not self._greeted():
            return None
        reader = self.reader
        while True:
            got = reader.next_frame()
            if got is None:
                return None
            flags, data = got
            if flags & FLAG_COMMAND:
                self._command(data)
            elif self._state != _OPEN:
                raise ZmtpError("a message before the READY handshake")
            elif flags & FLAG_MORE:
                if len(self._parts) + 1 >= MESSAGE_PARTS_MAX:
                    raise ZmtpError(f"a message of more than {MESSAGE_PARTS_MAX} parts")
                self._parts.append(data)
            else:
                parts = self._parts
                parts.append(data)
                self._parts = []
                return parts

    def _command(self, body: bytes) -> None:
        name, properties = parse_command(body)
        if name == b"PING":
            self.outgoing += pong(properties)
        elif name == b"READY" and self._state == _AWAIT_READY:
            self._peer_ready(properties)   # the subclass's answer to it
            self._state = _OPEN
        elif name == b"ERROR":
            raise ZmtpError(f"{self.PEER_ERROR} {error_reason(properties)}")
        elif self._state != _OPEN:
            raise ZmtpError(f"{name.decode(errors='replace')!r} where READY was due")
        # After the handshake other commands (PONG, SUBSCRIBE ...) mean nothing to a ROUTER or DEALER.

    def _peer_mechanism(self) -> bytes | None:
        """The mechanism the peer's greeting names once all of it came (None until then); ZmtpError at
        its first byte when the stream is not ZMTP, or at its end when not 3.x."""
        reader = self.reader
        if len(reader) and reader.peek_byte() != 0xFF:
            raise ZmtpError("not a ZMTP greeting (its first byte is not 0xFF): not a ZeroMQ peer")
        raw = reader.take(GREETING_BYTES)
        if raw is None:
            return None
        self._state = _AWAIT_READY
        return parse_greeting(raw)[1]


class ServerSession(_Session):
    """One connection to a ROUTER door with the NULL mechanism, as the door reads it: the peer's
    greeting (a ZMTP 3.x one naming NULL: a CURVE client or any other stream is refused at once),
    its READY (a socket type a ROUTER talks to), then messages, each a list of its parts. What the
    door owes the peer besides its answers (READY, PONG) collects in ``outgoing``; the door's own
    greeting, ``opening()``, goes first, at accept, as libzmq's does."""

    PEER_ERROR = "the peer gave up:"

    def __init__(self, frame_bytes_max: int):
        super().__init__(frame_bytes_max)
        self.peer_socket_type = b""

    @staticmethod
    def opening() -> bytes:
        return greeting(NULL_MECHANISM, as_server=True)

    @property
    def buffered_bytes(self) -> int:
        """Bytes held for messages not yet whole (frames cut short and the parts before them)."""
        return len(self.reader) + sum(map(len, self._parts))

    def feed(self, data: bytes) -> list[list[bytes]]:
        """The messages ``data`` completes; ZmtpStreamError when the stream cannot be read on."""
        messages: list[list[bytes]] = []
        try:
            return super().feed(data, messages)
        except ZmtpError as exc:
            raise ZmtpStreamError(str(exc), messages) from None

    def _greeted(self) -> bool:
        mechanism = self._peer_mechanism()
        if mechanism is None:
            return False
        if mechanism != NULL_MECHANISM:
            raise ZmtpError(f"the peer's security mechanism is {mechanism.decode(errors='replace')!r}; this door "
                            "takes only NULL (access control is off: connect without CURVE keys)")
        return True

    def _peer_ready(self, properties: bytes) -> None:
        self.peer_socket_type = _peer_socket_type(properties, ROUTER_PEERS, "this door (a ROUTER)")
        self.outgoing += ready(b"ROUTER")


class ClientSession(_Session):
    """A DEALER's connection to a ROUTER door with the NULL mechanism, both clients' (the native
    client's blocking ``zmtp_client.ZmtpConnection``, the proxy's ``loop_calls``): our greeting,
    ``opening()``, first; READY only once the door's greeting came and named NULL, as libzmq does (a
    CURVE door closes at our greeting, and bytes of ours it never read would turn its close into a
    reset that loses its greeting); then messages, each a list of its parts. A request's bytes come
    from ``request``, held until the door's READY; READY, PONGs and the held requests collect in
    ``outgoing``. Errors: MechanismRefused (a door not NULL), ZmtpError (a door's ERROR, a stream
    that is not ZMTP 3.x, a message before READY).

    ``next_message`` is the native client's sync hot path: one message at a time, the handshake's
    state looked at once a call; ``reader`` is fed by the caller (``reader.feed``) with no session
    call between."""

    PEER_ERROR = "the door sent ERROR:"

    def __init__(self, frame_bytes_max: int):
        super().__init__(frame_bytes_max)
        self._held = bytearray()

    @staticmethod
    def opening() -> bytes:
        return greeting(NULL_MECHANISM)

    def close_refusal(self) -> MechanismRefused | None:
        """What the door's closing the connection now says besides a lost connection: before its
        greeting came whole, that it does not take NULL (a CURVE door closes at our greeting, before
        the rest of its own: at most its 10-byte signature came; libzmq's client reports a close
        during the handshake as a failed handshake too, zmq_transport._refusal_of)."""
        return MechanismRefused(b"") if self._state == _AWAIT_GREETING else None

    def request(self, parts) -> bytes:
        """The frames of a message of ``parts`` to write now; b"" while the handshake is on (they go
        to ``outgoing`` when the door's READY comes)."""
        data = message(parts)
        if self._state == _OPEN:
            return data
        self._held += data
        return b""

    def _greeted(self) -> bool:
        mechanism = self._peer_mechanism()
        if mechanism is None:
            return False
        if mechanism != NULL_MECHANISM:
            raise MechanismRefused(mechanism)
        self.outgoing += ready(b"DEALER")
        return True

    def _peer_ready(self, properties: bytes) -> None:
        _peer_socket_type(properties, DEALER_PEERS, "a DEALER")
        self.outgoing += self._held
        self._held = bytearray()


def _peer_socket_type(ready_properties: bytes, peers: frozenset, us: str) -> bytes:
    """The Socket-Type a READY names, when one ``us`` talks to; ZmtpError when not."""
    socket_type = parse_properties(ready_properties).get(b"Socket-Type", b"")
    if socket_type not in peers:
        raise ZmtpError(f"a {socket_type.decode(errors='replace')!r} socket cannot talk to {us}")
    return socket_type
