"""The remoting door writes the answers to the requests of one read together: a client with many
requests in flight (the Java client's async sends, 64 at a time) gets them for a system call per
16 answers, not one each (py-spy put 19% of a broker's samples in one send() an answer). Answers
stay in their requests' order; a big answer does not wait for the rest, and an answer given later
(a flush wait, a long poll) is written when it is given."""

import fcntl
import socket
import struct
import termios
import time

import pytest

from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.remoting_format import FrameDecoder, decode_frame_payload, encode_frame
from rocketbox.cluster.remoting_transport import CORKED_FRAMES_MAX, RemotingServer
from rocketbox.cluster.wire_format import Command
from tests.unit.test_remoting_arrival_stamps import DEADLINE_S, _serve_until

BIG_BODY = b"b" * (300 * 1024)


@pytest.fixture
def door():
    later = []

    def pull(request, reply):
        if request.fields.get("later"):
            later.append((request, reply))   # answered when the test says, as a long poll is
            return None
        return request.response(ResponseCode.SUCCESS, body=BIG_BODY if request.fields.get("big") else b"")

    handlers = {RequestCode.SEND_MESSAGE: lambda request, reply: request.response(ResponseCode.SUCCESS,
                                                                                  {"queueOffset": request.fields["n"]}),
                RequestCode.PULL_MESSAGE: pull}
    server = RemotingServer("127.0.0.1", 0, handlers, name="answer-writes")
    host, port = server.address.split(":")
    client = socket.create_connection((host, int(port)), timeout=DEADLINE_S)
    _serve_until(server, lambda: server._connections)   # accepted
    yield server, client, later
    client.close()
    server.close()


def _send_in_one_read(server, client, frames: list[bytes]) -> None:
    """The frames, all in the door's receive queue before it reads: one read takes them."""
    data = b"".join(frames)
    client.sendall(data)
    conn = next(iter(server._connections.values()))
    deadline = time.monotonic() + DEADLINE_S
    while struct.unpack("i", fcntl.ioctl(conn.fd, termios.FIONREAD, b"\0" * 4))[0] < len(data):
        assert time.monotonic() < deadline, "the frames did not reach the door's socket"
        time.sleep(0.001)


def _answers(server, client, count: int) -> list[Command]:
    decoder, payloads = FrameDecoder(1 << 24), []

    def answered():
        server.on_events()
        try:
            payloads.extend(decoder.feed(client.recv(1 << 20, socket.MSG_DONTWAIT)))
        except BlockingIOError:
            pass
        return len(payloads) >= count
    _serve_until(server, answered)
    return [decode_frame_payload(payload)[0] for payload in payloads]


def _send(n: int) -> bytes:
    return encode_frame(Command(RequestCode.SEND_MESSAGE, {"n": str(n)}, b"x" * 100, opaque=n))


def test_the_answers_to_one_read_leave_together_in_order(door):
    server, client, _later = door
    count = 4 * CORKED_FRAMES_MAX
    _send_in_one_read(server, client, [_send(n) for n in range(1, count + 1)])
    writes_before = server.socket_writes
    answers = _answers(server, client, count)
    assert [(a.opaque, a.code, a.fields["queueOffset"]) for a in answers] == \
        [(n, ResponseCode.SUCCESS, str(n)) for n in range(1, count + 1)]
    assert server.socket_writes - writes_before == count // CORKED_FRAMES_MAX   # not one a request
    assert server.info()["socketWrites"] == server.socket_writes


def test_a_big_answer_does_not_wait_and_a_late_answer_is_written_when_given(door):
    server, client, later = door
    frames = [encode_frame(Command(RequestCode.PULL_MESSAGE, {"later": "1"}, opaque=1)),
              encode_frame(Command(RequestCode.PULL_MESSAGE, {"big": "1"}, opaque=2)), _send(3)]
    _send_in_one_read(server, client, frames)
    answers = _answers(server, client, 2)
    assert [(a.opaque, len(a.body)) for a in answers] == [(2, len(BIG_BODY)), (3, 0)]
    request, reply = later.pop()
    reply(request.response(ResponseCode.SUCCESS))
    assert [a.opaque for a in _answers(server, client, 1)] == [1]
