"""Logs under a flood of bad requests: 50,000 malformed and invalid requests
over a broker's and a NameServer's native and remoting doors grow each process's log by a few
kilobytes, and the log still says what it held back. Before, each refusal was a line ("request 35
refused: the header field 'clientID' is missing", once per frame: 9 MB in 40 s)."""

from __future__ import annotations

import os
import socket
import time

import pytest
import zmq

from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.wire_format import Command, to_frames

pytestmark = pytest.mark.timeout(240)

FRAMES_PER_DOOR = 12_500      # 4 doors: 50,000
BATCH = 500                   # sent, then their answers read: neither side's queues overflow
LOG_GROWTH_MAX = 100 * 1024
HELD_BACK = "more like this held back"

# What each process is sent, in turn: every one answered with an error and (before) logged.
BROKER_REQUESTS = [
    Command(RequestCode.UNREGISTER_CLIENT, {"producerGroup": "G"}),              # clientID missing
    Command(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": "x"}),         # not a number
    Command(RequestCode.HEART_BEAT, {}, b"{not json"),                           # malformed body
    Command(4242, {}),                                                           # no such code
]
NAMESRV_REQUESTS = [
    Command(RequestCode.REGISTER_BROKER, {"brokerName": "b"}),                   # fields missing
    Command(RequestCode.UNREGISTER_BROKER, {}),                                  # brokerAddr missing
    Command(RequestCode.UNREGISTER_CLIENT, {}),                                  # not a NameServer's
    Command(4242, {}),
]
NATIVE_MALFORMED = [b"\x00\x01\x02", b""]                # a header too short to decode
REMOTING_MALFORMED = (8).to_bytes(4, "big") + (4).to_bytes(4, "big") + b"{no}"   # not JSON


def _native_flood(endpoint: str, requests: list[Command]) -> int:
    """FRAMES_PER_DOOR frames, one in len(requests) + 1 malformed; the answers received."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, 10_000)
    sock.connect(endpoint)
    answered = 0
    try:
        for start in range(0, FRAMES_PER_DOOR, BATCH):
            for i in range(start, start + BATCH):
                kind = i % (len(requests) + 1)
                if kind == len(requests):
                    sock.send_multipart(NATIVE_MALFORMED)
                else:
                    cmd = requests[kind]
                    sock.send_multipart(to_frames(Command(cmd.code, dict(cmd.fields), cmd.body, opaque=i + 1)))
            for _ in range(BATCH):
                sock.recv_multipart()
                answered += 1
    finally:
        sock.close(0)
    return answered


def _remoting_flood(port: int, requests: list[Command]) -> int:
    frames = [rf.encode_frame(Command(cmd.code, dict(cmd.fields), cmd.body, opaque=i + 1))
              for i, cmd in enumerate(requests)] + [REMOTING_MALFORMED]
    answered = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        decoder = rf.FrameDecoder()
        for start in range(0, FRAMES_PER_DOOR, BATCH):
            sock.sendall(b"".join(frames[i % len(frames)] for i in range(start, start + BATCH)))
            got = 0
            while got < BATCH:
                data = sock.recv(1 << 20)
                assert data, "the door closed the connection"
                for payload in decoder.feed(data):
                    answer, _ = rf.decode_frame_payload(payload)
                    assert answer.code != ResponseCode.SUCCESS, answer
                    got += 1
            answered += got
    return answered


def test_a_flood_of_bad_requests_grows_each_log_by_a_few_kilobytes_and_says_what_it_held_back(tmp_path):
    with LocalCluster(str(tmp_path / "flood"), metrics=False) as cluster:
        logs = os.path.join(cluster.data_dir, "logs")
        paths = {"broker": os.path.join(logs, "broker-a.log"), "namesrv": os.path.join(logs, "namesrv-0.log")}
        before = {name: os.path.getsize(path) for name, path in paths.items()}
        broker, namesrv = cluster.topology.brokers[0], cluster.topology.namesrvs[0]
        started = time.monotonic()
        answered = (_native_flood(broker.endpoint, BROKER_REQUESTS)
                    + _remoting_flood(broker.remoting_port, BROKER_REQUESTS)
                    + _native_flood(namesrv.endpoint, NAMESRV_REQUESTS)
                    + _remoting_flood(namesrv.remoting_port, NAMESRV_REQUESTS))
        flood_s = time.monotonic() - started
        assert answered == 4 * FRAMES_PER_DOOR
        _assert_small(paths, before, flood_s)
        # The windows of the flood end, and each process reports what it held back (log_limit's reporter).
        for name, path in paths.items():
            wait_until(lambda: HELD_BACK in _grown(path, before[name]), 30, interval_s=0.5,
                       what=f"the {name}'s held-back count")
        grown = _assert_small(paths, before, flood_s)
    assert "request 35 refused: the header field 'clientID' is missing" in grown["broker"]
    assert "malformed frame" in grown["broker"] and "malformed frame" in grown["namesrv"]


def _assert_small(paths: dict[str, str], before: dict[str, int], flood_s: float) -> dict[str, str]:
    grown = {name: _grown(path, before[name]) for name, path in paths.items()}
    for name, text in grown.items():
        size = len(text.encode())
        assert size < LOG_GROWTH_MAX, f"the {name}'s log grew {size} bytes in {flood_s:.1f} s:\n{text[-2000:]}"
    return grown


def _grown(path: str, since: int) -> str:
    with open(path, "rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace")
