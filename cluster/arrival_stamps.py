"""Linux's kernel receive stamps on a door's reads: when the newest segment of a read arrived, so
fast failure (``fast_failure.py``) knows a request's wait instead of estimating it."""

from __future__ import annotations

import socket
import struct
import sys
import time

# Python does not name the option.
SO_TIMESTAMPNS = 35 if sys.platform == "linux" else None
_TIMESPEC = struct.Struct("@qq")
STAMP_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)


def enable_arrival_stamps(listener: socket.socket) -> bool:
    if SO_TIMESTAMPNS is None:
        return False
    try:
        listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    return True


def arrived_at(ancillary, estimate: float) -> float:
    """The monotonic time at which the newest segment of a read arrived (the kernel's receive
    stamp, on the real-time clock): every request the read completes had arrived by then, so it
    waited at least until now. Without a stamp, ``estimate`` (a moment before they arrived): the
    kernel turns stamping on in a deferred work item once the first socket asks, so the first
    reads after a start can come unstamped."""
    for level, kind, raw in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(raw)
            # Never before the estimate: a step of the real-time clock must not age a request.
            return max(estimate, seconds + nanoseconds * 1e-9 - time.time() + time.monotonic())
    return estimate
