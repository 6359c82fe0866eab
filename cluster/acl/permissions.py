"""RocketMQ's ACL 1.0 permission words and bits (``Permission`` of its acl module). Pure.

A permission is a bit set: DENY refuses whatever else is set; a request needs PUB or SUB (or ANY,
either). The words of plain_acl.yml are DENY, PUB, SUB, PUB|SUB and SUB|PUB; anything else reads as
DENY, as RocketMQ's loader reads it.
"""

from __future__ import annotations

DENY = 1
ANY = 1 << 1
PUB = 1 << 2
SUB = 1 << 3

_WORDS = {"PUB": PUB, "SUB": SUB, "PUB|SUB": PUB | SUB, "SUB|PUB": PUB | SUB, "DENY": DENY}


def parse_permission(word) -> int:
    """The bits of a permission word; a missing or unknown word is DENY."""
    if not isinstance(word, str):
        return DENY
    return _WORDS.get(word.strip(), DENY)


def is_known_word(word) -> bool:
    return isinstance(word, str) and word.strip() in _WORDS


def permits(needed: int, owned: int) -> bool:
    """Whether ``owned`` grants ``needed`` (RocketMQ's Permission.checkPermission)."""
    if owned & DENY:
        return False
    if needed & ANY:
        return bool(owned & (PUB | SUB))
    return bool(needed & owned)


def describe(bits: int) -> str:
    """A permission's word, for messages."""
    if bits & DENY:
        return "DENY"
    words = [name for name, bit in (("PUB", PUB), ("SUB", SUB)) if bits & bit]
    if words:
        return "|".join(words)
    return "ANY" if bits & ANY else "DENY"
