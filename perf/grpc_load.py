"""The gRPC door under several client processes: one cluster with the proxy, ``--clients`` processes
of RocketMQ 5's Python client (``perf/grpc_bench.py`` in ``.venv-rocketmq5``) each sending ``--count``
messages with 64 in flight, then as many receiving them (SimpleConsumer, receive 32 + ack each). One
client process is its own bound (~3.5k sends/s against a servicer that does nothing), so the
proxy's cost is read as its CPU per message, beside the clients' summed rate.

    .venv/bin/python perf/grpc_load.py --clients 2 --count 2000 --rounds 3

Prints one JSON line a phase a round: rate (msg/s, the clients' sum), proxy CPU per message (us).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import psutil

from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf.harness import client_config, create_topic

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GRPC_PYTHON = os.path.join(REPO, ".venv-rocketmq5", "bin", "python")
BENCH = os.path.join(REPO, "perf", "grpc_bench.py")
CLIENT_TIMEOUT_S = 400


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def last_json_lines(children: list[subprocess.Popen], what: str) -> list[dict]:
    """Each child's last stdout line as JSON, once it exited; RuntimeError naming ``what`` if one failed."""
    results = []
    for child in children:
        out, err = child.communicate(timeout=CLIENT_TIMEOUT_S)
        if child.returncode != 0:
            raise RuntimeError(f"{what} exited {child.returncode}: {(err or '').strip()[-600:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def run_clients(server: psutil.Process, mode: str, specs: list[dict]) -> dict:
    """Every spec in a client process at once: the clients' summed count and rate, the server's CPU a message."""
    before = cpu_s(server)
    children = [subprocess.Popen([GRPC_PYTHON, BENCH, mode, json.dumps(spec)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for spec in specs]
    results = last_json_lines(children, f"grpc_bench {mode}")
    count = sum(r["count"] for r in results)
    return {"count": count, "rate": round(sum(r["count"] / max(r["elapsed_s"], 1e-9) for r in results)),
            "server_cpu_us": round((cpu_s(server) - before) / max(count, 1) * 1e6)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--count", type=int, default=2000, help="messages a client process")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-receive", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(tmp, proxy=True) as cluster:
        proxy = psutil.Process(cluster.pid("proxy"))
        config = client_config(cluster.namesrv)
        for round_ in range(args.rounds):
            topic = f"GrpcLoad{round_}"
            create_topic(config, topic)
            spec = {"endpoint": cluster.proxy_endpoint, "topic": topic, "body_bytes": 100, "warmup": 50,
                    "max_s": 120, "window": 64, "count": args.count}
            sent = run_clients(proxy, "async", [spec] * args.clients)
            print(json.dumps({"round": round_, "phase": "send", "clients": args.clients, **sent}), flush=True)
            if not args.no_receive:
                got = run_clients(proxy, "receive", [{**spec, "group": f"GrpcLoadGroup{round_}", "batch": 32,
                                                      "count": sent["count"] // args.clients}] * args.clients)
                print(json.dumps({"round": round_, "phase": "receive", "clients": args.clients, **got}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
