"""The bytes of ``<store_dir>/config/<name>.slots``: committed consumer offsets that outlive a SIGKILL.

``SLOT_COUNT`` little-endian u64 slots, slot ``i`` at byte ``8 * i``. A slot holds the
committed queue offset + 1, so 0 means "never written" (or freed). Which slot belongs to
which (topic@group, queue) is in the sibling ``<name>.slotmap.json`` (``broker/offsets.py``).

Pure: reads and writes a buffer given to it (the broker's mmap of the file), no I/O.
"""

from __future__ import annotations

import struct

SLOT_COUNT = 65_536
SLOT = struct.Struct("<Q")
FILE_BYTES = SLOT_COUNT * SLOT.size


def read_slot(buffer, slot: int) -> int | None:
    """The offset slot ``slot`` holds, None when it was never written."""
    stored = SLOT.unpack_from(buffer, slot * SLOT.size)[0]
    return stored - 1 if stored else None


def write_slot(buffer, slot: int, offset: int | None) -> None:
    """Store ``offset`` in slot ``slot``; None clears it."""
    SLOT.pack_into(buffer, slot * SLOT.size, 0 if offset is None else offset + 1)
