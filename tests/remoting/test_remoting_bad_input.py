"""Bad input on the remoting TCP doors: every bad frame is answered with an error
or its connection is closed, warnings are rate-limited, memory stays bounded, and everyone else
keeps being served. Real bytes on real sockets against a LocalCluster."""

from __future__ import annotations

import json
import pathlib
import socket
import struct
import time

import psutil
import pytest

from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.testing import broker_runtime_info, wait_until
from rocketbox.cluster.wire_format import Command

BOUNDS = {"remoting_connections_max": 300, "remoting_idle_timeout_ms": 3_000,
          "remoting_partial_frame_timeout_ms": 1_000, "remoting_unproven_timeout_ms": 2_000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from rocketbox.cluster.testing import LocalCluster
    with LocalCluster(str(tmp_path_factory.mktemp("bad-input")), broker_overrides=BOUNDS) as started:
        yield started


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.settimeout(10)
    return sock


def _read_frame(sock: socket.socket, decoder: rf.FrameDecoder) -> Command | None:
    """The next frame's command, or None once the server closed the connection."""
    frames: list[bytes] = []
    while not frames:
        data = sock.recv(65536)
        if not data:
            return None
        frames = decoder.feed(data)
    return rf.decode_frame_payload(frames[0])[0]


def _route_lookup(port: int) -> Command:
    with _connect(port) as sock:
        sock.sendall(rf.encode_frame(Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, language=1)))
        return _read_frame(sock, rf.FrameDecoder())


def _raw(header: bytes, serialize_type: int = 0, header_len: int | None = None, body: bytes = b"") -> bytes:
    declared = len(header) if header_len is None else header_len
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | declared) + header + body


BAD_HEADERS = [
    (_raw(b"{}", serialize_type=7), "unknown serialize type 7"),
    (_raw(b'{"code":105}', header_len=400), "runs past"),
    (_raw(b'{"code":105,'), "not JSON"),
    (_raw(b'{"code":34,"extFields":{"topic":{"a":1}}}'), "is a dict"),
    (_raw(b'{"code":"105"x'), "not JSON"),
]


@pytest.mark.parametrize("door", ["namesrv", "broker"])
def test_bad_headers_are_answered_and_the_connection_keeps_serving(cluster, door):
    port = (cluster.topology.namesrvs[0] if door == "namesrv" else cluster.topology.brokers[0]).remoting_port
    with _connect(port) as sock:
        decoder = rf.FrameDecoder()
        for frame, reason in BAD_HEADERS:
            sock.sendall(frame)
            answer = _read_frame(sock, decoder)
            assert answer.code == ResponseCode.SYSTEM_ERROR and reason in answer.remark, answer
        # Wrong types the JSON layer accepts but a handler refuses, and a code nobody serves.
        sock.sendall(rf.encode_frame(Command(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "x"}, opaque=5)))
        answer = _read_frame(sock, decoder)
        assert answer.opaque == 5 and answer.code != ResponseCode.SUCCESS and answer.remark
        sock.sendall(rf.encode_frame(Command(4242, {}, opaque=6)))
        answer = _read_frame(sock, decoder)
        assert (answer.opaque, answer.code) == (6, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
        assert "4242" in answer.remark
        sock.sendall(rf.encode_frame(Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, opaque=7)))
        answer = _read_frame(sock, decoder)
        assert answer.opaque == 7 and answer.code in (ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


@pytest.mark.parametrize("length", [-5, 2, 64 * 1024 * 1024])
def test_an_untrustworthy_length_closes_only_that_connection(cluster, length):
    port = cluster.topology.brokers[0].remoting_port
    with _connect(port) as bystander, _connect(port) as sock:
        sock.sendall(struct.pack(">i", length) + b"\x00" * 64)
        assert _read_frame(sock, rf.FrameDecoder()) is None   # closed by the broker
        bystander.sendall(rf.encode_frame(Command(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})))
        assert _read_frame(bystander, rf.FrameDecoder()) is not None


def test_half_a_frame_is_not_held_forever(cluster):
    """A frame whose rest never comes: the connection is closed after the half-frame time-out."""
    with _connect(cluster.topology.brokers[0].remoting_port) as sock:
        sock.sendall(struct.pack(">i", 1000) + b"\x00" * 10)
        started = time.monotonic()
        assert _read_frame(sock, rf.FrameDecoder()) is None
        assert time.monotonic() - started < 10


def test_a_flood_of_bad_frames_is_logged_in_a_few_lines(cluster):
    port = cluster.topology.brokers[0].remoting_port
    log_path = pathlib.Path(cluster.data_dir) / "logs" / "broker-a.log"
    before = log_path.read_text().count("malformed frame")
    frame = _raw(b"{not json")
    with _connect(port) as sock:
        decoder = rf.FrameDecoder()
        for _ in range(5):
            sock.sendall(frame * 400)
            answered = 0
            while answered < 400:
                data = sock.recv(1 << 20)
                assert data
                answered += len(decoder.feed(data))
    info = broker_runtime_info(cluster.topology.brokers[0].address)
    assert info["doors"]["remoting"]["malformedFrames"] >= 2000
    wait_until(lambda: "more like this held back" in log_path.read_text() or
               log_path.read_text().count("malformed frame") - before <= 20, 10, what="log written")
    assert log_path.read_text().count("malformed frame") - before <= 20   # 2000 bad frames, a few lines


def test_idle_connections_give_way_to_newcomers_and_are_closed_within_the_unproven_time_out(cluster):
    """Idle connections beyond one host's share of unproven places (a quarter of the table) each
    take the place of the one idle longest: a newcomer is never refused, and its request is
    answered. The broker's memory stays bounded, and every idle connection is closed once it had
    the unproven time-out to send a request (the flood itself is
    test_remoting_flood.py)."""
    cfg = cluster.topology.brokers[0]
    broker = psutil.Process(cluster.pid("broker-a"))
    rss_before = broker.memory_info().rss
    share = BOUNDS["remoting_connections_max"] // 4
    idle = [_connect(cfg.remoting_port) for _ in range(BOUNDS["remoting_connections_max"])]
    try:
        wait_until(lambda: _door(cfg)["connectionsEvicted"].get("unprovenPerHost", 0)
                   >= len(idle) - share, 10, what="the oldest idle connections dropped for newer ones")
        info = _door(cfg)
        assert info["connections"] <= share and info["connectionsRefused"] == 0, info
        with _connect(cfg.remoting_port) as sock:
            sock.sendall(rf.encode_frame(Command(RequestCode.GET_BROKER_RUNTIME_INFO, {})))
            answer = _read_frame(sock, rf.FrameDecoder())
        assert answer.code == ResponseCode.SUCCESS and json.loads(answer.body)
        assert broker.memory_info().rss - rss_before < 64 * 1024 * 1024
        started = time.monotonic()
        for sock in idle:   # every one closed by the broker: dropped for a newcomer, or timed out
            assert _read_frame(sock, rf.FrameDecoder()) is None
        assert time.monotonic() - started < BOUNDS["remoting_unproven_timeout_ms"] / 1000 + 5
        assert _door(cfg)["unprovenConnections"] == 0
    finally:
        for sock in idle:
            sock.close()


def _door(cfg) -> dict:
    return broker_runtime_info(cfg.address)["doors"]["remoting"]
