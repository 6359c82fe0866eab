"""A message's two ids: the offset message id a broker gives it (where it is stored) and the
UNIQ_KEY id its producer gives it (MessageClientIDSetter). Pure: no I/O."""

from __future__ import annotations

import socket


def pack_host(ip: str, port: int) -> bytes:
    """IPv4 + port as 8 bytes (BORNHOST and STOREHOSTADDRESS of a record, the head of an offset id)."""
    return socket.inet_aton(ip) + port.to_bytes(4, "big")


def unpack_host(raw: bytes) -> tuple[str, int]:
    return socket.inet_ntoa(raw[:4]), int.from_bytes(raw[4:8], "big")


def offset_msg_id(store_host: bytes, phys_offset: int) -> str:
    """RocketMQ's offset message id: store IPv4 + port (int32) + phys offset (int64), 32 upper hex."""
    return (store_host[:8] + phys_offset.to_bytes(8, "big")).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(ip, port, phys_offset) from an offset message id; ValueError when it is not one."""
    if len(msg_id) != 32:
        raise ValueError(f"offset message id must be 32 hex characters, got {len(msg_id)}")
    raw = bytes.fromhex(msg_id)
    ip, port = unpack_host(raw[:8])
    return ip, port, int.from_bytes(raw[8:], "big")


UNIQUE_ID_COUNTER_DIGITS = 12


def unique_id_prefix(ipv4: bytes, pid: int, salt: bytes) -> str:
    """The first 20 hex characters of a client's UNIQ_KEY ids: IPv4 (4) + pid (2) + salt (4 bytes).

    As RocketMQ's MessageClientIDSetter, 16 bytes in all, but laid out for uniqueness without a
    clock: the random per-process salt tells a reused pid apart; a 48-bit counter follows."""
    return (ipv4[:4] + (pid & 0xFFFF).to_bytes(2, "big") + salt[:4]).hex().upper()


def unique_id(prefix: str, counter: int) -> str:
    """A UNIQ_KEY id: the prefix + the counter in 12 upper-hex digits (the helper's
    rb_encode_items_shared writes the same)."""
    return f"{prefix}{counter:0{UNIQUE_ID_COUNTER_DIGITS}X}"
