"""The floor of a gRPC front end that handles HTTP/2 frames in C, against grpcio's bare servicer: a
measurement harness, not a product door (perf/RESULTS.md, "The gRPC door: the floor of a C front end
and the proxy's own cost").

``perf/h2c_floor.c`` (compiled here with gcc at run time) parses h2c frames and HPACK and hands each
read's complete requests to Python as one buffer of (stream, :path, message) records; Python answers
them and one C call frames every answer (HEADERS + DATA + trailers) and writes them. Servers compared,
each in a child process, under the same load, the order turned each round:

- ``aio``: ``perf/grpc_floor.py``'s bare grpc.aio servicer (SendMessage answered OK, nothing stored);
- ``h2c-proto``: the C front end with the same answer made in Python (the request parsed, the response
  built and serialized with protobuf), the floor of a C front end under a Python servicer;
- ``h2c-fixed``: the C front end answering fixed bytes: what the frames alone cost;
- ``h2c-proxy``: the C front end calling the real proxy's ``MessagingService.SendMessage`` against a
  LocalCluster this harness starts: the front end and the proxy's own cost together.

The load is grpcio's C-core client (``grpc.aio``, raw bytes in and out) in ``--clients`` child
processes, each with ``--window`` SendMessage calls in flight, one message a call as RocketMQ 5's
clients send. Printed: one JSON line a server a round (calls/s summed, server CPU us a call, client
p50 us), then the medians.

    python -m rocketbox.perf.h2c_floor --calls 20000 --rounds 3 [--servers aio,h2c-proto,...]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import psutil

from rocketbox.perf.grpc_load import CLIENT_TIMEOUT_S, last_json_lines
from rocketbox.perf.harness import turned
from rocketbox.perf.proxy_cost import CLIENT_ID, cpu_s

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C_SOURCE = os.path.join(REPO, "perf", "h2c_floor.c")
NATIVE_DIR = os.path.join(REPO, "cluster", "_native")
GRPC_PYTHON = os.path.join(REPO, ".venv-rocketmq5", "bin", "python")
AIO_FLOOR = os.path.join(REPO, "perf", "grpc_floor.py")
SEND_PATH = "/apache.rocketmq.v2.MessagingService/SendMessage"
SERVERS = ("aio", "h2c-proto", "h2c-fixed", "h2c-proxy")
RECORD_HEAD = struct.Struct(">IHI")
ANSWER_HEAD = struct.Struct(">II")
READY_TIMEOUT_S = 60


# ---------------------------------------------------------------- the C front end

def build_library(directory: str) -> ctypes.CDLL:
    """perf/h2c_floor.c compiled with gcc into ``directory`` and loaded."""
    target = os.path.join(directory, "h2c_floor.so")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-I", NATIVE_DIR, "-o", target, C_SOURCE,
                    os.path.join(NATIVE_DIR, "h2_hpack.c")], check=True)
    lib = ctypes.CDLL(target)
    lib.h2_new.restype = ctypes.c_void_p
    lib.h2_free.argtypes = [ctypes.c_void_p]
    lib.h2_feed.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.h2_batch.restype = ctypes.c_void_p
    lib.h2_batch.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
    lib.h2_flush.restype = ctypes.c_long
    lib.h2_flush.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.h2_answers.restype = ctypes.c_long
    lib.h2_answers.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    lib.h2_window_waits.restype = ctypes.c_uint64
    lib.h2_window_waits.argtypes = [ctypes.c_void_p]
    return lib


def requests_of(batch: bytes):
    """(stream, path, message) of each record h2_feed put in the batch."""
    at = 0
    while at < len(batch):
        stream, path_len, message_len = RECORD_HEAD.unpack_from(batch, at)
        at += RECORD_HEAD.size
        path = batch[at:at + path_len].decode("ascii", "replace")
        at += path_len
        yield stream, path, batch[at:at + message_len]
        at += message_len


class Connection:
    """One client connection on the loop: reads go through h2_feed, answers through h2_answers."""

    def __init__(self, server: "FrontEnd", sock: socket.socket):
        self.server, self.sock, self.fd = server, sock, sock.fileno()
        self.conn = server.lib.h2_new()
        self.pending: list[bytes] = []   # packed answers of this loop turn
        self.flush_scheduled = False
        server.lib.h2_flush(self.conn, self.fd)   # our SETTINGS and window
        server.loop.add_reader(self.fd, self.readable)

    def readable(self) -> None:
        lib = self.server.lib
        count = lib.h2_feed(self.conn, self.fd)
        if count < 0:
            self.close()
            return
        if count:
            self.server.reads_with_requests += 1
            self.server.requests += count
            size = ctypes.c_size_t()
            pointer = lib.h2_batch(self.conn, ctypes.byref(size))
            for stream, path, message in requests_of(ctypes.string_at(pointer, size.value)):
                self.server.handle(self, stream, path, message)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.server.loop.call_soon(self.flush)

    def answer(self, stream: int, message: bytes) -> None:
        self.pending.append(ANSWER_HEAD.pack(stream, len(message)) + message)
        if not self.flush_scheduled:
            self.flush_scheduled = True
            self.server.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Every answer of this loop turn framed and written by one C call."""
        self.flush_scheduled = False
        if self.conn is None:
            return
        packed = b"".join(self.pending)
        self.pending.clear()
        if self.server.lib.h2_answers(self.conn, self.fd, packed, len(packed)) < 0:
            self.close()

    def close(self) -> None:
        if self.conn is None:
            return
        self.server.window_waits += self.server.lib.h2_window_waits(self.conn)
        self.server.loop.remove_reader(self.fd)
        self.server.lib.h2_flush(self.conn, self.fd)
        self.server.lib.h2_free(self.conn)
        self.conn = None
        self.sock.close()


