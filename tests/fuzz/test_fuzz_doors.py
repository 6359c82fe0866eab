"""Random frames at a live broker's two doors through real sockets (the hypothesis-driven form of
``tests/integration/test_bad_input.py`` and ``tests/remoting/test_remoting_bad_input.py``, whose
helpers it uses). Each input is decoded here with the doors' own decoders to know what the broker
owes it: a request is answered with its opaque, a frame that does not decode gets SYSTEM_ERROR
"malformed frame", a response or a one-way request gets nothing, and a remoting length word that
cannot be trusted closes that connection. The broker serves on afterwards, never restarted."""

from __future__ import annotations

import struct

import pytest
import zmq
from hypothesis import strategies as st

from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.testing import LocalCluster, broker_runtime_info
from rocketbox.cluster.wire_format import Command, FrameError, decode_header, encode_header
from tests.fuzz import request_strategies
from tests.fuzz.budget import run_hypothesis
from tests.fuzz.strategies import mutated
from tests.remoting.test_remoting_bad_input import _connect, _read_frame

ANSWER_WAIT_MS = 15_000
# Codes whose answer waits on something else (a long poll, a pop's poll, a client's running info):
# the in-process handler target covers them.
WAITING = {RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE, RequestCode.GET_CONSUMER_RUNNING_INFO}
_codes = st.one_of(st.sampled_from(sorted(c for c in RequestCode if c not in WAITING)), st.integers(-5, 1 << 20)
                   .filter(lambda c: c not in WAITING))
_requests = _codes.flatmap(request_strategies.request).map(
    lambda cmd: Command(cmd.code, cmd.fields, cmd.body, opaque=abs(hash(cmd.body)) % (1 << 30) + 1))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("fuzz-doors"))) as cluster:
        yield cluster


def _waiting_opaque(header: bytes) -> int | None:
    """The opaque of a request that waits before its answer (WAITING), else None."""
    try:
        cmd = decode_header(header)
    except FrameError:
        return None
    return cmd.opaque if cmd.code in WAITING and not (cmd.is_response or cmd.is_oneway) else None


def _owed(header: bytes, frame_count: int, rocketmq_layout: bool = False):
    """What the broker owes a frame: ("answer", opaque), ("malformed", 0) or (None, 0)."""
    if frame_count not in (1, 2):
        return "malformed", 0
    try:
        cmd = decode_header(header, rocketmq_layout)
    except FrameError:
        return "malformed", 0
    if cmd.is_response or cmd.is_oneway or cmd.code in WAITING:
        return None, 0
    return "answer", cmd.opaque


class NativeDoor:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.sock = None
        # Opaques of requests answered when they stop waiting (a parked pull or pop): such an answer may
        # come during a later input on this socket and is not that input's.
        self.late: set[int] = set()

    def exchange(self, frames: list[bytes]) -> None:
        try:
            self._exchange(frames)
        except BaseException:
            self.close()   # answers left unread must not meet the next input
            raise

    def _exchange(self, frames: list[bytes]) -> None:
        if self.sock is None:
            self.sock = zmq.Context.instance().socket(zmq.DEALER)
            self.sock.setsockopt(zmq.LINGER, 0)
            self.sock.connect(self.endpoint)
        owed, opaque = _owed(frames[0], len(frames))
        self.sock.send_multipart(frames)
        if owed is None:
            self.late.add(_waiting_opaque(frames[0]))
            return
        answer = self._next_response(frames)
        if owed == "malformed":
            assert answer.code == ResponseCode.SYSTEM_ERROR and "malformed" in answer.remark, answer
        else:
            assert answer.opaque == opaque, (answer, frames)

    def _next_response(self, frames) -> Command:
        """The next response; requests the broker sends its clients (a heartbeat made this socket
        one: NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE) and the late answers of waiting
        requests sent before are passed over."""
        while True:
            assert self.sock.poll(ANSWER_WAIT_MS), f"no answer to {frames!r}"
            answer = decode_header(self.sock.recv_multipart()[0])
            if answer.is_response and answer.opaque not in self.late:
                return answer

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


@pytest.mark.fuzz(weight=2.0)
def test_native_door_answers_every_frame_it_owes_an_answer(fuzz_seconds, live):
    headers = _requests.map(encode_header)
    frame = st.one_of(headers, mutated(headers), st.binary(min_size=1, max_size=64))
    strategy = st.one_of(st.tuples(frame, _requests.map(lambda c: c.body)).map(list),
                         st.lists(frame, min_size=1, max_size=3))
    door = NativeDoor(f"tcp://{live.topology.brokers[0].address}")
    try:
        run_hypothesis("live native door", fuzz_seconds, strategy, door.exchange)
    finally:
        door.close()
    _serves_on(live)


def _remoting_stream(value) -> bytes:
    frames, bad_length = value
    stream = b"".join(frames)
    return stream + (struct.pack(">i", bad_length) + b"\x00" * 8 if bad_length is not None else b"")


def _frame(header: bytes, serialize_type: int, body: bytes) -> bytes:
    return struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


