"""The bytes of the control block: a 4 KiB shared file of u64 cursors, one writing process each.

Each slot is an 8-byte aligned native-order u64 (the block never leaves the machine
that wrote it; ``control.py`` maps it and says how the cursors are published).

| slot | name | written by | meaning |
| --- | --- | --- | --- |
| 0 | magic | creator | ``MAGIC``: file format and version |
| 1 | write_pos | broker | end of the bytes appended to the CommitLog (whole batches only) |
| 2 | flushed_pos | flush worker | CommitLog bytes below this are msynced |
| 3 | dispatched_pos | reput worker | records below this are in ConsumeQueue and IndexFile (what the checkpoint may claim) |
| 4 | confirm_pos | broker (a master's HA server) | highest offset an in-sync slave acknowledged |
| 5 | heartbeat_broker_ms | broker | wall-clock ms of its last loop |
| 6 | heartbeat_flush_ms | flush worker | |
| 7 | heartbeat_reput_ms | reput worker | |
| 8 | heartbeat_allocate_ms | allocate worker | |
| 9 | topics_epoch | nobody | unused since the broker writes the ConsumeQueue itself (the reput no longer maps its files); kept so the slots keep their places |
| 10 | commitlog_min_pos | allocate worker (retention; recovery at boot) | the CommitLog's first byte kept: segments below it are deleted or about to be |
| 11 | delete_requests | broker | deleteExpiredCommitLog requests received: the retention worker runs when it grows |
| 12 | config_version | broker | bumped when updateBrokerConfig changed the settings kept in ``config/brokerConfig.json`` |
| 13 | queued_pos | broker | records below this have their ConsumeQueue entries (written by the broker after its appends); the reput indexes up to it |

Pure: no I/O.
"""

from __future__ import annotations

import sys

SIZE_BYTES = 4096
SLOT_BYTES = 8
MAGIC = 0x52424F58_43544C01  # "RBOXCTL" + version 1

SLOTS = {
    "magic": 0,
    "write_pos": 1,
    "flushed_pos": 2,
    "dispatched_pos": 3,
    "confirm_pos": 4,
    "heartbeat_broker_ms": 5,
    "heartbeat_flush_ms": 6,
    "heartbeat_reput_ms": 7,
    "heartbeat_allocate_ms": 8,
    "topics_epoch": 9,
    "commitlog_min_pos": 10,
    "delete_requests": 11,
    "config_version": 12,
    "queued_pos": 13,
}
ROLES = ("broker", "flush", "reput", "allocate")   # the processes that beat a heartbeat slot


def slot_offset(name: str) -> int:
    """Byte position of a slot in the file."""
    return SLOTS[name] * SLOT_BYTES


def heartbeat_offset(role: str) -> int:
    """Byte position of a role's heartbeat (wall-clock ms of its last loop)."""
    if role not in ROLES:
        raise ValueError(f"{role!r} beats no heartbeat in the control block (roles: {', '.join(ROLES)})")
    return slot_offset(f"heartbeat_{role}_ms")


def encode_slot(value: int) -> bytes:
    return value.to_bytes(SLOT_BYTES, sys.byteorder)


def decode_slot(raw: bytes) -> int:
    if len(raw) != SLOT_BYTES:
        raise ValueError(f"a control slot is {SLOT_BYTES} bytes, not {len(raw)}")
    return int.from_bytes(raw, sys.byteorder)