class FrontEnd:
    """The listening socket and its connections on one asyncio loop; ``handle`` answers a request."""

    def __init__(self, lib: ctypes.CDLL, loop: asyncio.AbstractEventLoop, port: int, answer):
        self.lib, self.loop, self.answer_of = lib, loop, answer
        self.window_waits = 0
        self.reads_with_requests = self.requests = 0   # how many requests one read brings: what a batch could hold
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", port))
        self.listener.listen(64)
        self.listener.setblocking(False)
        loop.add_reader(self.listener.fileno(), self.accept)

    def accept(self) -> None:
        try:
            sock, _ = self.listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        Connection(self, sock)

    def handle(self, connection: Connection, stream: int, path: str, message: bytes) -> None:
        answer = self.answer_of(path, message)
        if isinstance(answer, bytes):
            connection.answer(stream, answer)
        else:   # a coroutine: answered when it is done
            task = self.loop.create_task(answer)
            task.add_done_callback(lambda done: connection.conn is not None and connection.answer(stream, done.result()))


# ---------------------------------------------------------------- the servers' answers

def bare_answer():
    """grpc_floor.py's SendMessage: OK with each message's id, made with protobuf in Python."""
    from rocketbox.cluster.proxy.protos import pb, service
    ok = pb.Status(code=pb.Code.OK, message="OK")

    def answer(path: str, message: bytes) -> bytes:
        request = service.SendMessageRequest.FromString(message)
        return service.SendMessageResponse(status=ok, entries=[
            service.SendResultEntry(status=ok, message_id=m.system_properties.message_id, offset=0)
            for m in request.messages]).SerializeToString()
    return answer


def fixed_answer():
    from rocketbox.cluster.proxy.protos import pb, service
    ok = pb.Status(code=pb.Code.OK, message="OK")
    fixed = service.SendMessageResponse(status=ok, entries=[service.SendResultEntry(
        status=ok, message_id="0" * 32, offset=0)]).SerializeToString()
    return lambda path, message: fixed


def proxy_answer(loop, settings_json: str):
    from rocketbox.cluster.proxy.protos import service
    from rocketbox.cluster.proxy.server import MessagingService
    from rocketbox.cluster.proxy.settings import ProxySettings
    from rocketbox.perf.proxy_cost import CallContext
    servicer = MessagingService(ProxySettings.from_json(settings_json), loop)
    parse = service.SendMessageRequest.FromString

    async def send(message: bytes) -> bytes:
        return (await servicer.SendMessage(parse(message), CallContext(10.0))).SerializeToString()
    return lambda path, message: send(message)


def serve(kind: str, port: int, settings_json: str) -> None:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_library(tmp)
    answer = {"h2c-proto": bare_answer, "h2c-fixed": fixed_answer}.get(kind)
    front = FrontEnd(lib, loop, port, answer() if answer else proxy_answer(loop, settings_json))

    def stop() -> None:
        print(json.dumps({"requests": front.requests, "reads_with_requests": front.reads_with_requests,
                          "window_waits": front.window_waits}), flush=True)
        loop.stop()
    loop.add_signal_handler(signal.SIGTERM, stop)
    print("ready", flush=True)
    loop.run_forever()


# ---------------------------------------------------------------- the load: grpcio's C-core client

def send_request(topic: str) -> bytes:
    from google.protobuf.timestamp_pb2 import Timestamp
    from rocketbox.cluster.proxy.protos import pb, service
    born = Timestamp()
    born.GetCurrentTime()
    system = pb.SystemProperties(message_id="01" + os.urandom(16).hex().upper(), born_timestamp=born,
                                 born_host="perf-host", body_encoding=pb.IDENTITY, message_type=pb.NORMAL)
    return service.SendMessageRequest(messages=[pb.Message(
        topic=pb.Resource(name=topic), system_properties=system, body=b"x" * 100)]).SerializeToString()


