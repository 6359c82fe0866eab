"""The comparison's second table (``python -m rocketbox.perf --compare``): a row per door of RocketBox
and Apache RocketMQ beside its remoting row, each driven by a client of that door. Pure: what each
row is, why one is skipped, the clients' JSON lines folded into a row's values, and the rows as text.
perf/door_rows.py runs the clients.

| row | client | sync send | produce | drain |
| --- | --- | --- | --- | --- |
| RocketBox, native door | RocketBox's Python client | one at a time | batched 256 a request | PushConsumer |
| RocketBox, remoting door | RocketMQ C++ client 0.4.4 | one at a time | async, 64 in flight | push consumer |
| Apache RocketMQ (remoting) | the same C++ client | one at a time | async, 64 in flight | push consumer |
| RocketBox, gRPC door | RocketMQ 5 Node.js client | one at a time | 64 sends in flight | SimpleConsumer receive 32 + ack |
"""

from __future__ import annotations

import pathlib
import statistics
from dataclasses import dataclass

from rocketbox.perf.report import format_value, percentile

NATIVE, REMOTING, APACHE, GRPC = "native", "remoting_cpp", "apache_cpp", "grpc_node"
# (key, column title, unit)
DOOR_MEASURES = (("sync_p50", "sync send p50", "us"), ("sync_p99", "sync send p99", "us"),
                 ("produce", "produce", "msg/s"), ("drain", "drain", "msg/s"))
# The native row's figures are the first table's: (door measure, comparison measure of perf/compare_table.py).
NATIVE_FROM_COMPARISON = (("sync_p50", "publish_p50"), ("sync_p99", "publish_p99"), ("produce", "produce"),
                          ("drain", "consume"))
CPP_ASYNC_IN_FLIGHT = 64
NODE_IN_FLIGHT = 64
NODE_RECEIVE_BATCH = 32
# The C++ client's async send slows as a run grows, whichever server (client at ~80 % of a core, the
# broker at ~10 %): 5k sends ran at 2.5k msg/s, 20k at 0.9k, 100k at 0.27k (RESULTS.md, "A row per door").
CPP_PRODUCE_MAX = 10_000
NODE_COUNT_MAX = 10_000   # the gRPC door runs at hundreds to thousands of msg/s today
NODE_RUN_S_MAX = 120.0    # a Node client's run stops here (at 250 msg/s on a loaded machine, 1,100 take 5-15 s)


@dataclass(frozen=True)
class Door:
    label: str
    client: str
    note: str


DOORS = {
    NATIVE: Door("RocketBox, native door", "RocketBox Python client",
                 "sync send one at a time; produce batched 256 a request; PushConsumer drain (the first table's)"),
    REMOTING: Door("RocketBox, remoting door", "RocketMQ C++ client 0.4.4",
                   f"sync send one at a time; produce async, {CPP_ASYNC_IN_FLIGHT} in flight; push consumer drains "
                   "what produce sent"),
    APACHE: Door("Apache RocketMQ, remoting", "RocketMQ C++ client 0.4.4",
                 f"the same client and runs as RocketBox's remoting row; ASYNC_MASTER, async flush"),
    GRPC: Door("RocketBox, gRPC door (proxy)", "RocketMQ 5 Node.js client 1.0.8",
               f"sync send one at a time; produce {NODE_IN_FLIGHT} sends in flight; SimpleConsumer receive "
               f"{NODE_RECEIVE_BATCH} + ack each drains what produce sent"),
}


def door_entry(door: str, reason: str | None = None, about: str = "") -> dict:
    """A row of compare.json's "doors": measured (values to come) or skipped with ``reason``."""
    spec = DOORS[door]
    return {"label": spec.label, "client": spec.client, "note": spec.note, "about": about,
            "status": "skipped" if reason else "measured", "reason": reason or "", "values": {}, "failed_sends": 0}


def cpp_client_missing(python: pathlib.Path) -> str | None:
    """Why RocketMQ's C++ client (its own venv) cannot run, or None."""
    if not python.is_file():
        return f"RocketMQ's C++ client is not installed ({python} missing); `make real-clients` installs it"
    return None


def node_client_missing(node: str | None, client_dir: pathlib.Path) -> str | None:
    """Why the Node.js 5.x client cannot run, or None."""
    if not node:
        return "node is not on PATH (the gRPC row needs Node.js >= 16 and `make node-client`)"
    if not (client_dir / "package.json").is_file():
        return f"the Node.js client is not installed ({client_dir} missing); `make node-client` installs it"
    return None


