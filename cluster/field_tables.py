"""A byte layout as a table of (field name, struct code) pairs, big-endian and unpadded: the struct
a format module packs with and the offset of each field, from one table. The native helper's
constants (``cluster/_native/layouts.h``) are generated from the same tables when it is built
(``cluster/_native/build.py``), so C and Python cannot disagree on an offset. Pure."""

from __future__ import annotations

import struct


def struct_of(fields) -> struct.Struct:
    return struct.Struct(">" + "".join(code for _, code in fields))


def offsets_of(fields) -> dict[str, int]:
    """Each field's byte offset."""
    offsets, at = {}, 0
    for name, code in fields:
        offsets[name] = at
        at += struct.calcsize(">" + code)
    return offsets
