"""The bytes of ``<store_dir>/config/<name>.slots``: committed consumer offsets that outlive a SIGKILL.

``SLOT_COUNT`` little-endian u64 slots, slot ``i`` at byte ``8 * i``. A slot's low 48 bits hold
the committed queue offset + 1, its high 16 bits a check of them (``_check``), so 0 means "never
written" (or freed) and a slot a power cut tore (a page written since its last msync comes back
as garbage) reads as unwritten: the offset falls back to the last JSON write, a redelivery, instead
of an arbitrary offset that skips messages (the seeded simulation, ``tests/simulation/``, found
one). A slot written before the check existed reads as unwritten too. Which slot belongs to which
(topic@group, queue) is in the sibling ``<name>.slotmap.json`` (``broker/offsets.py``).

Pure: reads and writes a buffer given to it (the broker's mmap of the file), no I/O.
"""

from __future__ import annotations

import struct

SLOT_COUNT = 65_536
SLOT = struct.Struct("<Q")
FILE_BYTES = SLOT_COUNT * SLOT.size


_VALUE_BITS = 48
_VALUE_MASK = (1 << _VALUE_BITS) - 1


def _check(value: int) -> int:
    """16 bits that follow every bit of ``value`` (Fibonacci hashing: the top of a multiply)."""
    return ((value * 0x9E3779B97F4A7C15) & 0xFFFF_FFFF_FFFF_FFFF) >> _VALUE_BITS


def read_slot(buffer, slot: int) -> int | None:
    """The offset slot ``slot`` holds, None when it was never written or does not hold together."""
    stored = SLOT.unpack_from(buffer, slot * SLOT.size)[0]
    value = stored & _VALUE_MASK
    if not value or stored >> _VALUE_BITS != _check(value):
        return None
    return value - 1


def write_slot(buffer, slot: int, offset: int | None) -> None:
    """Store ``offset`` (below 2**48 - 1) in slot ``slot``; None clears it."""
    if offset is None:
        SLOT.pack_into(buffer, slot * SLOT.size, 0)
        return
    value = offset + 1
    if value > _VALUE_MASK:
        raise ValueError(f"offset {offset} does not fit a slot")
    SLOT.pack_into(buffer, slot * SLOT.size, _check(value) << _VALUE_BITS | value)
