"""White remote address patterns of plain_acl.yml (RocketMQ's RemoteAddressStrategyFactory). Pure.

| pattern | matches |
| --- | --- |
| blank (absent, "") | nothing (an account without one always signs) |
| ``*``, ``*.*.*.*``, ``*:*:*:*:*:*:*:*`` | every address |
| ``192.168.0.{1,2}`` (last part in braces) | each listed address |
| ``10.0.0.1,10.0.0.2`` | each listed address |
| ``192.168.0.*``, ``192.168.*.*``, ``10.10.1-100.*``, ``10.10.10.1-100`` | the first part (of the 2nd to 4th) that is ``*`` or ``a-b`` holds a value in range, the parts before it are equal; parts after it are not looked at (four parts, as RocketMQ requires) |
| ``192.168.0.1``, ``::1`` | that address (IPv6 in any notation) |

IPv6 ranges name every hextet before the range (``fe80:0:0:0:0:0:0:1-ff``, no ``::``). A pattern
that is none of these raises AclFormatError. Addresses compared are the peer's IP without a port.
"""

from __future__ import annotations

import ipaddress
from typing import Callable

Matcher = Callable[[str], bool]


class AclFormatError(ValueError):
    """The ACL file says something that does not parse: the reason names the field."""


def _normal(address: str) -> str | None:
    """An address in one notation (IPv6 exploded, IPv4 as is); None when it is not an IP address."""
    try:   # ``exploded`` inside too: an IPv6 scope id ("::%$") parses, then fails there
        ip = ipaddress.ip_address(address.strip())
        return ip.exploded if ip.version == 6 else str(ip)
    except ValueError:
        return None


def _exact_set(pattern: str, parts: list[str]) -> Matcher:
    allowed = set()
    for part in parts:
        normal = _normal(part)
        if normal is None:
            raise AclFormatError(f"white address {pattern!r}: {part.strip()!r} is not an IP address")
        allowed.add(normal)
    return lambda address: _normal(address) in allowed


def _braces(pattern: str) -> Matcher:
    head, _, listed = pattern.partition("{")
    sep = ":" if ":" in pattern else "."
    if not head.endswith(sep) or (sep == "." and head.count(".") != 3):
        raise AclFormatError(f"white address {pattern!r}: braces must hold the last part of a full address")
    return _exact_set(pattern, [head + item.strip() for item in listed[:-1].split(",")])


def _bounds(pattern: str, part: str, base: int, top: int) -> tuple[int, int] | None:
    """``(low, high)`` of a ``*`` or ``a-b`` part; None for a literal part."""
    if part == "*":
        return 0, top
    if "-" not in part:
        return None
    low_text, _, high_text = part.partition("-")
    try:
        low, high = int(low_text, base), int(high_text, base)
    except ValueError:
        raise AclFormatError(f"white address {pattern!r}: {part!r} is not a range") from None
    if not 0 <= low <= high <= top:
        raise AclFormatError(f"white address {pattern!r}: range {part!r} is outside 0..{top} or reversed")
    return low, high


def _range(pattern: str) -> Matcher:
    v6 = ":" in pattern
    sep, base, top, count = (":", 16, 0xFFFF, 8) if v6 else (".", 10, 255, 4)
    parts = pattern.split(sep)
    if v6 and "" in parts:
        raise AclFormatError(f"white address {pattern!r}: an IPv6 range names every hextet (no '::')")
    if not v6 and len(parts) != 4:
        raise AclFormatError(f"white address {pattern!r}: an IPv4 range has four parts (192.168.*.*)")
    for index in range(1, min(len(parts), count)):
        bounds = _bounds(pattern, parts[index].strip(), base, top)
        if bounds is None:
            continue
        head = [p.strip() for p in parts[:index]]
        try:
            head_values = [int(p, base) for p in head]
        except ValueError:
            raise AclFormatError(f"white address {pattern!r}: {sep.join(head)!r} is not an address prefix") from None
        if any(not 0 <= v <= top for v in head_values):
            raise AclFormatError(f"white address {pattern!r}: a part is outside 0..{top}")
        low, high = bounds
        return _range_matcher(head_values, index, low, high, v6)
    raise AclFormatError(f"white address {pattern!r}: no '*' or range in its 2nd to {count}th part")


def _range_matcher(head: list[int], index: int, low: int, high: int, v6: bool) -> Matcher:
    def match(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.strip())
        except ValueError:
            return False
        if (ip.version == 6) != v6:
            return False
        # From the packed bytes: ``exploded`` raises on a scoped address (fe80::1%eth0) in 3.11.
        packed = ip.packed
        values = [int.from_bytes(packed[i:i + 2], "big") for i in range(0, 16, 2)] if v6 else list(packed)
        return values[:index] == head and low <= values[index] <= high
    return match


def address_matcher(pattern) -> Matcher:
    """A predicate over peer addresses for one pattern of the table above."""
    if pattern is None or not str(pattern).strip():
        return lambda address: False
    pattern = str(pattern).strip()
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return lambda address: True
    if pattern.endswith("}") and "{" in pattern:
        return _braces(pattern)
    if "," in pattern:
        return _exact_set(pattern, pattern.split(","))
    if "*" in pattern or ("-" in pattern and not _normal(pattern)):
        return _range(pattern)
    return _exact_set(pattern, [pattern])


def host_of(peer: str) -> str:
    """The IP of ``host:port`` (``[v6]:port`` too) or of a bare address."""
    peer = (peer or "").strip()
    if peer.startswith("["):
        return peer[1:peer.find("]")] if "]" in peer else peer[1:]
    if peer.count(":") == 1:
        return peer.split(":", 1)[0]
    return peer
