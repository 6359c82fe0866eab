"""The body of ACK_MESSAGES (RocketBox's own request: the gRPC proxy's acks of one read, one request a
broker, consumer group and topic; ``broker/pop.py``'s ``on_ack_batch``), the only place that knows it.

Request body: the receipt handles (``receipt_handle.py``'s text, which never holds a newline), UTF-8,
each followed by ``\\n``:

    v1 12 1700000000000 60000 0 1 42 9876 broker-a\\n
    v1 12 1700000000000 60000 0 1 43 10012 broker-a\\n

Response body: a JSON array with one ``[code, remark]`` a handle, in the request's order (code: the
ResponseCode ACK_MESSAGE would have answered for that handle alone; remark "" on success):

    [[0,""],[208,"no message to ack for G: ..."]]

Pure: no I/O. A body that does not parse is ``ValueError``.
"""

from __future__ import annotations

import json

# A request's handles at the most (the proxy's reads carry tens; a larger body is a peer's mistake).
HANDLES_MAX = 4096


def encode_handles(handles: list[str]) -> bytes:
    """The request body for ``handles``; ValueError for a handle with a newline (no receipt handle has one)."""
    if any("\n" in handle for handle in handles):
        raise ValueError("a receipt handle cannot contain a newline")
    return "".join(f"{handle}\n" for handle in handles).encode()


def decode_handles(body: bytes) -> list[str]:
    """The handles of a request body; ValueError when it is not one."""
    try:
        text = bytes(body).decode()
    except UnicodeDecodeError:
        raise ValueError("the handles are not UTF-8") from None
    if not text.endswith("\n"):
        raise ValueError("the handles' body is empty or does not end with a newline")
    handles = text[:-1].split("\n")
    if len(handles) > HANDLES_MAX:
        raise ValueError(f"{len(handles)} handles, more than {HANDLES_MAX}")
    return handles


def encode_outcomes(outcomes: list[tuple[int, str]]) -> bytes:
    return json.dumps([[int(code), remark] for code, remark in outcomes], separators=(",", ":")).encode()


def decode_outcomes(body: bytes, count: int) -> list[tuple[int, str]]:
    """``count`` (code, remark) pairs of a response body; ValueError when it holds anything else."""
    try:
        outcomes = json.loads(bytes(body))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ValueError("the outcomes are not JSON") from None
    if not isinstance(outcomes, list) or len(outcomes) != count or not all(
            isinstance(one, list) and len(one) == 2 and type(one[0]) is int and isinstance(one[1], str)
            for one in outcomes):
        raise ValueError(f"the outcomes are not {count} [code, remark] pairs")
    return [(code, remark) for code, remark in outcomes]
