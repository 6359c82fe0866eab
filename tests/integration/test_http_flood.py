"""The HTTP doors (console, metrics) under a slowloris flood from the same address as the real
client: connections past the per-client bound, each sending a request head a
byte at a time, a few sending whole heads and then a body a byte at a time, reopened as the door
closes them. Meanwhile a real client is answered: the console a page and a topic created with an
admin's credentials, the metrics endpoint a scrape prometheus-client's parser reads. When the flood
stops reopening, the door has closed every one of its connections by its deadlines."""

from __future__ import annotations

import base64
import collections
import http.client
import re
import select
import socket
import threading
import time
import urllib.parse

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.http_door import DoorLimits
from rocketbox.cluster.testing import LocalCluster, wait_until

pytestmark = pytest.mark.timeout(300)

LIMITS = DoorLimits()
SLOW_HEADS = LIMITS.connections_per_client_max + 32
SLOW_BODIES = 8
# Every connection the flood opens in all, and how long it may run: bounded whatever the door does.
FLOOD_CONNECTIONS_MAX = 4_000
FLOOD_SECONDS_MAX = 120.0
# A real request is answered well within the flood's head deadline: it did not wait for the flood to time out.
ANSWER_BOUND_S = LIMITS.head_timeout_s

ACL = """
accounts:
  - accessKey: operator1
    secretKey: operator1-secret
    admin: true
"""
ADMIN = {"Authorization": "Basic " + base64.b64encode(b"operator1:operator1-secret").decode()}


class SlowFlood:
    """Connections that each owe the door part of a request and send one more byte a second; one
    the door closes is reopened (while ``reopen``), within FLOOD_CONNECTIONS_MAX and FLOOD_SECONDS_MAX."""

    def __init__(self, host: str, port: int, path: str):
        self.address = (host, port)
        self.head = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: slow\r\nX-Padding: ").encode()
        self.body_head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/"
                          f"x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\ntopic=").encode()
        self.open: dict[socket.socket, bool] = {}   # socket -> sends a body (else a head)
        self.received: dict[socket.socket, bytes] = {}
        self.opened = 0
        # How the door ended each connection it closed: the status of what it last answered (None: nothing).
        self.endings: collections.Counter = collections.Counter()
        self.reopen = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-flood", daemon=True)

    def _connect(self, body: bool) -> None:
        if self.opened >= FLOOD_CONNECTIONS_MAX:
            return
        sock = socket.create_connection(self.address, timeout=5)
        sock.setblocking(False)
        self.opened += 1
        try:
            sock.send(self.body_head if body else self.head)
        except OSError:
            sock.close()
            self.endings[None] += 1
            return
        self.open[sock] = body
        self.received[sock] = b""

    def start(self) -> "SlowFlood":
        for i in range(SLOW_HEADS + SLOW_BODIES):
            self._connect(i >= SLOW_HEADS)
        self._thread.start()
        return self

    def _run(self) -> None:
        end = time.monotonic() + FLOOD_SECONDS_MAX
        next_byte = time.monotonic() + 1.0
        while not self._stop.is_set() and time.monotonic() < end:
            readable, _, _ = select.select(list(self.open), [], [], 0.1) if self.open else ([], [], [])
            for sock in readable:   # the door answered (408/503) and closed, or closed
                if self._door_closed(sock):
                    self._gone(sock)
            if time.monotonic() >= next_byte:
                next_byte += 1.0
                for sock in list(self.open):
                    try:
                        sock.send(b"a")
                    except OSError:
                        self._gone(sock)

    def _door_closed(self, sock: socket.socket) -> bool:
        """Keeps what the door sent; True once it has closed the connection."""
        try:
            for _ in range(16):   # an answer is a few hundred bytes
                data = sock.recv(65536)
                if not data:
                    return True
                self.received[sock] = (self.received[sock] + data)[-4096:]
        except BlockingIOError:
            return False
        except OSError:
            return True
        return False

    def _gone(self, sock: socket.socket) -> None:
        body = self.open.pop(sock, None)
        if body is None:
            return
        sock.close()
        statuses = re.findall(rb"HTTP/1\.1 ([0-9]{3}) ", self.received.pop(sock))
        self.endings[int(statuses[-1]) if statuses else None] += 1
        if self.reopen:
            try:
                self._connect(body)
            except OSError:
                pass

    def still_open(self) -> int:
        return len(self.open)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for sock in self.open:
            sock.close()


