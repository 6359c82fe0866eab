"""The bounded HTTP door (``cluster/http_door.py``) in process, on real sockets, with small bounds and
short deadlines: a head sent a byte at a time is closed at its deadline with 408 (trickling does not
extend it); a client that does not read a large answer is closed at the drain deadline; past the
per-client bound a client loses its own connection that waited longest, past the bound on all the
client holding the most loses one, and a request being served is never pushed out (a new connection
is refused 503 instead). Clients on other loopback addresses (127.0.0.2, ...) stand for other hosts."""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import time

import pytest

from rocketbox.cluster.http_door import BODY, DRAIN, HEAD, DoorLimits, HttpDoor
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.topology import free_ports

pytestmark = pytest.mark.timeout(60)

BIG = 32 * 1024 * 1024
LIMITS = DoorLimits(head_timeout_s=1.0, body_timeout_s=1.0, idle_timeout_s=5, connections_max=6,
                    connections_per_client_max=4)


@pytest.fixture
def door():
    release = threading.Event()

    async def app(scope, receive, send):
        if scope["path"] == "/slow":   # held in the server's stage until released
            while not release.is_set():
                await asyncio.sleep(0.02)
        body = b"x" * BIG if scope["path"] == "/big" else b"ok"
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})

    served = HttpDoor(app, "127.0.0.1", free_ports(1)[0], "test", LIMITS)
    served.start()
    served.release = release
    try:
        yield served
    finally:
        release.set()
        served.close()


def _open(door: HttpDoor, data: bytes, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", door.port), timeout=10, source_address=(source, 0))
    if data:
        sock.sendall(data)
    return sock


def _connections(door: HttpDoor) -> list:
    """The door's connections, read from the test's thread while the door's loop may change the set."""
    for _ in range(100):
        try:
            return [c for c in list(door._server.server_state.connections) if not c.transport.is_closing()]
        except RuntimeError:   # changed size during the copy
            continue
    raise AssertionError("could not read the door's connections")


def _live(door: HttpDoor) -> int:
    return len(_connections(door))


def _ended(sock: socket.socket, timeout_s: float = 10.0) -> bytes:
    """What the door sent before it closed the connection (AssertionError if it does not close)."""
    deadline = time.monotonic() + timeout_s
    received = bytearray()
    try:
        while time.monotonic() < deadline:
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            data = sock.recv(1 << 20)
            if not data:
                return bytes(received)
            received += data[:1024] if len(received) < 1024 else b""   # the head is what tests read
    except ConnectionResetError:
        return bytes(received)
    except socket.timeout:
        pass
    raise AssertionError(f"the door did not close the connection within {timeout_s} s")


def _still_open(sock: socket.socket) -> bool:
    sock.settimeout(0.2)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except socket.timeout:
        return True
    except OSError:
        return False


def test_a_trickled_head_is_closed_at_its_deadline_with_408(door):
    started = time.monotonic()
    sock = _open(door, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    sent = 0
    while not select.select([sock], [], [], 0.2)[0] and time.monotonic() - started < 10:
        sock.send(b"x")   # a byte every 0.2 s until the door answers
        sent += 1
    answer = _ended(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert sent >= 3 and door.counters.timed_out[HEAD] == 1   # bytes kept coming: the deadline held anyway
    sock.close()
    # A whole request is served, and a connection that sends nothing is closed without an answer.
    with _open(door, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n") as good:
        assert _ended(good).endswith(b"ok")
    with _open(door, b"") as silent:
        assert _ended(silent) == b""


def test_a_slow_body_and_an_unread_answer_are_closed_at_their_deadline(door):
    with _open(door, b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc") as body:
        assert _ended(body).startswith(b"HTTP/1.1 200 ")   # answered at once; the body still owed
    wait_until(lambda: door.counters.timed_out[BODY] == 1, 10, what="the body deadline")
    unread = _open(door, b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    wait_until(lambda: door.counters.timed_out[DRAIN] == 1, 10, what="the drain deadline")
    _ended(unread)   # closed with most of the answer unsent
    unread.close()


def test_past_a_bound_the_connection_waiting_longest_of_the_busiest_client_goes(door):
    head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    a = []
    for _ in range(LIMITS.connections_per_client_max):
        a.append(_open(door, head, "127.0.0.2"))
        wait_until(lambda: _live(door) == len(a), 10, what="the door holding the connection")
    a.append(_open(door, head, "127.0.0.2"))   # past the per-client bound: a[0] goes
    assert _ended(a[0]).startswith(b"HTTP/1.1 503 ")   # it had sent part of a request: told why
    b = [_open(door, head, "127.0.0.3") for _ in range(2)]
    wait_until(lambda: _live(door) == LIMITS.connections_max, 10, what="the door full")
    b.append(_open(door, head, "127.0.0.3"))   # past the bound on all: the busiest client (a) loses a[1]
    assert _ended(a[1]).startswith(b"HTTP/1.1 503 ")
    assert all(_still_open(s) for s in a[2:] + b)
    assert door.counters.pushed_out == 2
    for s in a + b:
        s.close()


def test_requests_being_served_are_never_pushed_out(door):
    busy = [_open(door, b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", f"127.0.0.{10 + i}")
            for i in range(LIMITS.connections_max)]
    wait_until(lambda: [c.stage for c in _connections(door)] == ["server"] * LIMITS.connections_max, 10,
               what="every request being served")
    with _open(door, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as refused:
        assert _ended(refused).startswith(b"HTTP/1.1 503 ")
    assert door.counters.refused == 1
    door.release.set()
    for sock in busy:
        sock.settimeout(10)
        assert sock.recv(64).startswith(b"HTTP/1.1 200 ")
        sock.close()
