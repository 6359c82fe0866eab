"""Inputs for the fuzz targets: random bytes, valid inputs with random damage, and JSON of every
shape (deep nesting and wrong types included), as a peer on the network could send them."""

from __future__ import annotations

import json
import struct

from hypothesis import strategies as st

# Lengths and counts a parser treats specially: zero, negatives, the edges of int16/int32, and
# values just around what the input really holds (filled in per input by ``_int32_near``).
INTERESTING_INTS = (0, 1, 2, 3, 4, 7, 8, 22, 91, 127, 128, 255, 256, 32767, 32768, 65535, 65536, 0x7FFFFFFF,
                    -1, -2, -128, -32768, -(1 << 31))


def _apply(data: bytes, ops: list) -> bytes:
    buf = bytearray(data)
    for kind, at, value in ops:
        pos = at % (len(buf) + 1)
        if kind == "flip" and buf:
            buf[pos % len(buf)] ^= 1 << (value % 8)
        elif kind == "byte" and buf:
            buf[pos % len(buf)] = value % 256
        elif kind == "int32":
            word = INTERESTING_INTS[value % len(INTERESTING_INTS)] if value >= 0 else len(buf) + value % 16 - 8
            buf[pos:pos + 4] = struct.pack(">i", max(min(word, 0x7FFFFFFF), -(1 << 31)))
        elif kind == "int16":
            word = INTERESTING_INTS[value % len(INTERESTING_INTS)]
            buf[pos:pos + 2] = struct.pack(">h", max(min(word, 32767), -32768))
        elif kind == "insert":
            buf[pos:pos] = bytes([value % 256]) * (1 + value % 5)
        elif kind == "delete":
            del buf[pos:pos + 1 + value % 16]
        elif kind == "truncate":
            del buf[pos:]
        elif kind == "zero":
            buf[pos:pos + 1 + value % 64] = bytes(len(buf[pos:pos + 1 + value % 64]))
        elif kind == "repeat":
            buf[pos:pos] = buf[pos:pos + 1 + value % 32]
    return bytes(buf)


_OPS = st.tuples(st.sampled_from(("flip", "byte", "int32", "int16", "insert", "delete", "truncate", "zero",
                                  "repeat")),
                 st.integers(0, 1 << 20), st.integers(-64, 1 << 16))


def mutated(valid: st.SearchStrategy, max_ops: int = 4) -> st.SearchStrategy:
    """A value of ``valid`` (bytes) with up to ``max_ops`` random changes: flipped bits, bytes,
    int16/int32 fields set to edge values, insertions, deletions, truncations, zeroed runs."""
    return st.builds(_apply, valid, st.lists(_OPS, min_size=1, max_size=max_ops))


def damaged(valid: st.SearchStrategy) -> st.SearchStrategy:
    """Random bytes, a valid input as it is, or a valid input damaged."""
    return st.one_of(st.binary(max_size=512), valid, mutated(valid))


# ---------------------------------------------------------------- JSON

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-(1 << 70), 1 << 70),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)), max_leaves=25)


def _nested(depth: int, opener: str) -> str:
    closer = {"[": "]", '{"a":': "}"}[opener]
    return opener * depth + "1" + closer * depth


deep_json = st.builds(_nested, st.integers(1, 100_000), st.sampled_from(("[", '{"a":')))


def json_text(shaped: st.SearchStrategy | None = None) -> st.SearchStrategy:
    """JSON text as bytes: ``shaped`` values (objects of the shape a parser expects, with random
    types in places), any JSON value, deep nesting, or those damaged."""
    values = json_values if shaped is None else st.one_of(shaped, json_values)
    valid = st.one_of(values.map(lambda v: json.dumps(v).encode()), deep_json.map(str.encode))
    return st.one_of(valid, mutated(valid), st.binary(max_size=64))


def shaped_object(fields: dict[str, st.SearchStrategy]) -> st.SearchStrategy:
    """A JSON object with some of ``fields`` (each value from its strategy or of any JSON type)
    and maybe stray keys."""
    entries = [st.tuples(st.just(name), st.one_of(strategy, json_values)) for name, strategy in fields.items()]
    return st.builds(lambda chosen, extra: {**dict(chosen), **extra},
                     st.lists(st.one_of(*entries), max_size=len(fields) + 1),
                     st.dictionaries(st.text(max_size=8), json_scalars, max_size=2))