async def load(port: int, calls: int, window: int, topic: str) -> dict:
    import grpc
    from rocketbox.cluster.proxy.protos import pb, service
    request = send_request(topic)
    latencies: list[float] = []
    failed = 0
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        send = channel.unary_unary(SEND_PATH)
        metadata = (("x-mq-client-id", CLIENT_ID),)   # the proxy refuses a call without it
        first = service.SendMessageResponse.FromString(await send(request, metadata=metadata, timeout=10))
        if first.status.code != pb.Code.OK:
            raise RuntimeError(f"the server answered {first.status}")
        todo = iter(range(calls))

        async def caller() -> None:
            nonlocal failed
            for _ in todo:
                started = time.perf_counter()
                try:
                    await send(request, metadata=metadata, timeout=10)
                except grpc.aio.AioRpcError:
                    failed += 1
                latencies.append(time.perf_counter() - started)
        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(window)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {"count": calls, "failed": failed, "elapsed_s": elapsed, "p50_us": statistics.median(latencies) * 1e6,
            "p99_us": latencies[int(len(latencies) * 0.99)] * 1e6, "max_us": latencies[-1] * 1e6,
            "client_cpu_s": time.process_time()}


# ---------------------------------------------------------------- the harness

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(kind: str, settings_json: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    if kind == "aio":
        command = [GRPC_PYTHON, AIO_FLOOR, str(port), "aio"]
    else:
        command = [sys.executable, "-m", "rocketbox.perf.h2c_floor", "serve", kind, str(port), settings_json]
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + READY_TIMEOUT_S
    line = child.stdout.readline()   # "ready", or "" if it died
    if line.strip() != "ready" or time.monotonic() > deadline:
        child.kill()
        raise RuntimeError(f"server {kind} did not start: {line!r}")
    return child, port


def measure(kind: str, args, settings_json: str, topic: str) -> dict:
    server, port = start_server(kind, settings_json)
    try:
        # Warm-up: connections, routes, caches.
        subprocess.run([sys.executable, "-m", "rocketbox.perf.h2c_floor", "client", str(port), "500",
                        str(args.window), topic], check=True, capture_output=True, timeout=CLIENT_TIMEOUT_S)
        process = psutil.Process(server.pid)
        before = cpu_s(process)
        clients = [subprocess.Popen([sys.executable, "-m", "rocketbox.perf.h2c_floor", "client", str(port),
                                     str(args.calls), str(args.window), topic], stdout=subprocess.PIPE, text=True)
                   for _ in range(args.clients)]
        results = last_json_lines(clients, f"client against {kind}")
        count = sum(r["count"] for r in results)
        server.terminate()
        stats = json.loads(server.stdout.readline() or "{}") if kind != "aio" else {}
        per_read = stats.get("requests", 0) / max(stats.get("reads_with_requests", 0), 1)
        return {"server": kind, "calls": count, "failed": sum(r["failed"] for r in results),
                "rate": round(sum(r["count"] / r["elapsed_s"] for r in results)),
                "server_cpu_us": round((cpu_s(process) - before) / count * 1e6, 1),
                "p50_us": round(statistics.median(r["p50_us"] for r in results)),
                **({"requests_a_read": round(per_read, 1), "window_waits": stats.get("window_waits")} if stats else {})}
    finally:
        server.kill()
        server.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="SendMessage calls a client process")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--servers", default=",".join(SERVERS))
    args = parser.parse_args()
    kinds = args.servers.split(",")
    rows: dict[str, list[dict]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        settings_json, topic, cluster = "{}", "H2cFloor", None
        if "h2c-proxy" in kinds:
            from rocketbox.cluster.testing import LocalCluster
            from rocketbox.cluster.topology import proxy_settings
            from rocketbox.perf.harness import client_config, create_topic
            cluster = LocalCluster(tmp, metrics=False, remoting=False).__enter__()
            create_topic(client_config(cluster.namesrv), topic)
            settings = proxy_settings("127.0.0.1", 1, tuple(n.endpoint for n in cluster.topology.namesrvs),
                                      list(cluster.topology.brokers))
            settings_json = settings.to_json()
        try:
            for round_ in range(args.rounds):
                for kind in turned(kinds, round_):
                    row = {"round": round_, **measure(kind, args, settings_json, topic)}
                    rows[kind].append(row)
                    print(json.dumps(row), flush=True)
        finally:
            if cluster is not None:
                cluster.__exit__(None, None, None)
    for kind, kind_rows in rows.items():
        print(json.dumps({"server": kind, "median_rate": statistics.median(r["rate"] for r in kind_rows),
                          "median_server_cpu_us": statistics.median(r["server_cpu_us"] for r in kind_rows),
                          "median_p50_us": statistics.median(r["p50_us"] for r in kind_rows)}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "client":
        print(json.dumps(asyncio.run(load(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))))
    else:
        main()
