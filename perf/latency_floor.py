"""``python -m rocketbox.perf.latency_floor``: what a round trip between two Python processes costs
on this machine before any work, sleeping or polling: the bound below which no
send's latency can go here.

A forked echo server and a client exchange 150 bytes over loopback TCP (TCP_NODELAY), 5,000
round trips a run, three runs a mode: both ends sleeping in ``recv`` (as Redis and its clients
do), the client polling without sleeping, the server polling, and both polling. On a small VM
the difference is the price of waking a sleeping thread (an inter-processor interrupt and a
context switch), which no work of ours can remove.
"""

from __future__ import annotations

import os
import socket
import sys
import time

ROUND_TRIPS = 5_000
RUNS = 3
POLL_S_MAX = 0.0005
MODES = {"both sleep": (False, False), "client polls": (True, False), "server polls": (False, True),
         "both poll": (True, True)}


def _recv(sock: socket.socket, poll: bool) -> bytes:
    if poll:
        sock.setblocking(False)
        end = time.perf_counter() + POLL_S_MAX
        try:
            while time.perf_counter() < end:
                try:
                    return sock.recv(4096)
                except BlockingIOError:
                    pass
        finally:
            sock.setblocking(True)
    return sock.recv(4096)


def measure(client_polls: bool, server_polls: bool) -> list[tuple[float, float]]:
    """(p50, p99) in us of each run."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    address = listener.getsockname()
    pid = os.fork()
    if pid == 0:   # the echo server
        conn, _ = listener.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while data := _recv(conn, server_polls):
            conn.sendall(data)
        os._exit(0)
    listener.close()
    client = socket.create_connection(address)
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    out = []
    try:
        for _ in range(RUNS):
            lat = []
            for _ in range(ROUND_TRIPS):
                t0 = time.perf_counter()
                client.sendall(b"x" * 150)
                _recv(client, client_polls)
                lat.append((time.perf_counter() - t0) * 1e6)
            lat.sort()
            out.append((lat[len(lat) // 2], lat[int(len(lat) * 0.99)]))
    finally:
        client.close()
        os.waitpid(pid, 0)
    return out


def main() -> int:
    for name, (client_polls, server_polls) in MODES.items():
        runs = measure(client_polls, server_polls)
        p50 = sorted(r[0] for r in runs)
        p99 = sorted(r[1] for r in runs)
        print(f"{name:>13}: p50 {p50[1]:6.0f} us  p99 {p99[1]:6.0f} us  (medians of {RUNS} runs of {ROUND_TRIPS:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