class _Answers:
    """Frames read from a connection, in order: one read may carry several answers (the bad-input
    tests' ``_read_frame`` keeps only the first of a read, enough for one request at a time)."""

    def __init__(self, sock, optional: set[int] = frozenset()):
        self.sock = sock
        self.optional = optional   # opaques of requests that may be answered at once or wait (a pull)
        self.decoder = rf.FrameDecoder()
        self.ready: list[bytes] = []

    def next(self) -> Command | None:
        """The next frame's command that is a response (the broker's own requests to its clients,
        and answers to ``optional`` requests, are passed over), or None once the broker closed the
        connection."""
        while True:
            while not self.ready:
                data = self.sock.recv(65536)
                if not data:
                    return None
                self.ready += self.decoder.feed(data)
            cmd = rf.decode_frame_payload(self.ready.pop(0))[0]
            if cmd.is_response and cmd.opaque not in self.optional:
                return cmd


class RemotingDoor:
    def __init__(self, port: int):
        self.port = port
        self.sock = None

    def exchange(self, stream: bytes) -> None:
        try:
            self._exchange(stream)
        finally:
            self.close()

    def _exchange(self, stream: bytes) -> None:
        decoder = rf.FrameDecoder()
        owed: list[tuple[str, int]] = []
        waiting: set[int] = set()
        closes = False
        try:
            payloads = decoder.feed(stream)
        except rf.BadFrameLength:
            payloads, closes = _complete_frames(stream), True
        for payload in payloads:
            try:
                cmd, _ = rf.decode_frame_payload(payload)
            except FrameError:
                owed.append(("malformed", 0))
                continue
            if cmd.code in WAITING and not (cmd.is_response or cmd.is_oneway):
                waiting.add(cmd.opaque)   # answered now if a message is there (a CI run saw it), or later
            elif not (cmd.is_response or cmd.is_oneway):
                owed.append(("answer", cmd.opaque))
        # A connection per input: what one input does to its connection cannot reach the next.
        self.sock = _connect(self.port)
        self.sock.settimeout(ANSWER_WAIT_MS / 1000)
        answers = _Answers(self.sock, waiting - {opaque for _kind, opaque in owed})
        self.sock.sendall(stream)
        # Answers are matched by opaque, as RocketMQ's clients match them: the sends of one read are
        # answered together at the read's end, after a malformed frame's answer among them.
        got = []
        for kind, opaque in owed:
            answer = answers.next()
            assert answer is not None, f"connection closed before answering {kind} {opaque}"
            got.append(answer)
        malformed = [a for a in got if a.code == ResponseCode.SYSTEM_ERROR and "malformed frame" in a.remark]
        assert len(malformed) == sum(kind == "malformed" for kind, _ in owed), got
        assert sorted(a.opaque for a in got if a not in malformed) == \
            sorted(opaque for kind, opaque in owed if kind == "answer"), got
        if closes:
            assert answers.next() is None, "an untrustworthy length left the connection open"
        self.close()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _complete_frames(stream: bytes) -> list[bytes]:
    """The frames before the one whose length word is refused."""
    frames, pos = [], 0
    while len(stream) - pos >= 4:
        (length,) = struct.unpack_from(">i", stream, pos)
        if length < 4 or length > rf.FRAME_BYTES_MAX_DEFAULT or pos + 4 + length > len(stream):
            break
        frames.append(stream[pos + 4:pos + 4 + length])
        pos += 4 + length
    return frames


@pytest.mark.fuzz(weight=2.0)
def test_remoting_door_answers_every_frame_or_closes_on_a_bad_length(fuzz_seconds, live):
    json_header = _requests.map(rf.encode_json_header)
    binary_header = _requests.filter(lambda c: -32768 <= c.code < 32768).map(lambda c: encode_header(c, True))
    frame = st.one_of(
        st.builds(_frame, st.one_of(json_header, mutated(json_header)), st.just(rf.SERIALIZE_JSON),
                  st.binary(max_size=32)),
        st.builds(_frame, st.one_of(binary_header, mutated(binary_header)), st.just(rf.SERIALIZE_ROCKETMQ),
                  st.binary(max_size=32)),
        st.builds(_frame, st.binary(max_size=40), st.integers(0, 255), st.binary(max_size=8)))
    bad_length = st.one_of(st.none(), st.none(), st.none(), st.sampled_from((-5, 0, 3, 64 * 1024 * 1024)))
    strategy = st.tuples(st.lists(frame, min_size=1, max_size=4), bad_length).map(_remoting_stream)
    door = RemotingDoor(live.topology.brokers[0].remoting_port)
    try:
        run_hypothesis("live remoting door", fuzz_seconds, strategy, door.exchange)
    finally:
        door.close()
    _serves_on(live)


def _serves_on(cluster: LocalCluster) -> None:
    info = broker_runtime_info(cluster.topology.brokers[0].address)
    assert info["doors"]["remoting"]["connections"] >= 0
    with _connect(cluster.topology.brokers[0].remoting_port) as sock:
        sock.sendall(rf.encode_frame(Command(RequestCode.GET_BROKER_RUNTIME_INFO, {}, opaque=9)))
        answer = _read_frame(sock, rf.FrameDecoder())
    assert answer is not None and answer.code == ResponseCode.SUCCESS and answer.opaque == 9
    assert cluster.child("broker-a")["restarts"] == 0
