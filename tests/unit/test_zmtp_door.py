"""The native door served by an event loop (zmtp_door.ZmtpServer) over real 127.0.0.1 sockets: libzmq's
DEALER and RocketBox's own ZMTP client get their answers, the door's own requests reach them, a
CURVE client is refused in words, a malformed message is answered SYSTEM_ERROR and a stream that is
not ZMTP is closed while the door serves on; heartbeats keep a live connection and close a dead one;
a stranger that never sends a request is closed within the unproven time."""

import socket
import threading
import time

import pytest
import zmq

from rocketbox.cluster import zmtp_door
from rocketbox.cluster import zmtp_format as zf
from rocketbox.cluster.acl.curve import ClientKeys
from rocketbox.cluster.client_transport import AccessRefused
from rocketbox.cluster.event_loop import EventLoop
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.remoting_admission import AdmissionLimits
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.wire_format import Command, decode_header, from_frames, to_frames
from rocketbox.cluster.zmq_transport import RpcClient
from rocketbox.cluster.zmtp_door import ZmtpServer

ECHO = 7


def _echo(request: Command, _reply) -> Command:
    return request.response(ResponseCode.SUCCESS, body=request.body[::-1])


class LoopDoor:
    """A ZmtpServer on 127.0.0.1 (a free port) served by an EventLoop on its own thread."""

    def __init__(self, limits: AdmissionLimits = AdmissionLimits()):
        self.loop = EventLoop()
        self.closed_peers: list[bytes] = []
        self.server = ZmtpServer("tcp://127.0.0.1:0", {ECHO: _echo}, name="test door", frame_bytes_max=1 << 20,
                                 limits=limits, on_disconnect=self.closed_peers.append)
        self.server.attach(self.loop)
        self.endpoint = self.server.endpoint
        self._thread = threading.Thread(target=self.loop.run, daemon=True)
        self._thread.start()

    def on_loop(self, callback) -> None:
        self.loop.call_at(0.0, callback)

    def close(self) -> None:
        self.loop.stopping = True
        self._thread.join(5)
        self.server.close()


@pytest.fixture
def door():
    door = LoopDoor()
    yield door
    door.close()


def _dealer(endpoint: str) -> zmq.Socket:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(endpoint)
    return sock


def _answer(sock: zmq.Socket) -> Command:
    assert sock.poll(5000), "no answer from the door"
    return from_frames(sock.recv_multipart())


