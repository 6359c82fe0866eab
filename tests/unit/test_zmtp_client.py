"""The native client's sync calls on its own ZMTP sockets (zmtp_client.py, zmtp_calls.py) against
real libzmq ROUTER doors over 127.0.0.1: the same answers as through libzmq, heartbeats answered
while idle or waiting, a door that closed the connection reconnected, a CURVE door refused in
words, a lost connection failing the call at once, and no libzmq I/O thread in the process."""

import os
import subprocess
import sys
import threading
import time

import pytest
import zmq

from rocketbox.cluster.client_transport import AccessRefused, RequestTimeout, TransportError
from rocketbox.cluster.testing import free_ports
from rocketbox.cluster.wire_format import Command, from_frames, to_frames
from rocketbox.cluster.zmq_transport import RpcClient


class EchoDoor:
    """A ROUTER on 127.0.0.1 answering each request with code 0 and its body reversed, after
    ``delay_s``; heartbeats as given (ms)."""

    def __init__(self, port: int, heartbeat_ms: int = 0, heartbeat_timeout_ms: int = 0, delay_s: float = 0.0,
                 curve: bool = False, close_on_request: bool = False):
        self.close_on_request = close_on_request
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        if heartbeat_ms:
            self.sock.setsockopt(zmq.HEARTBEAT_IVL, heartbeat_ms)
            self.sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, heartbeat_timeout_ms or heartbeat_ms)
        if curve:
            public, secret = zmq.curve_keypair()
            self.sock.curve_server = True
            self.sock.curve_publickey, self.sock.curve_secretkey = public, secret
        self.monitor = self.sock.get_monitor_socket(zmq.EVENT_ACCEPTED | zmq.EVENT_DISCONNECTED)
        self.sock.bind(f"tcp://127.0.0.1:{port}")
        self.delay_s = delay_s
        self.requests = 0
        self.last_peer = None
        self._answers = []
        self._outbox = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            while self._outbox:
                self.sock.send_multipart(self._outbox.pop(0))
            if not self.sock.poll(20):
                continue
            peer, *frames = self.sock.recv_multipart()
            self.last_peer = peer
            if self.close_on_request:
                self.sock.close(0)   # the connection goes with it, the request unanswered
                return
            request = from_frames(frames)
            if request.is_response:
                self._answers.append(request.body)
                continue
            self.requests += 1
            if request.is_oneway:
                continue
            time.sleep(self.delay_s)
            self.sock.send_multipart([peer, *to_frames(request.response(0, body=request.body[::-1]))])

    def ask(self, peer: bytes, request: Command) -> None:
        """Send ``request`` to the client ``peer`` (from the door's thread, which owns the socket)."""
        self._outbox.append([peer, *to_frames(request)])

    def answers_seen(self, timeout_s: float) -> list[bytes]:
        deadline = time.monotonic() + timeout_s
        while not self._answers and time.monotonic() < deadline:
            time.sleep(0.01)
        return list(self._answers)

    def events(self) -> list[int]:
        out = []
        while self.monitor.poll(0):
            frames = self.monitor.recv_multipart()
            out.append(int.from_bytes(frames[0][:2], "little"))
        return out

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.monitor.close(0)
        if not self.sock.closed:
            self.sock.close(0)
        self.ctx.term()


@pytest.fixture
def port():
    return free_ports(1)[0]


def _call(client: RpcClient, port: int, body: bytes = b"abc", timeout_ms: int = 3000) -> Command:
    return client.call(f"tcp://127.0.0.1:{port}", Command(7, {"k": "v"}, body), timeout_ms)


def test_calls_and_oneways_reach_a_libzmq_router(port):
    door = EchoDoor(port)
    client = RpcClient(direct_sync=True, spin_max_s=0.001)
    try:
        for i in range(50):
            assert _call(client, port, b"x%d" % i + b"y" * (i * 20)).body == (b"x%d" % i + b"y" * (i * 20))[::-1]
        assert _call(client, port, b"z" * 200_000).body == b"z" * 200_000   # long frames both ways
        client.oneway(f"tcp://127.0.0.1:{port}", Command(7, {}, b"one way"))
        deadline = time.monotonic() + 5
        while door.requests < 52 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert door.requests == 52
        assert door.events().count(zmq.EVENT_ACCEPTED) == 1   # one connection for all of them
    finally:
        client.close()
        door.close()


