"""The bytes of the responses the native door's hot paths answer, written without building protobuf
objects: a ReceiveMessageResponse around a Message already serialized, and an AckMessageResponse
(issue 33 item 2: a message's wrapper object, copied into its response, and an ack's response of
three nested objects were a fifth of the proxy's receive + ack CPU).

Protobuf's wire format (https://protobuf.dev/programming-guides/encoding/): a field is a key, the
varint ``number << 3 | wire type``, then for a length-delimited field (strings, bytes, messages;
wire type 2) a varint length and the bytes; an enum is a varint (wire type 0). Fields go in number
order, as the protobuf library writes them, and a proto3 string or enum at its default ("" or 0) is
left out, as the library leaves it out. ``tests/unit/test_response_wire.py`` pins every function
against the library's own ``SerializeToString`` (golden bytes, and byte-for-byte on varied input).
"""

from __future__ import annotations

import functools

_LENGTH_DELIMITED = 2
_VARINT = 0


def varint(value: int) -> bytes:
    """A non-negative integer as a protobuf varint (7 bits a byte, low first, the high bit: more follow)."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def length_delimited(number: int, payload: bytes) -> bytes:
    """Field ``number`` holding ``payload`` (a string's UTF-8, bytes, or a message's serialization)."""
    return _key(number, _LENGTH_DELIMITED) + varint(len(payload)) + payload


def _string(number: int, text: str) -> bytes:
    return length_delimited(number, text.encode("utf-8")) if text else b""


# ReceiveMessageResponse: status = 1, message = 2, delivery_timestamp = 3 (one of them).
_RECEIVE_MESSAGE = _key(2, _LENGTH_DELIMITED)
# AckMessageResponse: status = 1, entries = 2; AckMessageResultEntry: message_id = 1, receipt_handle = 2,
# status = 3; Status: code = 1 (an enum), message = 2.
_ACK_STATUS, _ACK_ENTRY = 1, 2
_ENTRY_MESSAGE_ID, _ENTRY_RECEIPT_HANDLE, _ENTRY_STATUS = 1, 2, 3
_STATUS_CODE, _STATUS_MESSAGE = 1, 2


def receive_message(message: bytes) -> bytes:
    """``ReceiveMessageResponse(message=m).SerializeToString()`` from ``m.SerializeToString()``."""
    return _RECEIVE_MESSAGE + varint(len(message)) + message


@functools.lru_cache(maxsize=256)   # a few codes and reasons over every acked handle
def status(code: int, message: str) -> bytes:
    """A Status message's own bytes (not wrapped in a field)."""
    return (_key(_STATUS_CODE, _VARINT) + varint(code) if code else b"") + _string(_STATUS_MESSAGE, message)


def ack_entry(message_id: str, receipt_handle: str, entry_status: bytes) -> bytes:
    """One AckMessageResultEntry as a field of AckMessageResponse; ``entry_status`` from ``status``."""
    entry = (_string(_ENTRY_MESSAGE_ID, message_id) + _string(_ENTRY_RECEIPT_HANDLE, receipt_handle)
             + length_delimited(_ENTRY_STATUS, entry_status))
    return length_delimited(_ACK_ENTRY, entry)


def ack_message(overall: bytes, entries: list[bytes]) -> bytes:
    """An AckMessageResponse: its status (from ``status``) and its entries (each from ``ack_entry``)."""
    return length_delimited(_ACK_STATUS, overall) + b"".join(entries)
