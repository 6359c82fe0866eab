"""The proxy with ``grpc_front = "native"`` (HTTP/2 in the C helper, ``proxy/native_door.py``): RocketMQ
5's Python client and grpcio's C-core client through it (unary calls, ReceiveMessage's stream,
Telemetry, metadata, deadlines, cancellation, sizes), and raw bytes that break HTTP/2: each gets a
GOAWAY with RFC 9113's code and a closed connection, a line in the proxy's log (rate-limited), and
the door serves everyone else on, in the same process. Floods are bounded before any
authentication: connections, streams, bytes of unfinished messages."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time

import pytest

from rocketbox.cluster.testing import LocalCluster
from tests.grpc.grpc_client import received, require_grpc_client, run_grpc, sent, statuses

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, GOAWAY, CONTINUATION = 0, 1, 3, 4, 7, 9
END_STREAM, END_HEADERS = 1, 4
SERVICE = "/apache.rocketmq.v2.MessagingService/"
MAX_CONNECTIONS, MAX_RPCS, HANDSHAKE_TIMEOUT_MS = 12, 256, 1500
CLIENT_ID = "native-front@1@1@1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_grpc_client()
    overrides = {"grpc_front": "native", "max_connections": MAX_CONNECTIONS, "max_concurrent_rpcs": MAX_RPCS,
                 "handshake_timeout_ms": HANDSHAKE_TIMEOUT_MS}
    with LocalCluster(str(tmp_path_factory.mktemp("native-front")), proxy=True, proxy_overrides=overrides) as started:
        from rocketbox.cluster.client.admin import Admin
        with Admin(started.namesrv) as admin:
            admin.create_topic("NativeFront", 2)
            admin.create_topic("NativePush", 2)
            admin.create_topic("NativeEmpty", 1)
        yield started


def address(cluster) -> tuple[str, int]:
    host, port = cluster.proxy_endpoint.rsplit(":", 1)
    return host, int(port)


def proxy_log(cluster) -> str:
    with open(os.path.join(cluster.data_dir, "logs", "proxy.log"), errors="replace") as f:
        return f.read()


# ---------------------------------------------------------------- raw HTTP/2

def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(name: bytes, value: bytes) -> bytes:
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def request_block(rpc: str = "QueryRoute") -> bytes:
    path = (SERVICE + rpc).encode()
    return b"\x83\x86\x04" + bytes([len(path)]) + path + literal(b"te", b"trailers") + \
        literal(b"content-type", b"application/grpc") + literal(b"x-mq-client-id", CLIENT_ID.encode())


def frames_of(data: bytes) -> list[tuple[int, int, int, bytes]]:
    out, at = [], 0
    while len(data) - at >= 9 and len(data) - at >= 9 + int.from_bytes(data[at:at + 3], "big"):
        length = int.from_bytes(data[at:at + 3], "big")
        stream = int.from_bytes(data[at + 5:at + 9], "big")
        out.append((data[at + 3], data[at + 4], stream, data[at + 9:at + 9 + length]))
        at += 9 + length
    return out


def exchange(cluster, data: bytes, timeout_s: float = 20) -> tuple[list, bool]:
    """Sends data on a fresh connection and reads until the door closes it or ``timeout_s``: the
    frames it sent and whether it closed."""
    received_bytes, closed = b"", False
    with socket.create_connection(address(cluster), timeout=timeout_s) as sock:
        try:
            sock.sendall(data)
        except OSError:   # the door may close before taking everything
            pass
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            received_bytes += chunk
    return frames_of(received_bytes), closed


def goaway_code(frames) -> int | None:
    codes = [struct.unpack(">II", payload)[1] for kind, _, _, payload in frames if kind == GOAWAY]
    return codes[-1] if codes else None


async def _route(cluster, metadata=(("x-mq-client-id", CLIENT_ID),)):
    import grpc
    from rocketbox.cluster.proxy.protos import service
    async with grpc.aio.insecure_channel(cluster.proxy_endpoint) as channel:
        call = channel.unary_unary(SERVICE + "QueryRoute")
        answer = await call(service.QueryRouteRequest(topic={"name": "NativeFront"}).SerializeToString(),
                            metadata=metadata, timeout=10)
        return service.QueryRouteResponse.FromString(answer)


def serving(cluster) -> bool:
    from rocketbox.cluster.proxy.protos import Code
    return asyncio.run(_route(cluster)).status.code == Code.OK


# ---------------------------------------------------------------- real clients

@pytest.mark.timeout(60)
def test_the_door_speaks_the_native_front_ends_settings(cluster):
    frames, _ = exchange(cluster, PREFACE + frame(SETTINGS, 0, 0), timeout_s=1)
    settings = frames[0]
    assert settings[0] == SETTINGS and settings[1] == 0
    pairs = {struct.unpack(">HI", settings[3][i:i + 6]) for i in range(0, len(settings[3]), 6)}
    assert pairs == {(3, MAX_RPCS), (4, 1 << 20), (6, 65536)}   # grpcio's differ


@pytest.mark.timeout(240)
def test_the_5x_client_sends_receives_and_acks_and_push_consumes(cluster, tmp_path):
    messages = [{"body": f"native-{i}", "tag": "T", "keys": [f"k{i}"], "properties": {"n": str(i)}} for i in range(30)]
    lines = run_grpc("produce", {"endpoint": cluster.proxy_endpoint, "topic": "NativeFront", "messages": messages},
                     tmp_path / "p")
    receipts = sent(lines)
    assert len(receipts) == 30, lines
    lines = run_grpc("simple", {"endpoint": cluster.proxy_endpoint, "group": "NativeReader", "topic": "NativeFront",
                                "expect": 30, "max_s": 60}, tmp_path / "c")
    got = {r["message_id"]: r for r in received(lines)}
    assert set(got) == {r["message_id"] for r in receipts}
    assert sorted(r["body"] for r in got.values()) == sorted(m["body"] for m in messages)
    assert len([line for line in lines if line.get("acked")]) == 30, lines
    # A PushConsumer: Telemetry settings, long-polling receives, acks.
    run_grpc("produce", {"endpoint": cluster.proxy_endpoint, "topic": "NativePush",
                         "messages": [{"body": f"push-{i}"} for i in range(10)]}, tmp_path / "p2")
    lines = run_grpc("push", {"endpoint": cluster.proxy_endpoint, "group": "NativePushCG", "topic": "NativePush",
                              "expect": 10, "max_s": 60}, tmp_path / "push")
    assert sorted({line["consumed"]["body"] for line in lines if "consumed" in line}) == \
        sorted(f"push-{i}" for i in range(10))


@pytest.mark.timeout(120)
def test_telemetry_answers_settings_through_the_c_core_stub(cluster, tmp_path):
    settings = {"settings": {"clientType": "PRODUCER", "publishing": {"topics": [{"name": "NativeFront"}]}}}
    lines = run_grpc("raw", {"endpoint": cluster.proxy_endpoint, "steps": [{"name": "tele", "telemetry": [settings]}]},
                     tmp_path / "t")
    step = next(line for line in lines if line.get("step") == "tele")
    assert step["error"] is None, step
    assert step["responses"][0]["settings"]["publishing"]["maxBodySize"] > 0


@pytest.mark.timeout(120)
def test_grpcio_calls_metadata_sizes_deadlines_and_cancels(cluster):
    import grpc
    from rocketbox.cluster.proxy.protos import Code, service

    async def scenario():
        async with grpc.aio.insecure_channel(cluster.proxy_endpoint,
                                             options=[("grpc.max_send_message_length", 64 << 20)]) as channel:
            metadata = (("x-mq-client-id", CLIENT_ID),)
            unknown = channel.unary_unary(SERVICE + "NoSuchRpc")
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await unknown(b"", metadata=metadata, timeout=5)
            assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
            send = channel.unary_unary(SERVICE + "SendMessage")
            with pytest.raises(grpc.aio.AioRpcError) as large:
                await send(b"\x0a" * (17 << 20), metadata=metadata, timeout=20)
            assert large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in large.value.details()
            with pytest.raises(grpc.aio.AioRpcError) as junk:
                await send(b"\xff" * 11, metadata=metadata, timeout=5)
            assert junk.value.code() == grpc.StatusCode.INTERNAL
            nameless = service.SendMessageResponse.FromString(await send(b"", timeout=5))
            assert nameless.status.code == Code.CLIENT_ID_REQUIRED, nameless   # the metadata is read
            receive = channel.unary_stream(SERVICE + "ReceiveMessage")
            request = service.ReceiveMessageRequest(
                group={"name": "NativeWaiter"},
                message_queue={"topic": {"name": "NativeEmpty"}, "broker": {"name": "broker-a"}},
                filter_expression={"type": 1, "expression": "*"}, batch_size=1,
                invisible_duration={"seconds": 5}, long_polling_timeout={"seconds": 15}).SerializeToString()
            started = time.monotonic()
            # grpc-timeout reaches the handler: the 15 s long poll is cut to the call's 1.5 s deadline
            answers = [service.ReceiveMessageResponse.FromString(r)
                       async for r in receive(request, metadata=metadata, timeout=1.5)]
            assert time.monotonic() - started < 5
            assert answers and answers[0].status.code == Code.MESSAGE_NOT_FOUND, answers
            waiting = receive(request, metadata=metadata, timeout=30)
            await asyncio.sleep(0.5)
            waiting.cancel()   # RST_STREAM CANCEL: the door drops the call
            assert waiting.cancelled()
    asyncio.run(scenario())
    assert serving(cluster)


# ---------------------------------------------------------------- bad input

BAD_INPUT = {
    "garbage preface": (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", 1, "preface"),
    "bad HPACK index": (PREFACE + frame(HEADERS, END_HEADERS | END_STREAM, 1, b"\xff\xff\x01"), 9, "HPACK"),
    "huge dynamic table size": (PREFACE + frame(HEADERS, END_HEADERS, 1, b"\x3f\xe1\xff\x03"), 9, "HPACK"),
    "oversized frame": (PREFACE + b"\x01\x00\x00" + bytes([DATA, 0]) + struct.pack(">I", 1) + b"x" * 70000, 6, "65536"),
    "CONTINUATION flood": (PREFACE + frame(HEADERS, 0, 1, b"\x82") +
                           b"".join(frame(CONTINUATION, 0, 1, b"\x82" * 16384) for _ in range(8)), 11, "header block"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_protocol_violations_end_that_connection_with_a_goaway(cluster, case):
    data, code, reason = BAD_INPUT[case]
    pid = cluster.pid("proxy")
    frames, closed = exchange(cluster, data)
    assert closed and goaway_code(frames) == code, frames
    assert reason in proxy_log(cluster)
    assert serving(cluster) and cluster.pid("proxy") == pid


@pytest.mark.timeout(120)
def test_half_frames_wait_and_a_client_that_leaves_mid_frame_costs_nothing(cluster):
    request = frame(HEADERS, END_HEADERS, 1, request_block()) + frame(DATA, END_STREAM, 1, b"\x00\x00\x00\x00\x00")
    with socket.create_connection(address(cluster), timeout=10) as sock:
        sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        for i in range(0, len(request), 7):   # seven bytes a write: every frame arrives in pieces
            sock.sendall(request[i:i + 7])
            time.sleep(0.001)
        data = b""
        while not any(kind == HEADERS and flags & END_STREAM and stream == 1
                      for kind, flags, stream, _ in frames_of(data)):
            chunk = sock.recv(65536)
            assert chunk, frames_of(data)
            data += chunk
    for cut in (5, 20, 40):   # gone inside the preface, a frame header, a header block
        with socket.create_connection(address(cluster), timeout=10) as sock:
            sock.sendall((PREFACE + frame(HEADERS, END_HEADERS, 1, request_block()))[:cut])
    assert serving(cluster)


@pytest.mark.timeout(180)
def test_a_headers_flood_is_refused_past_the_limit_then_ended(cluster):
    flood = PREFACE + b"".join(frame(HEADERS, END_HEADERS, 2 * i + 1, request_block())
                               for i in range(MAX_RPCS + 10_001))
    frames, closed = exchange(cluster, flood, timeout_s=60)
    refused = [stream for kind, _, stream, payload in frames if kind == RST_STREAM and payload == struct.pack(">I", 7)]
    assert refused and min(refused) == 2 * MAX_RPCS + 1   # the first MAX_RPCS streams were taken
    assert closed and goaway_code(frames) == 11, frames[-3:]   # ENHANCE_YOUR_CALM
    assert "streams refused" in proxy_log(cluster)
    assert serving(cluster)   # the flood's streams were given back when it closed


@pytest.mark.timeout(120)
def test_connections_are_bounded_before_a_byte_is_read(cluster):
    held = []
    try:
        turned_away = None
        for i in range(MAX_CONNECTIONS + 1):
            sock = socket.create_connection(address(cluster), timeout=5)
            held.append(sock)
            sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
            try:
                answer = sock.recv(65536)
            except ConnectionResetError:
                answer = b""
            if not answer:   # closed at once instead of our SETTINGS
                turned_away = i
                break
        assert turned_away is not None and turned_away <= MAX_CONNECTIONS
        assert "connections open" in proxy_log(cluster)
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 30
    while True:   # the door notices the closes as it reads them
        try:
            if serving(cluster):
                break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.mark.timeout(120)
def test_a_connection_without_a_preface_is_closed_after_the_handshake_timeout(cluster):
    started = time.monotonic()
    frames, closed = exchange(cluster, PREFACE[:10], timeout_s=30)   # half a preface, then silence
    assert closed and time.monotonic() - started < 20
    assert "no HTTP/2 preface" in proxy_log(cluster)
    assert serving(cluster)


@pytest.mark.timeout(120)
def test_unfinished_messages_of_a_connection_are_bounded(cluster):
    part = b"x" * 16384
    claimed = 12 << 20   # each under the 16 MiB message limit; three are over the 32 MiB a connection may hold
    streams = (1, 3, 5)
    data = PREFACE + b"".join(frame(HEADERS, END_HEADERS, s, request_block("SendMessage")) for s in streams)
    data += b"".join(frame(DATA, 0, s, b"\x00" + struct.pack(">I", claimed)) for s in streams)
    data += b"".join(frame(DATA, 0, s, part) for _ in range(claimed // len(part) - 1) for s in streams)
    frames, _ = exchange(cluster, data, timeout_s=10)
    ended = [stream for kind, flags, stream, payload in frames if kind == HEADERS and b"grpc-status\x018" in payload]
    assert ended and b"unfinished messages" in b"".join(p for kind, _, _, p in frames if kind == HEADERS)
    assert serving(cluster)


@pytest.mark.timeout(120)
def test_a_stopping_proxy_says_goaway_to_its_connections(cluster):
    import threading
    from rocketbox.cluster.proxy.server import ProxyServer
    from rocketbox.cluster.proxy.settings import ProxySettings
    from rocketbox.cluster.topology import free_ports
    (port,) = free_ports(1)
    settings = ProxySettings(port=port, namesrv_endpoints=tuple(cluster.topology.namesrv_endpoints),
                             grpc_front="native")
    started = threading.Event()
    server_box = {}

    def serve() -> None:
        server = server_box["server"] = ProxyServer(settings)
        server.start()
        started.set()
        server.run()
        server.close()
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(30)
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(PREFACE + frame(SETTINGS, 0, 0))
        data = sock.recv(65536)   # our SETTINGS: the connection is up
        server_box["server"].stopping = True
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    thread.join(30)
    # RFC 9113's graceful close: GOAWAY 2^31-1 first (no new streams), then the last stream, NO_ERROR both
    goaways = [struct.unpack(">II", payload) for kind, _, _, payload in frames_of(data) if kind == GOAWAY]
    assert goaways == [(0x7FFFFFFF, 0), (0, 0)], goaways