def _handshaken(port: int) -> socket.socket:
    """A raw TCP connection through the greeting and READY, as a DEALER."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(zf.greeting() + zf.ready(b"DEALER"))
    reader = zf.FrameReader(1 << 20)
    while reader.take(zf.GREETING_BYTES) is None:
        reader.feed(sock.recv(4096))
    return sock


def test_libzmq_and_the_direct_client_get_answers_and_the_doors_requests(door):
    dealer = _dealer(door.endpoint)
    try:
        dealer.send_multipart(to_frames(Command(ECHO, {}, b"abc", opaque=5)))
        answer = _answer(dealer)
        assert (answer.code, answer.opaque, answer.body, answer.is_response) == (ResponseCode.SUCCESS, 5, b"cba", True)
        # A door -> client request reaches the client's connection (a NOTIFY_CONSUMER_IDS_CHANGED's way).
        peer = next(iter(door.server._by_peer))
        door.on_loop(lambda: door.server.notify(peer, Command(40, {"consumerGroup": "G"}, b"")))
        pushed = _answer(dealer)
        assert pushed.code == 40 and pushed.is_oneway and not pushed.is_response
    finally:
        dealer.close()
    client = RpcClient(direct_sync=True)
    try:
        for i in range(50):
            answer = client.call(door.endpoint, Command(ECHO, {}, f"m{i}".encode()), 5000)
            assert answer.body == f"m{i}".encode()[::-1]
        assert client.call_async(door.endpoint, Command(ECHO, {}, b"xy"), 5000).result(5).body == b"yx"
    finally:
        client.close()
    assert door.server.requests_served == 52


def test_a_client_with_curve_keys_is_told_to_leave_them_out(door):
    server_public, _ = zmq.curve_keypair()
    public, secret = zmq.curve_keypair()
    client = RpcClient(curve=ClientKeys(server_public, public, secret))
    try:
        with pytest.raises(AccessRefused, match="access control is off .* leave its keys out"):
            client.call(door.endpoint, Command(ECHO, {}, b"k"), 5000)
    finally:
        client.close()


def test_a_malformed_message_is_answered_and_a_foreign_stream_closed_while_the_door_serves_on(door):
    dealer = _dealer(door.endpoint)
    port = int(door.endpoint.rsplit(":", 1)[1])
    try:
        dealer.send_multipart([b"\x00", b"not a header", b"third"])
        answer = _answer(dealer)
        assert answer.code == ResponseCode.SYSTEM_ERROR and "malformed frame" in answer.remark
        # A RocketMQ remoting frame at the native door: the door's greeting, then the close.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"\x00\x00\x00\x10\x00\x00\x00\x0c{\"code\":105}")
            received = b""
            while chunk := raw.recv(4096):
                received += chunk
            assert received == zf.ServerSession.opening()
        dealer.send_multipart(to_frames(Command(ECHO, {}, b"still", opaque=9)))
        assert _answer(dealer).body == b"llits"
    finally:
        dealer.close()
    assert door.server.malformed_frames == 2


def test_heartbeats_keep_a_live_connection_and_close_a_dead_one(monkeypatch):
    monkeypatch.setattr(zmtp_door, "HEARTBEAT_S", 1.5)   # the door checks once a second
    door = LoopDoor()
    port = int(door.endpoint.rsplit(":", 1)[1])
    dealer = _dealer(door.endpoint)
    raw = _handshaken(port)
    try:
        dealer.send_multipart(to_frames(Command(ECHO, {}, b"a")))
        _answer(dealer)
        raw.sendall(zf.message(to_frames(Command(ECHO, {}, b"b"))))
        # The raw peer reads the door's PING and never answers: closed after two heartbeats of silence.
        raw.settimeout(15)
        received, started = b"", time.monotonic()
        while chunk := raw.recv(4096):
            received += chunk
        assert zf.command(b"PING", b"\x00\x00") in received
        assert time.monotonic() - started < 2 * zmtp_door.HEARTBEAT_S + 5
        wait_until(lambda: door.closed_peers, 5, what="the door's close of the silent connection")   # told after it
        assert len(door.closed_peers) == 1
        # libzmq answers the PINGs: its connection lives on through the same silence, and longer.
        time.sleep(2 * zmtp_door.HEARTBEAT_S)
        assert door.server.info()["connections"] == 1
        dealer.send_multipart(to_frames(Command(ECHO, {}, b"c")))
        assert _answer(dealer).body == b"c"
        assert door.server._serial == 2   # no reconnect
    finally:
        raw.close()
        dealer.close()
        door.close()


def test_a_stranger_that_sends_no_request_is_closed_in_the_unproven_time():
    door = LoopDoor(AdmissionLimits(unproven_timeout_s=1.0))
    port = int(door.endpoint.rsplit(":", 1)[1])
    try:
        silent = socket.create_connection(("127.0.0.1", port), timeout=10)
        greeted = _handshaken(port)
        greeted.sendall(b"\x02" + (1 << 19).to_bytes(8, "big") + b"half")   # half a frame, held
        started = time.monotonic()
        for sock in (silent, greeted):
            while sock.recv(4096):
                pass
        assert time.monotonic() - started < 4
        wait_until(lambda: door.server.info()["connections"] == 0, 5, what="the door's table emptied")
        assert door.server.connections_timed_out == 2
        silent.close()
        greeted.close()
    finally:
        door.close()


def test_the_door_decodes_what_libzmq_frames():
    """Golden: the bytes a libzmq DEALER puts on the wire for [header, body] are one message here."""
    header = to_frames(Command(ECHO, {"k": "v"}, b"", opaque=3))[0]
    session = zf.ServerSession(1 << 20)
    assert session.feed(zf.greeting() + zf.ready(b"DEALER") + zf.message([header, b"x" * 300])) == \
        [[header, b"x" * 300]]
    assert decode_header(header).fields == {"k": "v"}
