"""The comparison's row per door (``python -m rocketbox.perf --compare``; what each row is: perf/door_table.py).

- native: the first table's figures of ours (RocketBox's own client), no second run;
- remoting: a ``LocalCluster`` with its defaults, RocketMQ's C++ client (``.venv-rocketmq4``,
  perf/remoting_cpp_bench.py) in a child process per run and mode;
- Apache RocketMQ: its NameServer and broker started by perf/peers/apache_rocketmq.py, the same
  C++ client and runs;
- gRPC: a ``LocalCluster`` with the proxy, RocketMQ 5's Node.js client (``.node/``, `make node-client`;
  perf/grpc_node_bench.js) in a child process per run and mode.

A row whose client or server is not here is skipped with its reason, printed and kept in
compare.json; one that fails is reported and the others still run. Topics are fresh each run; on
the two remoting rows they are made by the first send (both servers auto-create, 4 queues: the C++
client's default). Every child has a timeout; clusters and servers stop in ``finally``.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import traceback

from rocketbox.perf.door_table import (APACHE, CPP_ASYNC_IN_FLIGHT, GRPC, NATIVE, NODE_IN_FLIGHT, NODE_RECEIVE_BATCH,
                                       NODE_RUN_S_MAX,
                                       REMOTING, add_cpp_result, add_node_result, cpp_client_missing, door_counts,
                                       door_entry, native_values, node_client_missing)
from rocketbox.perf.harness import Settings

REPO = pathlib.Path(__file__).resolve().parents[1]
CPP_PYTHON = REPO / ".venv-rocketmq4" / "bin" / "python"
CPP_BENCH = REPO / "perf" / "remoting_cpp_bench.py"
NODE_CLIENT_DIR = REPO / ".node" / "node_modules" / "rocketmq-client-nodejs"
NODE_BENCH = REPO / "perf" / "grpc_node_bench.js"
CHILD_TIMEOUT_S = 300


def _last_json_line(argv: list[str], env: dict, what: str) -> dict:
    out = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        # the error's own lines, not its stack ("    at ..." in Node, "  File ..." in Python)
        said = [line.strip() for line in (out.stderr or out.stdout).splitlines()
                if line.strip() and not line.startswith(("    at ", "  File ", "    "))]
        raise RuntimeError(f"{what} exited {out.returncode}: {' / '.join(said)[-600:]}")
    return json.loads(lines[-1])


def run_cpp_rows(entry: dict, namesrv: str, s: Settings, home: str) -> None:
    """Per run: sync sends, async sends (64 in flight) to a fresh topic, a push consumer draining it."""
    counts = door_counts(REMOTING, s.quick, s.messages, s.latency_sends())
    env = {**os.environ, "HOME": home}   # the C++ client writes its logs under $HOME
    os.makedirs(home, exist_ok=True)
    for run in range(s.runs):
        steps = (("sync", f"DoorSync{run}", counts["sync"]), ("async", f"DoorDrain{run}", counts["produce"]),
                 ("push", f"DoorDrain{run}", counts["produce"]))
        for mode, topic, count in steps:
            argv = [str(CPP_PYTHON), str(CPP_BENCH), mode, namesrv, topic, str(count)]
            if mode == "async":
                argv.append(str(CPP_ASYNC_IN_FLIGHT))
            print(f"[perf]   {entry['label']} run {run + 1}: {mode} {count:,}", flush=True)
            add_cpp_result(entry, mode, _last_json_line(argv, env, f"the C++ client ({mode})"), count)


def run_node_rows(entry: dict, cluster, s: Settings) -> None:
    """Per run: sync sends, 64 sends in flight to a fresh topic, a SimpleConsumer receiving + acking them."""
    from rocketbox.perf.harness import client_config, create_topic
    counts = door_counts(GRPC, s.quick, s.messages, s.latency_sends())
    config = client_config(cluster.namesrv)
    env = {**os.environ, "ROCKETBOX_NODE_CLIENT": str(NODE_CLIENT_DIR)}
    for run in range(s.runs):
        topic = f"DoorGrpc{run}"
        create_topic(config, topic)
        spec = {"endpoint": cluster.proxy_endpoint, "topic": topic, "body_bytes": 100, "warmup": 50,
                "max_s": NODE_RUN_S_MAX, "window": NODE_IN_FLIGHT, "group": f"DoorGrpcGroup{run}",
                "batch": NODE_RECEIVE_BATCH}
        received_expected = None
        for mode, count in (("sync", counts["sync"]), ("async", counts["produce"]), ("receive", None)):
            # receive drains everything on the topic: the warm-ups, the sync sends and the async ones
            count = count if count is not None else received_expected
            print(f"[perf]   {entry['label']} run {run + 1}: {mode} {count:,}", flush=True)
            result = _last_json_line(["node", str(NODE_BENCH), mode, json.dumps({**spec, "count": count})], env,
                                     f"the Node.js client ({mode})")
            add_node_result(entry, mode, result, count)
            if mode == "async":
                received_expected = 2 * spec["warmup"] + counts["sync"] + result["count"]


def _measure(entry: dict, errors: list, run) -> None:
    try:
        run()
    except Exception as exc:  # noqa: BLE001 - report and go on to the next row
        traceback.print_exc()
        entry["status"], entry["reason"] = "failed", f"{type(exc).__name__}: {exc}"
        errors.append({"system": entry["label"], "error": entry["reason"]})


def measure_doors(s: Settings, tmp: str, ours_values: dict, apache_peer, errors: list) -> dict:
    """The rows of perf/door_table.py; ``apache_peer`` is the Apache peer or None when not selected."""
    from rocketbox.cluster.testing import LocalCluster
    doors = {NATIVE: door_entry(NATIVE)}
    doors[NATIVE]["values"] = native_values(ours_values)
    cpp_reason = cpp_client_missing(CPP_PYTHON)
    doors[REMOTING] = door_entry(REMOTING, cpp_reason)
    if apache_peer is not None:
        reason = apache_peer.missing() or (f"{cpp_reason} (the Apache row's client)" if cpp_reason else None)
        doors[APACHE] = door_entry(APACHE, reason, "" if reason else apache_peer.describe())
    doors[GRPC] = door_entry(GRPC, node_client_missing(shutil.which("node"), NODE_CLIENT_DIR))
    for entry in doors.values():
        if entry["status"] == "skipped":
            print(f"[perf] {entry['label']}: skipped, {entry['reason']}", flush=True)

    def remoting() -> None:
        with LocalCluster(os.path.join(tmp, "door-remoting")) as cluster:
            run_cpp_rows(doors[REMOTING], cluster.remoting_namesrv, s, os.path.join(tmp, "door-remoting-home"))

    def apache() -> None:
        with apache_peer.server(tmp) as namesrv:
            run_cpp_rows(doors[APACHE], namesrv, s, os.path.join(tmp, "door-apache-home"))

    def grpc() -> None:
        with LocalCluster(os.path.join(tmp, "door-grpc"), proxy=True) as cluster:
            run_node_rows(doors[GRPC], cluster, s)

    for door, run in ((REMOTING, remoting), (APACHE, apache), (GRPC, grpc)):
        if door in doors and doors[door]["status"] == "measured":
            print(f"[perf] {doors[door]['label']} ({doors[door]['client']}) ...", flush=True)
            _measure(doors[door], errors, run)
    return doors