def test_heartbeats_are_answered_while_a_call_waits(port):
    # The door PINGs every 100 ms and drops a connection that sends nothing within 300 ms of a PING:
    # an answer that takes 1.5 s still arrives, on the connection it was asked on.
    door = EchoDoor(port, heartbeat_ms=100, heartbeat_timeout_ms=300, delay_s=1.5)
    client = RpcClient(direct_sync=True)
    try:
        assert _call(client, port, b"slow").body == b"wols"
        assert zmq.EVENT_DISCONNECTED not in door.events()
    finally:
        client.close()
        door.close()


def test_a_connection_the_door_closed_while_idle_is_made_again(port):
    door = EchoDoor(port, heartbeat_ms=50, heartbeat_timeout_ms=100)
    client = RpcClient(direct_sync=True)
    try:
        assert _call(client, port).body == b"cba"
        deadline = time.monotonic() + 5   # nobody reads the idle connection: the door closes it
        while zmq.EVENT_DISCONNECTED not in door.events():
            assert time.monotonic() < deadline, "the door never closed the idle connection"
            time.sleep(0.02)
        assert _call(client, port, b"again").body == b"niaga"
    finally:
        client.close()
        door.close()


def test_a_door_that_starts_late_is_waited_for_within_the_deadline(port):
    client = RpcClient(direct_sync=True)
    doors = []
    try:
        with pytest.raises(TransportError, match="not reachable"):
            _call(client, port, timeout_ms=200)
        threading.Timer(0.3, lambda: doors.append(EchoDoor(port))).start()
        assert _call(client, port, timeout_ms=5000).body == b"cba"
    finally:
        client.close()
        time.sleep(0.05)
        for door in doors:
            door.close()


def test_a_curve_door_refuses_a_client_without_keys_in_words(port):
    door = EchoDoor(port, curve=True)
    client = RpcClient(direct_sync=True)
    try:
        with pytest.raises(AccessRefused, match="takes only ZeroMQ CURVE connections"):
            _call(client, port)
    finally:
        client.close()
        door.close()


@pytest.mark.parametrize("how", ["sync", "async"])
def test_a_connection_lost_during_a_call_fails_it_at_once(port, how):
    door = EchoDoor(port, close_on_request=True)
    client = RpcClient(direct_sync=True)
    try:
        t0 = time.monotonic()
        with pytest.raises(TransportError, match="lost") as caught:
            if how == "sync":
                _call(client, port, timeout_ms=8000)
            else:   # on the I/O thread's connection
                client.call_async(f"tcp://127.0.0.1:{port}", Command(7, {}, b"x"), 8000).result(10)
        assert not isinstance(caught.value, RequestTimeout)
        assert time.monotonic() - t0 < 4   # the door's close, not the 8 s time-out
    finally:
        client.close()
        door.close()


def test_async_calls_and_the_doors_own_requests_on_the_io_threads_connection(port):
    door = EchoDoor(port)
    client = RpcClient(direct_sync=True)
    asked = []
    client.server_request_handlers[40] = lambda request: (asked.append(request.body),
                                                          request.response(0, body=b"seen"))[1]
    try:
        futures = [client.call_async(f"tcp://127.0.0.1:{port}", Command(7, {}, b"n%d" % i), 3000) for i in range(200)]
        assert [f.result(10).body for f in futures] == [(b"n%d" % i)[::-1] for i in range(200)]
        # The door's own request to this client (as NOTIFY_CONSUMER_IDS_CHANGED comes) on the same
        # connection: the handler runs and its answer goes back.
        peer = door.last_peer
        door.ask(peer, Command(40, {}, b"hello"))
        deadline = time.monotonic() + 5
        while not asked and time.monotonic() < deadline:
            time.sleep(0.01)
        assert asked == [b"hello"]
        assert door.answers_seen(5) == [b"seen"]
    finally:
        client.close()
        door.close()


CHILD = """
import sys, os
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient
client = RpcClient(direct_sync=True)
for _ in range(20):
    assert client.call(sys.argv[1], Command(7, {}, b"abc"), 3000).body == b"cba"
    assert client.call_async(sys.argv[1], Command(7, {}, b"xyz"), 3000).result(5).body == b"zyx"
names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
print(",".join(names))
"""


def test_sync_and_async_calls_start_no_libzmq_io_thread(port):
    # libzmq's I/O threads (ZMQbg/IO/n) are the wake-ups the direct path exists to avoid.
    door = EchoDoor(port)
    try:
        out = subprocess.run([sys.executable, "-c", CHILD, f"tcp://127.0.0.1:{port}"], capture_output=True,
                             text=True, timeout=60, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
        assert out.returncode == 0, out.stderr
        assert not [name for name in out.stdout.strip().split(",") if name.startswith("ZMQbg")], out.stdout
    finally:
        door.close()