def _request(url: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
             follow_redirect: bool = True):
    """(status, body, seconds) of one request on a fresh connection, a 303 followed on it."""
    parts = urllib.parse.urlsplit(url)
    started = time.monotonic()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        body = response.read()
        if response.status == 303 and follow_redirect:   # the console's forms post, then redirect
            location = urllib.parse.urlsplit(response.getheader("Location", ""))
            connection.request("GET", location.path + (f"?{location.query}" if location.query else ""),
                               headers={k: v for k, v in (headers or {}).items() if k == "Authorization"})
            response = connection.getresponse()
            body = response.read()
        return response.status, body, time.monotonic() - started
    finally:
        connection.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    acl_file = tmp_path_factory.mktemp("flood-conf") / "plain_acl.yml"
    acl_file.write_text(ACL)
    with LocalCluster(str(tmp_path_factory.mktemp("flood")), console=True, acl_file=str(acl_file)) as started:
        yield started


def _closes_every_flood_connection(flood: SlowFlood, body_answer: int) -> None:
    """The flood held the door's per-client bound and lost connections to newer ones (503); stopped,
    every connection it kept is closed at its deadline: a partial head answered 408, a slow body
    after the door's answer to its head (``body_answer``) without another."""
    assert flood.still_open() >= LIMITS.connections_per_client_max - 1, flood.still_open()
    pushed_out = flood.endings[503]
    assert pushed_out >= 1, flood.endings
    flood.reopen = False
    wait_until(lambda: flood.still_open() == 0, LIMITS.body_timeout_s + 15, interval_s=0.2,
               what="the door closed every flood connection")
    assert flood.endings[408] >= SLOW_HEADS - LIMITS.connections_per_client_max, flood.endings
    assert flood.endings[body_answer] >= 1, flood.endings
    # None: pushed out before the door had read a byte of it, so owed no answer.
    assert set(flood.endings) <= {408, 503, body_answer, None}, flood.endings


def test_the_console_answers_a_real_client_through_a_slow_flood(cluster):
    parts = urllib.parse.urlsplit(cluster.console_url)
    flood = SlowFlood(parts.hostname, parts.port, "/topics").start()
    try:
        for attempt in range(3):
            status, body, seconds = _request(cluster.console_url, "GET", "/topics", headers=ADMIN)
            assert status == 200 and b"Topics" in body and seconds < ANSWER_BOUND_S, (status, body[:300], seconds)
            form = urllib.parse.urlencode({"topic": f"FloodTopic{attempt}", "queues": "1"}).encode()
            status, body, seconds = _request(cluster.console_url, "POST", "/topics", form, {
                **ADMIN, "Content-Type": "application/x-www-form-urlencoded",
                "Origin": cluster.console_url.rstrip("/")})
            assert status == 200 and b"saved" in body and seconds < ANSWER_BOUND_S, (status, body[:300], seconds)
        _closes_every_flood_connection(flood, body_answer=401)   # the slow bodies carry no credentials
    finally:
        flood.stop()
    with Admin(config=cluster.client_config()) as admin:
        assert {"FloodTopic0", "FloodTopic1", "FloodTopic2"} <= set(admin.topic_list())


def test_the_metrics_endpoint_answers_a_scrape_through_a_slow_flood(cluster):
    parts = urllib.parse.urlsplit(cluster.metrics_url)
    flood = SlowFlood(parts.hostname, parts.port, "/metrics").start()
    try:
        for _ in range(3):
            status, body, seconds = _request(cluster.metrics_url, "GET", "/metrics")
            assert status == 200 and seconds < ANSWER_BOUND_S, (status, body[:300], seconds)
            families = {f.name for f in text_string_to_metric_families(body.decode())}
            assert "rocketbox_broker_up" in families
        _closes_every_flood_connection(flood, body_answer=405)   # the endpoint takes GET only
    finally:
        flood.stop()


JUNK_REQUESTS = 300


@pytest.mark.parametrize("door", ["console", "metrics"])
def test_malformed_requests_are_answered_400_and_logged_within_bounds(cluster, door):
    url = cluster.console_url if door == "console" else cluster.metrics_url
    parts = urllib.parse.urlsplit(url)
    log_path = f"{cluster.data_dir}/logs/web.log"   # one process serves both doors
    with open(log_path, "rb") as f:
        before = len(f.read())
    answers = collections.Counter()
    for i in range(JUNK_REQUESTS):
        with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
            sock.sendall(b"\x00\xff junk %d\r\n\r\n" % i)
            answers[sock.recv(64)[:12]] += 1
    assert answers == {b"HTTP/1.1 400": JUNK_REQUESTS}, answers
    assert _request(url, "GET", "/topics" if door == "console" else "/metrics", headers=ADMIN)[0] == 200
    with open(log_path, "rb") as f:
        grown = f.read()[before:]
    # uvicorn's one warning per malformed request goes through the rate limit: a burst of 10 a window.
    assert 1 <= grown.count(b"Invalid HTTP request") <= 30, grown[-2000:]
    # Each line names the door it was sent to: the process serves both.
    assert grown.count(f"{door}: uvicorn: Invalid HTTP request".encode()) == grown.count(b"Invalid HTTP request")
