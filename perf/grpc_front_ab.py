"""The gRPC door on its two fronts, interleaved: ``grpc_front = "native"`` (HTTP/2 in the C helper,
``cluster/proxy/native_door.py``) against ``"grpcio"`` (grpc.aio), each round a fresh LocalCluster with
the proxy per front, the order turned each round. The load is RocketMQ 5's official Node.js client
(``perf/grpc_node_bench.js``, ``make node-client``): ``--clients`` processes each sending ``--count``
messages of 100 B with 64 in flight, then as many SimpleConsumers receiving (batch 32) and acking
every message. Measured: the clients' summed rates, the send p50 (a send's call to its answer, as
the client sees it), and the proxy's (and the broker's) CPU a message.

    .venv/bin/python -m rocketbox.perf.grpc_front_ab --count 20000 --rounds 3 [--clients 1]

One JSON line a front a round, then the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile

import psutil

from rocketbox.perf.grpc_load import cpu_s, last_json_lines
from rocketbox.perf.harness import turned

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NODE_BENCH = os.path.join(REPO, "perf", "grpc_node_bench.js")
NODE_CLIENT = os.path.join(REPO, ".node", "node_modules", "rocketmq-client-nodejs")
FRONTS = ("native", "grpcio")
# What each front sets in the proxy: ``native-unbatched`` is the native front with a read's SendMessage
# calls taken one at a time (``grpc_batch_calls`` off), the A/B of proxy/producer_batch.py;
# ``native-io-thread`` its broker calls through the RpcClient's I/O thread (proxy/loop_calls.py's A/B).
FRONT_SETTINGS = {"native": {"grpc_front": "native"}, "grpcio": {"grpc_front": "grpcio"},
                  "native-unbatched": {"grpc_front": "native", "grpc_batch_calls": False},
                  "native-io-thread": {"grpc_front": "native", "broker_calls_on_loop": False}}


def node_clients(mode: str, specs: list[dict]) -> list[dict]:
    env = {**os.environ, "ROCKETBOX_NODE_CLIENT": NODE_CLIENT}
    children = [subprocess.Popen(["node", NODE_BENCH, mode, json.dumps(spec)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=env) for spec in specs]
    return last_json_lines(children, f"the Node.js client ({mode})")


def phase(processes: dict[str, psutil.Process], mode: str, specs: list[dict]) -> dict:
    before = {name: cpu_s(p) for name, p in processes.items()}
    results = node_clients(mode, specs)
    count = sum(r["count"] for r in results)
    row = {"count": count, "rate": round(sum(r["count"] / max(r["elapsed_s"], 1e-9) for r in results))}
    for name, process in processes.items():
        row[f"{name}_cpu_us"] = round((cpu_s(process) - before[name]) / max(count, 1) * 1e6, 1)
    if mode == "async":
        row["p50_us"] = round(statistics.median(r["p50_us"] for r in results))
        row["p99_us"] = round(statistics.median(r["p99_us"] for r in results))
        row["failed"] = sum(r["failed"] for r in results)
    else:
        row["failed_acks"] = sum(r["failed_acks"] for r in results)
    return row


def measure(front: str, args, tmp: str, round_: int) -> dict:
    from rocketbox.cluster.testing import LocalCluster
    from rocketbox.perf.harness import client_config, create_topic
    with LocalCluster(os.path.join(tmp, f"{front}-{round_}"), proxy=True, metrics=False, remoting=False,
                      proxy_overrides=FRONT_SETTINGS[front]) as cluster:
        topic = "GrpcFrontAB"
        create_topic(client_config(cluster.namesrv), topic)
        processes = {"proxy": psutil.Process(cluster.pid("proxy")), "broker": psutil.Process(cluster.pid("broker-a"))}
        spec = {"endpoint": cluster.proxy_endpoint, "topic": topic, "body_bytes": 100, "warmup": 200, "max_s": 300,
                "window": 64, "batch": 32}
        sends = phase(processes, "async", [{**spec, "count": args.count}] * args.clients)
        expected = sends["count"] + spec["warmup"] * args.clients
        share = -(-expected // args.clients)
        receivers = [{**spec, "count": share, "group": f"GrpcFrontAB{round_}"}] * args.clients
        receives = phase(processes, "receive", receivers)
        return {"front": front, "round": round_, "send": sends, "receive": receives}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000, help="sends a client process")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fronts", default=",".join(FRONTS), help=f"of {', '.join(FRONT_SETTINGS)}")
    args = parser.parse_args()
    fronts = args.fronts.split(",")
    rows: dict[str, list[dict]] = {front: [] for front in fronts}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for front in turned(fronts, round_):
                row = measure(front, args, tmp, round_)
                rows[front].append(row)
                print(json.dumps(row), flush=True)
    for front, front_rows in rows.items():
        def median(phase_name: str, key: str):
            return statistics.median(r[phase_name][key] for r in front_rows)
        print(json.dumps({"front": front, "send_rate": median("send", "rate"), "send_p50_us": median("send", "p50_us"),
                          "send_proxy_cpu_us": median("send", "proxy_cpu_us"),
                          "send_broker_cpu_us": median("send", "broker_cpu_us"),
                          "receive_rate": median("receive", "rate"),
                          "receive_proxy_cpu_us": median("receive", "proxy_cpu_us"),
                          "receive_broker_cpu_us": median("receive", "broker_cpu_us")}), flush=True)


if __name__ == "__main__":
    main()
