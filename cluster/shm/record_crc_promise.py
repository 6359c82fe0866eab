"""Which records must carry the whole-record CRC property: a store's promise, kept across restarts.

A torn write can garble the CRC property itself (it is a record's last 20 bytes, the likeliest to
sit on an unsynced page of their own), and a record whose property is garbage looks like one
written without it, which recovery can only check on its body CRC. So a broker that seals every
record it writes (``StoreConfig.record_crc_enabled``) first says so durably: the file holds the
CommitLog offset from which every record carries the property, and recovery refuses a record at or
past it that lacks one, as the end of the valid log.

The promise is settled at the end of each recovery, before the broker writes anything: kept (from
its old offset, or from the recovered end if it had none or the end moved below it) while the
setting is on, withdrawn while it is off. A store that appends another broker's bytes (a slave,
``MessageStore.append_replicated``) makes its master's promise instead, before it appends: its
master's setting is not its own, and its log is a prefix of its master's (the HA data header
carries the master's offset, ``broker/ha_format.py``). Records below the offset, or in a store
without the file, keep the old rule (the CRC property verified when present, the body CRC always).
"""

from __future__ import annotations

from rocketbox.cluster.shm import durable
from rocketbox.cluster.shm.paths import record_crc_promise_path


def read(store_dir: str) -> int | None:
    """The promised offset, or None (no promise; an unreadable file counts as none)."""
    try:
        with open(record_crc_promise_path(store_dir), "rb") as f:
            text = f.read(64).strip()
    except FileNotFoundError:
        return None
    return int(text) if text.isdigit() else None


def settle(store_dir: str, previous: int | None, end: int, record_crc_enabled: bool) -> int | None:
    """Make the promise what this run keeps (see the module docstring); returns it."""
    if not record_crc_enabled:
        withdraw(store_dir)
        return None
    promised = end if previous is None or previous > end else previous
    if promised != previous:
        durable.atomic_write(record_crc_promise_path(store_dir), b"%d\n" % promised)
    return promised


def adopt(store_dir: str, offset: int | None) -> None:
    """Promise from ``offset`` on (None: withdraw), durably, before the bytes it speaks of are written."""
    if offset is None:
        withdraw(store_dir)
    else:
        durable.atomic_write(record_crc_promise_path(store_dir), b"%d\n" % offset)


def withdraw(store_dir: str) -> None:
    """No promise from now on (durably, before the bytes that break it are written)."""
    durable.unlink(record_crc_promise_path(store_dir))
