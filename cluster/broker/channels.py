"""Names of the in-box ZeroMQ channels between one broker's processes.

Abstract-namespace IPC sockets (Linux ``ipc://@name``): no file to clean up, no path
length limit from the data directory, never reachable from the network. The name is
derived from the store directory so two brokers on one machine never collide.

| channel | bound by | connected by | carries |
| --- | --- | --- | --- |
| flush_wake | flush worker (PULL) | broker (PUSH) | sync flush: "bytes were written" (a send may wait): flush now |
| reput_wake | reput worker (PULL) | broker, flush worker under sync flush (PUSH) | "new bytes were written" (sync flush: "flushed"): dispatch now |
| broker_notify | broker (PULL) | flush, reput workers (PUSH) | "flushed_pos / dispatched_pos moved" (+ queues touched) |

The messages are wake-ups only: positions themselves are read from the shared
control block, where each cursor has one writer.
"""

from __future__ import annotations

import hashlib
import os

import zmq

FLUSHED = b"F"
DISPATCHED = b"D"
WAKE = b"W"


def _base(store_dir: str) -> str:
    digest = hashlib.sha1(os.path.realpath(store_dir).encode()).hexdigest()[:16]
    return f"ipc://@rocketbox-{digest}"


def flush_wake(store_dir: str) -> str:
    return _base(store_dir) + "-flush"


def reput_wake(store_dir: str) -> str:
    return _base(store_dir) + "-reput"


def broker_notify(store_dir: str) -> str:
    return _base(store_dir) + "-notify"


def wake_socket(context, endpoint: str) -> zmq.Socket:
    """A PUSH socket that wakes the worker bound at ``endpoint`` (a few wakes queued at most)."""
    sock = context.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 16)
    sock.connect(endpoint)
    return sock


def wake(sock: zmq.Socket) -> None:
    try:
        sock.send(WAKE, zmq.NOBLOCK)
    except zmq.Again:
        pass  # a wake is already queued, or the worker is restarting: it polls anyway


def encode_touched(queues) -> bytes:
    """Queues a dispatch step touched, as "topic\\x00qid\\n" lines (topic names have no NUL)."""
    return b"".join(f"{topic}\x00{qid}\n".encode() for topic, qid in queues)


def decode_touched(raw: bytes) -> list[tuple[str, int]]:
    out = []
    for line in raw.split(b"\n"):
        if line:
            topic, _, qid = line.partition(b"\x00")
            out.append((topic.decode(), int(qid)))
    return out
