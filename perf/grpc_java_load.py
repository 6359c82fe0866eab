"""The gRPC door driven by a lean grpc-java client (``perf/GrpcJavaLoad.java``, built with Debian's
grpc-java by ``grpc_java_build.py``; ``make grpc-java``): what the door carries when the client is not
the bound. The official Node.js 5.x client spends ~1 ms of its own CPU a send (``grpc_front_ab``), so
it cannot show a door faster than ~1-2.5k msg/s on this machine; grpc-java is the Java 5.x client's
transport, driven the way the official clients drive the door (one message a SendMessage call, 64 in
flight; ReceiveMessage of 32 from 4 loops at once, one AckMessage a handle). Each round a fresh LocalCluster (proxy,
NameServer, one master, async flush) per front, the order turned each round.

    .venv/bin/python -m rocketbox.perf.grpc_java_load --count 30000 --rounds 3 [--fronts native,grpcio]

One JSON line a front a round (each phase's rate, the sends' p50/p99, the proxy's, the broker's and the
client's CPU a message in that phase), then the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

import psutil

from rocketbox.perf.grpc_front_ab import FRONT_SETTINGS
from rocketbox.perf.grpc_java_build import build, java_command, missing
from rocketbox.perf.grpc_load import cpu_s
from rocketbox.perf.harness import turned

LOAD_CLIENT = pathlib.Path(__file__).with_name("GrpcJavaLoad.java")
CLIENT_TIMEOUT_S = 700


def measure(front: str, classes: pathlib.Path, args, tmp: str, round_: int) -> dict:
    from rocketbox.cluster.testing import LocalCluster
    from rocketbox.perf.harness import client_config, create_topic
    with LocalCluster(os.path.join(tmp, f"{front}-{round_}"), proxy=True, metrics=False, remoting=False,
                      proxy_overrides=FRONT_SETTINGS[front]) as cluster:
        topic = "GrpcJavaLoad"
        create_topic(client_config(cluster.namesrv), topic)
        processes = {"proxy": psutil.Process(cluster.pid("proxy")), "broker": psutil.Process(cluster.pid("broker-a"))}
        client = subprocess.Popen(java_command(classes, "GrpcJavaLoad", cluster.proxy_endpoint, topic,
                                               f"GrpcJavaLoad{round_}", str(args.count), str(args.window),
                                               str(args.batch), str(args.body_bytes), str(args.warmup), str(args.receivers),
                                               quick_start=args.jit == "quick"),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            processes["client"] = psutil.Process(client.pid)
            row = {"front": front, "round": round_}
            _phase_line(client)   # warmed up: the JVM's start and the warm-up sends are not counted
            cpu = {name: cpu_s(p) for name, p in processes.items()}
            for _phase in ("send", "receive"):
                line = _phase_line(client)
                (name, result), = line.items()
                now = {n: cpu_s(p) for n, p in processes.items()}
                for n in processes:
                    result[f"{n}_cpu_us"] = round((now[n] - cpu[n]) / max(result["count"], 1) * 1e6, 1)
                row[name], cpu = result, now
            client.wait(CLIENT_TIMEOUT_S)
        finally:
            if client.poll() is None:
                client.kill()
            client.wait()
        row["load"] = os.getloadavg()[0]
        return row


def _phase_line(client: subprocess.Popen) -> dict:
    """The client's next JSON line (it prints one as each phase ends)."""
    line = client.stdout.readline()
    if not line:
        raise RuntimeError(f"GrpcJavaLoad ended ({client.wait()}) early: {client.stderr.read()[-800:]}")
    return json.loads(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=int, default=64, help="sends (and acks) in flight")
    parser.add_argument("--batch", type=int, default=32, help="messages a ReceiveMessage")
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--jit", choices=("quick", "full"), default="quick",
                        help="the client JVM's JIT: its first tier only (its own CPU lowest in runs this short), or all")
    parser.add_argument("--receivers", type=int, default=4, help="ReceiveMessage calls in flight (receive loops)")
    parser.add_argument("--fronts", default="native", help=f"of {', '.join(FRONT_SETTINGS)}")
    args = parser.parse_args()
    absent = missing()
    if absent:
        sys.exit(f"grpc-java is not installed ({', '.join(absent)} missing): `make grpc-java`")
    fronts = args.fronts.split(",")
    rows: dict[str, list[dict]] = {front: [] for front in fronts}
    with tempfile.TemporaryDirectory() as tmp:
        classes = build(pathlib.Path(tmp) / "build", [LOAD_CLIENT])
        for round_ in range(args.rounds):
            for front in turned(fronts, round_):
                row = measure(front, classes, args, tmp, round_)
                rows[front].append(row)
                print(json.dumps(row), flush=True)
    for front, front_rows in rows.items():
        def median(*path: str):
            values = []
            for row in front_rows:
                value = row
                for key in path:
                    value = value[key]
                values.append(value)
            return statistics.median(values)
        print(json.dumps({"front": front, "send_rate": median("send", "rate"), "send_p50_us": median("send", "p50_us"),
                          "send_p99_us": median("send", "p99_us"), "receive_rate": median("receive", "rate"),
                          **{f"{phase}_{name}_cpu_us": median(phase, f"{name}_cpu_us")
                             for phase in ("send", "receive") for name in ("proxy", "broker", "client")},
                          "failed": sum(r["send"]["failed"] + r["receive"]["failed_acks"] for r in front_rows)}),
              flush=True)


if __name__ == "__main__":
    main()
