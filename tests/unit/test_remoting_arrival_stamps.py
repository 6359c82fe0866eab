"""The remoting door knows when each request arrived (the kernel's receive stamps), so fast failure
(fast_failure.py) judges the request's own wait: a stall of the broker's loop that ended before a
request arrived is not that request's wait. A fresh-clone run saw the estimate get it wrong: a
freshly started broker, stalled 428 ms under CI load, answered the next plain request SYSTEM_BUSY
[TIMEOUT_CLEAN_QUEUE] "period in queue: 428ms". A request that really waited in the kernel past its
bound is still refused."""

import socket
import time

import pytest

from rocketbox.cluster.fast_failure import WaitBounds
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_format import FrameDecoder, decode_frame_payload, encode_frame
from rocketbox.cluster.arrival_stamps import SO_TIMESTAMPNS
from rocketbox.cluster.remoting_transport import RemotingServer
from rocketbox.cluster.wire_format import Command

BOUNDS = WaitBounds(send=200, pull=5000, ack=5000, heartbeat=5000, transaction=5000, admin=5000)
DEADLINE_S = 10


@pytest.fixture
def door():
    handlers = {RequestCode.SEND_MESSAGE: lambda request, reply: request.response(ResponseCode.SUCCESS)}
    server = RemotingServer("127.0.0.1", 0, handlers, name="stamps", wait_bounds=BOUNDS)
    if not server.arrival_stamps:
        server.close()
        pytest.skip("this kernel gives no receive stamps (SO_TIMESTAMPNS)")
    _await_kernel_stamps()
    host, port = server.address.split(":")
    client = socket.create_connection((host, int(port)), timeout=DEADLINE_S)
    _serve_until(server, lambda: server._connections)   # accepted
    yield server, client
    client.close()
    server.close()


def _await_kernel_stamps() -> None:
    """Until segments received are stamped: the kernel turns stamping on in a deferred work item
    once the first socket asks (a fresh-clone run read the first request without a stamp)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sender = socket.create_connection(listener.getsockname(), timeout=DEADLINE_S)
    receiver, _ = listener.accept()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            sender.sendall(b"x")
            _data, ancillary, _flags, _address = receiver.recvmsg(16, socket.CMSG_SPACE(16))
            if ancillary:
                return
            assert time.monotonic() < deadline, "the kernel stamped no received segment"
            time.sleep(0.001)
    finally:
        for sock in (sender, receiver, listener):
            sock.close()


def _serve_until(server, condition) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, "the door did not get there in time"
        server.on_events()


def _answer(server, client) -> Command:
    decoder, payloads = FrameDecoder(1 << 20), []

    def answered():
        server.on_events()
        try:
            payloads.extend(decoder.feed(client.recv(65536, socket.MSG_DONTWAIT)))
        except BlockingIOError:
            pass
        return payloads
    _serve_until(server, answered)
    return decode_frame_payload(payloads[0])[0]


def _stall(server, seconds: float) -> None:
    """The loop's last look at the door, ``seconds`` ago (it did not run since: a stall)."""
    server._polled_at -= seconds
    server.backlog.drained_at -= seconds
    for conn in server._connections.values():
        if conn.behind_since is not None:   # accepted, not read yet
            conn.behind_since -= seconds


def test_a_request_that_arrives_after_a_stall_is_served(door):
    server, client = door
    _stall(server, 0.5)
    client.sendall(encode_frame(Command(RequestCode.SEND_MESSAGE, {})))
    answer = _answer(server, client)
    assert answer.code == ResponseCode.SUCCESS, answer.remark


def test_a_request_that_waited_in_the_kernel_past_its_bound_is_refused(door):
    server, client = door
    client.sendall(encode_frame(Command(RequestCode.SEND_MESSAGE, {})))
    time.sleep(0.3)   # the broker not reading: what is measured is this wait
    answer = _answer(server, client)
    assert answer.code == ResponseCode.SYSTEM_BUSY
    waited_ms = int(answer.remark.split("period in queue: ")[1].split("ms")[0])
    assert waited_ms >= 300, answer.remark
