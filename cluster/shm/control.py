"""The control block: a 4 KiB shared file of u64 cursors, one writing process each.

Every process of a broker maps ``<store_dir>/control`` (or another path given to
``ControlBlock``). Each slot is an 8-byte aligned native-order u64, read and written
through the C helper as one atomic load or store (``cluster._native.U64Slots``), so a
reader sees the old value or the new one, never a torn mix, and because each slot has
exactly one writer no lock is needed. Sync flush is then "wait until flushed_pos >= my end", a comparison.

The slots and their writers: ``control_format.py``.

Exception: recovery runs in the broker before any worker starts and sets write_pos,
flushed_pos and dispatched_pos together. Writers publish a cursor only after the bytes
it covers are written, with a release store, and readers load it with acquire, so a
reader that loads a cursor and then reads below it sees complete data on any CPU
(not only where stores stay in order, as on x86-64).
"""

from __future__ import annotations

import mmap
import os

from rocketbox.cluster._native import U64Slots
from rocketbox.cluster.shm.control_format import MAGIC, SIZE_BYTES, SLOT_BYTES, SLOTS, encode_slot
from rocketbox.cluster.shm.mapped_file import create_file

def _slot_property(name: str):
    index = SLOTS[name]

    def get(self) -> int:
        return self._load[index]()

    def set(self, value: int) -> None:
        self._store[index](value)

    return property(get, set, doc=f"u64 slot {index} ({name})")


class ControlBlock:
    def __init__(self, path: str):
        self.path = path
        # The magic goes in before the file gets its name: nobody sees a block without it.
        create_file(path, SIZE_BYTES, header=encode_slot(MAGIC))
        fd = os.open(path, os.O_RDWR)
        try:
            if os.fstat(fd).st_size != SIZE_BYTES:
                raise ValueError(f"{path} is not a control block: size {os.fstat(fd).st_size}")
            self._mm = mmap.mmap(fd, SIZE_BYTES)
        finally:
            os.close(fd)
        # The one view of the mapping; close() releases it before closing the mmap.
        self._slots = U64Slots(self._mm, SIZE_BYTES // SLOT_BYTES)
        # Each slot's acquire-load and release-store, bound once: a cursor access is one C call.
        self._load = [self._slots.loader(i) for i in range(len(SLOTS))]
        self._store = [self._slots.storer(i) for i in range(len(SLOTS))]
        magic = self._slots.load(SLOTS["magic"])
        if magic != MAGIC:
            self.close()
            raise ValueError(f"{path} is not a control block (magic 0x{magic:016x})")

    write_pos = _slot_property("write_pos")
    flushed_pos = _slot_property("flushed_pos")
    dispatched_pos = _slot_property("dispatched_pos")
    confirm_pos = _slot_property("confirm_pos")
    heartbeat_broker_ms = _slot_property("heartbeat_broker_ms")
    heartbeat_flush_ms = _slot_property("heartbeat_flush_ms")
    heartbeat_reput_ms = _slot_property("heartbeat_reput_ms")
    heartbeat_allocate_ms = _slot_property("heartbeat_allocate_ms")
    topics_epoch = _slot_property("topics_epoch")
    commitlog_min_pos = _slot_property("commitlog_min_pos")
    delete_requests = _slot_property("delete_requests")
    config_version = _slot_property("config_version")
    queued_pos = _slot_property("queued_pos")

    def get(self, name: str) -> int:
        return self._slots.load(SLOTS[name])

    def set(self, name: str, value: int) -> None:
        self._slots.store(SLOTS[name], value)

    def heartbeat(self, role: str, now_ms: int) -> None:
        self._slots.store(SLOTS[f"heartbeat_{role}_ms"], now_ms)

    def heartbeat_ms(self, role: str) -> int:
        return self._slots.load(SLOTS[f"heartbeat_{role}_ms"])

    def snapshot(self) -> dict[str, int]:
        return {name: self._slots.load(i) for name, i in SLOTS.items() if name != "magic"}

    def close(self) -> None:
        if self._slots is not None:
            self._load = self._store = []
            self._slots.release()
            self._slots = None
        if not self._mm.closed:
            self._mm.close()
