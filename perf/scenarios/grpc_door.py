"""``python -m rocketbox.perf --only grpc``: RocketMQ 5's gRPC door (the proxy, driven by the official
``rocketmq-python-client`` in its own venv) beside the native and remoting doors, one cluster, one run
of each door after the other, repeated, so that the doors' costs compare under one load.

Measured through each door, 100-byte bodies, async flush:
- one sync send's latency (p50, p99), one message per request, one thread;
- produce throughput, one message per request with a window in flight (gRPC ``send_async``, 64 at a
  time) and, for the native and remoting doors, their best (batches of 256);
- the proxy's CPU per message sent (async sends), beside a bare grpc.aio servicer's
  (``perf/grpc_floor.py``: the same sends answered without storing): the floor a Python proxy stands on;
- consume throughput: the gRPC SimpleConsumer (receive 32, ack each); the native
  door's own pop (POP_MESSAGE 32 + ACK_MESSAGE each, sequential: the broker's pop cost without the
  proxy); the native and remoting PullConsumer drain (their best).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time

import psutil

from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.testing import LocalCluster
from rocketbox.cluster.topology import free_ports
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient
from rocketbox.perf.harness import BATCH_SIZE, Settings, client_config, create_topic, drain_pull, run_producers
from rocketbox.perf.report import Report, Row, percentile
from rocketbox.perf.scenarios.latency import sync_send_latencies

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GRPC_PYTHON = os.path.join(REPO, ".venv-rocketmq5", "bin", "python")
BENCH = os.path.join(REPO, "perf", "grpc_bench.py")
FLOOR = os.path.join(REPO, "perf", "grpc_floor.py")
WINDOW = 64
POP_BATCH = 32


def _grpc(mode: str, spec: dict, timeout_s: float) -> dict:
    done = subprocess.run([GRPC_PYTHON, BENCH, mode, json.dumps(spec)], capture_output=True, text=True,
                          timeout=timeout_s)
    if done.returncode != 0:
        raise RuntimeError(f"grpc_bench {mode} exited {done.returncode}: {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


@contextlib.contextmanager
def floor_server():
    """The bare servicer on a free port: yields (endpoint, its process)."""
    port = free_ports(1)[0]
    child = subprocess.Popen([GRPC_PYTHON, FLOOR, str(port)], stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            raise RuntimeError(f"grpc_floor did not start (exit {child.poll()})")
        yield f"127.0.0.1:{port}", psutil.Process(child.pid)
    finally:
        child.kill()
        child.wait(10)


def native_pop_drain(broker_address: str, topic: str, group: str, expected: int, time_s_max: float) -> tuple[int, float]:
    """POP_MESSAGE (32, queueId -1) then one ACK_MESSAGE per message, through the native door: (read, s)."""
    rpc = RpcClient(default_timeout_ms=10_000)
    endpoint = f"tcp://{broker_address}"
    read = 0
    started = time.perf_counter()
    deadline = time.monotonic() + time_s_max
    try:
        while read < expected and time.monotonic() < deadline:
            answer = rpc.call(endpoint, Command(RequestCode.POP_MESSAGE, {
                "consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": str(POP_BATCH),
                "invisibleTime": "30000", "pollTime": "1000", "initMode": "0"}))
            if answer.code != ResponseCode.SUCCESS:
                continue
            handles = answer.fields["handles"].split(",")
            for handle in handles:
                rpc.call(endpoint, Command(RequestCode.ACK_MESSAGE, {
                    "consumerGroup": group, "topic": topic, "extraInfo": handle}))
            read += sum(1 for _ in fmt.iter_records(answer.body))
    finally:
        rpc.close()
    return read, time.perf_counter() - started


def scenario_grpc(s: Settings, report: Report, tmp: str) -> None:
    if not os.path.exists(GRPC_PYTHON):
        raise RuntimeError(f"{GRPC_PYTHON} is missing: `make real-clients` builds it")
    values: dict[str, list[float]] = {}

    def add(measure: str, value: float) -> None:
        values.setdefault(measure, []).append(value)

    messages = max(2_000, s.messages // 20)   # per-message requests: a tenth of the batched volume's time
    latency_sends = s.latency_sends() // 5
    with LocalCluster(os.path.join(tmp, "grpc"), proxy=True) as cluster, floor_server() as (floor, floor_process):
        proxy_process = psutil.Process(cluster.pid("proxy"))
        broker = cluster.replica_configs("broker-a")["broker-a"].address
        namesrv = {"native": cluster.namesrv, "remoting": cluster.remoting_namesrv}
        for run in range(s.runs):
            for door in ("native", "remoting"):
                cfg = client_config(namesrv[door], transport=door)
                lat = sync_send_latencies(cfg, f"GrpcRunLat{door}{run}", latency_sends, s.measure_s_max)
                add(f"{door} send p50", percentile(lat, 0.5))
                add(f"{door} send p99", percentile(lat, 0.99))
                topic = f"GrpcRun{door}{run}"
                create_topic(cfg, topic)
                sent, elapsed = run_producers(cfg, topic, s.messages, 100, BATCH_SIZE, 1, s.measure_s_max)
                add(f"{door} produce", sent / elapsed)
                read, elapsed = drain_pull(cfg, topic, sent + 1, s.measure_s_max)
                add(f"{door} drain", read / elapsed)
            cfg = client_config(cluster.namesrv)
            topic = f"GrpcRunGrpc{run}"
            create_topic(cfg, topic)
            create_topic(cfg, f"GrpcRunGrpcLat{run}")
            spec = {"endpoint": cluster.proxy_endpoint, "topic": topic, "body_bytes": 100, "warmup": 200,
                    "max_s": s.measure_s_max, "window": WINDOW}
            lat = _grpc("sync", {**spec, "topic": f"GrpcRunGrpcLat{run}", "count": latency_sends},
                        s.measure_s_max + 120)["latencies_us"]
            add("grpc send p50", percentile(lat, 0.5))
            add("grpc send p99", percentile(lat, 0.99))
            cpu_before = _cpu_s(proxy_process)
            sent = _grpc("async", {**spec, "count": messages}, s.measure_s_max + 120)
            add("grpc produce", sent["count"] / sent["elapsed_s"])
            add("proxy cpu", (_cpu_s(proxy_process) - cpu_before) / sent["count"] * 1e6)
            cpu_before = _cpu_s(floor_process)
            floor_sent = _grpc("async", {**spec, "endpoint": floor, "count": messages}, s.measure_s_max + 120)
            add("floor produce", floor_sent["count"] / floor_sent["elapsed_s"])
            add("floor cpu", (_cpu_s(floor_process) - cpu_before) / floor_sent["count"] * 1e6)
            lat = _grpc("sync", {**spec, "endpoint": floor, "count": latency_sends}, s.measure_s_max + 120)["latencies_us"]
            add("floor send p50", percentile(lat, 0.5))
            got = _grpc("receive", {**spec, "group": f"GrpcRunGroup{run}", "count": sent["count"], "batch": POP_BATCH},
                        s.measure_s_max + 120)
            add("grpc receive", got["count"] / got["elapsed_s"])
            read, elapsed = native_pop_drain(broker, topic, f"GrpcRunNativePop{run}", sent["count"], s.measure_s_max)
            add("native pop", read / elapsed)
    rows = (("native send p50", "sync send p50, native door", "us"),
            ("remoting send p50", "sync send p50, remoting door", "us"),
            ("grpc send p50", "sync send p50, gRPC door (proxy)", "us"),
            ("native send p99", "sync send p99, native door", "us"),
            ("remoting send p99", "sync send p99, remoting door", "us"),
            ("grpc send p99", "sync send p99, gRPC door (proxy)", "us"),
            ("floor send p50", "sync send p50, bare grpc.aio servicer (stores nothing)", "us"),
            ("native produce", f"produce, native door, batches of {BATCH_SIZE}", "msg/s"),
            ("remoting produce", f"produce, remoting door, batches of {BATCH_SIZE}", "msg/s"),
            ("grpc produce", f"produce, gRPC door, one message a request, {WINDOW} in flight", "msg/s"),
            ("floor produce", f"produce, bare grpc.aio servicer, {WINDOW} in flight", "msg/s"),
            ("proxy cpu", "proxy CPU per message sent (async sends)", "us"),
            ("floor cpu", "bare grpc.aio servicer CPU per message sent", "us"),
            ("native drain", "consume, native door, PullConsumer drain", "msg/s"),
            ("remoting drain", "consume, remoting door, PullConsumer drain", "msg/s"),
            ("native pop", f"consume, native door, pop {POP_BATCH} + ack each (sequential)", "msg/s"),
            ("grpc receive", f"consume, gRPC door, SimpleConsumer receive {POP_BATCH} + ack each (sequential)", "msg/s"))
    for key, measure, unit in rows:
        report.add(Row("grpc", measure, unit, values[key], note="one client process a door"))