def door_counts(door: str, quick: bool, messages: int, latency_sends: int) -> dict:
    """Messages of each run: ``sync`` sends timed one by one, ``produce`` sent (and then drained)."""
    if door == GRPC:
        return {"sync": min(latency_sends, 1000), "produce": min(messages // 10, NODE_COUNT_MAX)}
    return {"sync": latency_sends, "produce": min(messages, CPP_PRODUCE_MAX)}


def native_values(comparison_values: dict) -> dict:
    """The native row, taken from the first table's figures of ours (no second run)."""
    return {door_key: comparison_values[key] for door_key, key in NATIVE_FROM_COMPARISON if key in comparison_values}


def add_cpp_result(entry: dict, mode: str, result: dict, expected: int) -> None:
    """Fold one JSON line of perf/remoting_cpp_bench.py into ``entry``; raises when it fell short."""
    values = entry["values"]
    if mode == "sync":
        values.setdefault("sync_p50", []).append(result["p50_us"])
        values.setdefault("sync_p99", []).append(result["p99_us"])
        entry["failed_sends"] += result.get("fails", 0)
    elif mode == "async":
        if result.get("stalled"):
            raise RuntimeError(f"the C++ client stalled: {result['issued']} of {expected} sends issued, "
                               f"{result['n']} acknowledged")
        values.setdefault("produce", []).append(result["rate"])
        entry["failed_sends"] += result.get("fails", 0)
    else:
        if result["n"] < expected:
            raise RuntimeError(f"the push consumer drained {result['n']} of {expected}")
        values.setdefault("drain", []).append(result["rate"])


def add_node_result(entry: dict, mode: str, result: dict, expected: int) -> None:
    """Fold one JSON line of perf/grpc_node_bench.js into ``entry``; raises when it fell short."""
    values = entry["values"]
    if mode == "sync":
        latencies = result["latencies_us"]
        if len(latencies) < expected:
            raise RuntimeError(f"{len(latencies)} of {expected} sync sends within the time limit")
        values.setdefault("sync_p50", []).append(percentile(latencies, 0.50))
        values.setdefault("sync_p99", []).append(percentile(latencies, 0.99))
        return
    if mode == "async":
        entry["failed_sends"] += result.get("failed", 0)
    elif result["count"] < expected:
        raise RuntimeError(f"received {result['count']} of {expected}")
    else:
        entry["failed_acks"] = entry.get("failed_acks", 0) + result.get("failed_acks", 0)
    key = "produce" if mode == "async" else "drain"
    values.setdefault(key, []).append(result["count"] / max(result["elapsed_s"], 1e-9))


def _cell(values: list | None, unit: str) -> str:
    return format_value(statistics.median(values), unit) if values else "-"


def door_header() -> list[str]:
    return ["row", "client", *[f"{title} ({unit})" for _, title, unit in DOOR_MEASURES], "what is measured"]


def door_rows(doors: dict) -> list[list[str]]:
    """A row a door: medians, or the reason it was not measured in place of its figures."""
    rows = []
    for entry in doors.values():
        if entry["status"] != "measured":
            rows.append([entry["label"], entry["client"], *[entry["status"]] * len(DOOR_MEASURES),
                         " ".join(entry["reason"].split())])   # one line: a cell of a markdown table
            continue
        note = entry["note"]
        if entry.get("failed_sends"):
            note += f"; {entry['failed_sends']} failed sends"
        if entry.get("failed_acks"):
            note += f"; {entry['failed_acks']} failed acks"
        rows.append([entry["label"], entry["client"],
                     *[_cell(entry["values"].get(key), unit) for key, _, unit in DOOR_MEASURES], note])
    return rows


def remoting_vs_apache(doors: dict) -> str:
    """RocketBox's remoting row over Apache's, measure by measure, or "" when either is missing."""
    ours, apache = doors.get(REMOTING), doors.get(APACHE)
    if not ours or not apache or ours["status"] != "measured" or apache["status"] != "measured":
        return ""
    parts = []
    for key, title, unit in DOOR_MEASURES:
        a, b = ours["values"].get(key), apache["values"].get(key)
        if a and b:
            ratio = statistics.median(a) / statistics.median(b)
            parts.append(f"{title} {ratio:.2f}x ({'lower' if unit == 'us' else 'higher'} is better)")
    return "RocketBox remoting / Apache, same C++ client: " + ", ".join(parts) if parts else ""


def door_markdown(doors: dict) -> str:
    lines = ["| " + " | ".join(door_header()) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in DOOR_MEASURES) + " | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in door_rows(doors)]
    notes = [f"{entry['label']}: {entry['about']}." for entry in doors.values() if entry.get("about")]
    ratio = remoting_vs_apache(doors)
    return "\n".join(lines + ([""] if notes or ratio else []) + notes + ([ratio] if ratio else []))
