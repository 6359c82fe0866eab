"""A popped record as the bytes of its ReceiveMessageResponse{message} (the native door's receive runs,
issue 33 item 2): written in one C call (``_native/grpc_message.c``) from the record's fields and raw
properties, the bytes ``messages.incoming`` + ``SerializeToString`` give, without a properties dict or
protobuf objects (those were ~8 us of the proxy's CPU a message received). A record the C writer does
not cover (compressed, delayed, Lite, priority or dead-letter properties, properties that are not
strict UTF-8 or name one twice, ...) goes through ``messages.incoming`` as before.

``tests/unit/test_received_wire.py`` pins the bytes against the protobuf library's serialization of
``messages.incoming``'s Message: equal bytes, or equal messages where a map of several user
properties is written in another order (protobuf leaves a map's order open; upb's is its hash's).
"""

from __future__ import annotations

from rocketbox.cluster import topic_attributes
from rocketbox.cluster._native import ffi, lib
from rocketbox.cluster.message.sysflags import SYSFLAG_COMPRESSED
from rocketbox.cluster.message.lite_topics import PROPERTY_INNER_MULTI_DISPATCH
from rocketbox.cluster.message.properties import (PROPERTY_KEYS, PROPERTY_PRIORITY, PROPERTY_TAGS,
                                                  PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELIVER_MS,
                                                  PROPERTY_TRAN_MSG, PROPERTY_UNIQ_KEY, SYSTEM_PROPERTIES)
from rocketbox.cluster.proxy import messages, response_wire

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
HOST_BYTES = 8
# What the C writer's output may take beyond the body, topic, handle and properties: a map entry's keys
# and lengths (at most 12 bytes over a pair of at least 2) and the fixed fields.
_PER_PROPERTY_BYTE = 6
_FIXED_BYTES = 512

# Each property name the Message reads and what the C writer does with it (helper.h rb_grpc_roles); the
# rest of SYSTEM_PROPERTIES are not shown, any other name is a user property.
_ROLES = {PROPERTY_TAGS: lib.RB_GRPC_TAGS, PROPERTY_KEYS: lib.RB_GRPC_KEYS, PROPERTY_UNIQ_KEY: lib.RB_GRPC_UNIQ_KEY,
          PROPERTY_TRAN_MSG: lib.RB_GRPC_TRANSACTION, messages.PROPERTY_SHARDING_KEY: lib.RB_GRPC_SHARDING_KEY,
          messages.PROPERTY_BORN_TIMESTAMP: lib.RB_GRPC_BORN_TIMESTAMP,
          messages.PROPERTY_BORN_HOST: lib.RB_GRPC_BORN_HOST,
          messages.PROPERTY_TRACE_CONTEXT: lib.RB_GRPC_TRACE_CONTEXT}
_UNCOVERED = {PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, *topic_attributes.DELAY_PROPERTIES,
              PROPERTY_INNER_MULTI_DISPATCH, PROPERTY_PRIORITY, messages.PROPERTY_DLQ_ORIGIN_TOPIC,
              messages.PROPERTY_DLQ_ORIGIN_MESSAGE_ID}


def _names_table() -> bytes:
    table = bytearray()
    for name in sorted(SYSTEM_PROPERTIES | _UNCOVERED | set(_ROLES)):
        raw = name.encode()
        role = lib.RB_GRPC_UNCOVERED if name in _UNCOVERED else _ROLES.get(name, lib.RB_GRPC_SYSTEM)
        table += bytes((role, len(raw))) + raw
    return bytes(table)


NAMES = _names_table()


def received(record, handle: str, attempt: int | None, topic: str | None, out=None) -> bytes:
    """``ReceiveMessageResponse(message=messages.incoming(record, ...))``'s bytes (arguments as ``incoming``'s;
    ``out``: a ``Buffer`` a run reuses)."""
    (_, _, queue_id, _, queue_offset, phys_offset, sys_flag, born_ms, born_host, store_ms, store_host,
     reconsume_times, _, body, record_topic, properties) = record
    shown = topic or record_topic
    attempt = attempt if attempt else min(reconsume_times + 1, INT32_MAX)
    if (not sys_flag & SYSFLAG_COMPRESSED and INT32_MIN <= attempt <= INT32_MAX
            and len(born_host) == HOST_BYTES == len(store_host)):
        topic_bytes, handle_bytes = shown.encode(), (handle or "").encode()
        capacity = (len(body) + len(topic_bytes) + len(handle_bytes) + _PER_PROPERTY_BYTE * len(properties)
                    + _FIXED_BYTES)
        target = (out or Buffer()).at_least(capacity)
        written = lib.rb_grpc_received(
            target, capacity, NAMES, len(NAMES), topic_bytes, len(topic_bytes), body, len(body), properties,
            len(properties), handle_bytes, len(handle_bytes), born_host, store_host, born_ms, store_ms, phys_offset,
            queue_id, queue_offset, attempt)
        if written >= 0:
            return ffi.buffer(target, written)[:]
    return response_wire.receive_message(messages.incoming(
        record, receipt_handle=handle, delivery_attempt=attempt, topic=shown).SerializeToString())


def run(popped) -> list[bytes]:
    """``received`` of each popped message (``.record``, ``.handle``, ``.attempt``, ``.topic``), one buffer for them."""
    out = Buffer()
    return [received(item.record, item.handle, item.attempt, item.topic, out) for item in popped]


class Buffer:
    """The C writer's output space, grown when a record needs more (a run's records write one after another)."""

    __slots__ = ("memory", "size")

    def __init__(self):
        self.memory, self.size = None, 0

    def at_least(self, size: int):
        if size > self.size:
            self.size = max(size, 2 * self.size, 4096)
            self.memory = ffi.new("uint8_t[]", self.size)
        return self.memory
