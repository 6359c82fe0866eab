"""The in-box wake channels between one broker's processes.

Linux abstract-namespace UNIX datagram sockets (``\\0rocketbox-<digest>-<channel>``): no file to
clean up, no path length limit from the data directory, never reachable from the network. The
name is derived from the store directory so two brokers on one machine never collide.

| channel | bound by | sent to by | carries |
| --- | --- | --- | --- |
| flush | flush worker | broker | sync flush: "bytes were written" (a send may wait): flush now |
| reput | reput worker | broker, flush worker under sync flush | "new bytes were written" (sync flush: "flushed"): index now |
| notify | broker | flush worker | "flushed_pos moved" |

The messages are wake-ups only: positions themselves are read from the shared control block,
where each cursor has one writer. A datagram wakes the receiving thread itself: one wake-up,
where a ZeroMQ PUSH/PULL pair took three (the sender's I/O thread, the receiver's, then the
receiver), and on this VM each wake-up of a sleeping thread cost tens of microseconds of the
sender's CPU (perf/RESULTS.md).
"""

from __future__ import annotations

import errno
import os
import socket
import time

FLUSHED = b"F"
WAKE = b"W"

# Datagrams stay well under the default socket buffer (net.core.wmem_default, 208 KiB).
DATAGRAM_BYTES_MAX = 64 * 1024
BIND_WAIT_S_MAX = 5.0


try:
    # CPython's own SHA-1, the digest hashlib gives: hashlib loads OpenSSL (libcrypto, ~4 MB resident
    # and its start-up allocations) into the supervisor, which imports this module for the workers it
    # forks, and into every worker forked after it; a name needs no fast hash.
    from _sha1 import sha1
except ImportError:   # an interpreter without the module
    from hashlib import sha1


def _name(store_dir: str, channel: str) -> bytes:
    digest = sha1(os.path.realpath(store_dir).encode()).hexdigest()[:16]
    return f"\0rocketbox-{digest}-{channel}".encode()


def flush_wake(store_dir: str) -> bytes:
    return _name(store_dir, "flush")


def reput_wake(store_dir: str) -> bytes:
    return _name(store_dir, "reput")


def broker_notify(store_dir: str) -> bytes:
    return _name(store_dir, "notify")


class Receiver:
    """The bound end: ``fileno()`` goes into the process's poller; ``drain()`` empties it."""

    def __init__(self, address: bytes):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)
        deadline = time.monotonic() + BIND_WAIT_S_MAX
        while True:
            try:
                self.sock.bind(address)
                break
            except OSError as exc:
                # The previous holder (a killed worker being replaced) may not be gone yet.
                if exc.errno != errno.EADDRINUSE or time.monotonic() >= deadline:
                    self.sock.close()
                    raise
                time.sleep(0.01)

    def fileno(self) -> int:
        return self.sock.fileno()

    def drain(self, count_max: int = 256) -> list[bytes]:
        out = []
        for _ in range(count_max):
            try:
                out.append(self.sock.recv(DATAGRAM_BYTES_MAX))
            except (BlockingIOError, InterruptedError):
                break
        return out

    def close(self) -> None:
        self.sock.close()


class CoalescedWake:
    """Wakes a worker at once, but at most once per ``interval_s``: a wake asked for sooner goes
    when the interval ends (``call_at`` schedules it on the broker's loop); an urgent one goes now."""

    def __init__(self, sender: "Sender", interval_s: float, call_at):
        self.sender = sender
        self.interval_s = interval_s
        self._call_at = call_at
        self._woken_at_s = float("-inf")
        self._wanted = False
        self._scheduled = False

    def wake(self, urgent: bool = False) -> None:
        now = time.monotonic()
        due = self._woken_at_s + self.interval_s
        if urgent or now >= due:
            self._send(now)
            return
        self._wanted = True
        if not self._scheduled:
            self._scheduled = True
            self._call_at(due, self._when_due)

    def _when_due(self) -> None:
        self._scheduled = False
        if self._wanted:
            self._send(time.monotonic())

    def _send(self, now: float) -> None:
        self._wanted = False
        self._woken_at_s = now
        self.sender.send()


class Sender:
    """The sending end; ``send`` never blocks and returns whether the datagram was queued."""

    def __init__(self, address: bytes):
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.setblocking(False)

    def send(self, payload: bytes = WAKE) -> bool:
        try:
            self.sock.sendto(payload, self.address)
            return True
        except (BlockingIOError, InterruptedError):
            return False   # the receiver has wakes queued: it will look anyway
        except OSError as exc:
            if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
                return False   # the receiver is restarting: it reads the control block when back
            raise

    def close(self) -> None:
        self.sock.close()
