"""The recall handle of a timed message (RocketMQ 5.3.2's RecallMessageHandle, version 1): what a send
of a message to the timer answers (SEND_MESSAGE's ``recallHandle`` field, gRPC's
``SendResultEntry.recall_handle``) and what RECALL_MESSAGE (370) / the RecallMessage RPC take back.

Text ``v1 <topic> <brokerName> <timestamp> <messageId>`` (one space between; the timestamp the
message's TIMER_OUT_MS + 1, in ms; the message id its UNIQ_KEY), then URL-safe Base64 with
padding, as Java's ``Base64.getUrlEncoder()`` writes it. Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

VERSION_1 = "v1"
_SEPARATOR = " "
# RocketMQ's reason for any handle it cannot read (its DecoderException message).
INVALID = "recall handle is invalid"
_LONG = re.compile(r"[+-]?[0-9]+")
_URL_BASE64 = re.compile(r"[A-Za-z0-9_-]+={0,2}")


@dataclass(frozen=True)
class RecallHandle:
    topic: str
    broker_name: str
    timestamp: str   # as carried: RocketMQ parses it only when it checks the time (NumberUtils.toLong)
    message_id: str


def build(topic: str, broker_name: str, timestamp_ms: int, message_id: str) -> str:
    text = _SEPARATOR.join((VERSION_1, topic, broker_name, str(timestamp_ms), message_id))
    return base64.urlsafe_b64encode(text.encode()).decode("ascii")


def decode(handle: str) -> RecallHandle:
    """The handle's fields; ValueError(INVALID) for anything Java's decoder refuses or whose text is
    not version 1 with five fields (fields past the fifth are ignored, as RocketMQ does)."""
    if not handle or not _URL_BASE64.fullmatch(handle):
        # Java's URL decoder takes the text with or without its padding, and no other alphabet.
        raise ValueError(INVALID)
    try:
        raw = handle.encode("ascii")
        if not raw.endswith(b"="):
            raw += b"=" * (-len(raw) % 4)
        raw = base64.b64decode(raw, altchars=b"-_", validate=True)
    except (UnicodeEncodeError, binascii.Error, ValueError):
        raise ValueError(INVALID) from None
    items = raw.decode("utf-8", "replace").split(_SEPARATOR)
    while items and not items[-1]:
        items.pop()   # Java's String.split drops trailing empty strings
    if len(items) < 5 or items[0] != VERSION_1:
        raise ValueError(INVALID)
    return RecallHandle(items[1], items[2], items[3], items[4])


def parse_timestamp(text: str) -> int:
    """The handle's timestamp as RocketMQ's NumberUtils.toLong reads it (Long.parseLong: an optional
    sign and decimal digits, nothing else), -1 when it is no long."""
    if not _LONG.fullmatch(text):
        return -1
    value = int(text)
    return value if -(1 << 63) <= value < 1 << 63 else -1
