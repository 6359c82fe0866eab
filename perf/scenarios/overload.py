"""Overload: goodput and the latency of admitted sends when producers offer twice
what the broker stores, beside that capacity, measured in the same run.

Capacity: a closed loop of raw senders keeping 64 sends in flight (the most the broker acks, with
none refused). Overload: two raw senders (``perf/raw_sender.py``: open loop, RocketMQ's retry with
back-off on SYSTEM_BUSY) offering twice that for 10 s; goodput = SEND_OK answers a second, latency
= request sent to SEND_OK. Two brokers:
- sync flush on a throttled disk (the flush worker's writes limited to 8 MB/s by a blkio cgroup,
  ``perf/disk_throttle.py``; skipped with the reason where cgroups cannot be written), 4 KiB
  messages: the broker is the bottleneck and the machine's two cores are not;
- async flush, 1 KiB messages: the broker's one Python thread is the bottleneck, and it shares the
  two cores with the senders.
"""

from __future__ import annotations

import os

from rocketbox.cluster.config import ASYNC_FLUSH, SYNC_FLUSH
from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf import disk_throttle, raw_sender
from rocketbox.perf.harness import Settings, client_config, create_topic
from rocketbox.perf.offered_load import run_children
from rocketbox.perf.report import Report, Row, percentile

DISK_BYTES_PER_S = 8_000_000
# A request unanswered this long counts as unanswered (the slow disk stalls the broker's own page
# cache writes too: see tests/fault/test_overload.py).
ANSWER_BOUND_S = 10.0
CAPACITY_S = 5.0
OVERLOAD_S = 10.0
VARIANTS = (
    ("disk", SYNC_FLUSH, 4096, "sync flush, disk 8 MB/s, 4 KiB"),
    ("cpu", ASYNC_FLUSH, 1024, "async flush, 1 KiB"),
)


def _one_run(endpoint: str, topic: str, body_bytes: int, overload_s: float) -> dict:
    capacity = raw_sender.merged(run_children(raw_sender.senders(
        endpoint, topic, 1, rate=0, window=64, duration_s=CAPACITY_S, body_bytes=body_bytes, keep_keys=False,
        timeout_s=ANSWER_BOUND_S)))
    capacity_msg_s = capacity["acked"] / CAPACITY_S
    offered = raw_sender.merged(run_children(raw_sender.senders(
        endpoint, topic, 2, rate=max(2, int(2 * capacity_msg_s)), duration_s=overload_s, body_bytes=body_bytes,
        keep_keys=False, timeout_s=ANSWER_BOUND_S)))
    latencies = offered["latencies_us"]
    return {"capacity": capacity_msg_s, "goodput": offered["acked"] / overload_s,
            "offered": offered["offered"] / overload_s, "p50": percentile(latencies, 0.5) / 1000,
            "p99": percentile(latencies, 0.99) / 1000,
            "busy_share": offered["request_busy"] / max(1, offered["requests"]),
            "unanswered": offered["request_unanswered"], "answer_max": offered["answer_max_ms"],
            "reasons": offered["reasons"]}


def scenario_overload(s: Settings, report: Report, tmp: str) -> None:
    overload_s = OVERLOAD_S / 2 if s.quick else OVERLOAD_S
    for key, flush_mode, body_bytes, label in s.variants(VARIANTS):
        if key == "disk" and disk_throttle.unavailable():
            report.add(Row("overload", f"goodput at 2x, {label}", "msg/s", [],
                           note=f"skipped: {disk_throttle.unavailable()}"))
            continue
        runs = []
        with LocalCluster(os.path.join(tmp, f"overload-{key}"), flush_mode=flush_mode,
                          store_overrides={"commitlog_file_size_bytes": 256 << 20}) as cluster:
            create_topic(client_config(cluster.namesrv), "Overload")
            broker = cluster.topology.brokers[0]
            for _ in range(s.runs):
                if key == "disk":
                    with disk_throttle.throttled(cluster.pid("broker-a-flush"), broker.store.store_dir,
                                                 DISK_BYTES_PER_S):
                        runs.append(_one_run(broker.endpoint, "Overload", body_bytes, overload_s))
                else:
                    runs.append(_one_run(broker.endpoint, "Overload", body_bytes, overload_s))
        reasons = sorted({tag for run in runs for tag in run["reasons"]})
        note = (f"2 raw senders, open loop at 2x the capacity of the same run for {overload_s:.0f} s; "
                f"SYSTEM_BUSY reasons: {', '.join(reasons) or 'none'}")
        for measure, field, unit in (("capacity (closed loop, 64 in flight)", "capacity", "msg/s"),
                                     ("offered at 2x", "offered", "msg/s"),
                                     ("goodput at 2x (SEND_OK)", "goodput", "msg/s"),
                                     ("admitted send p50 at 2x", "p50", "ms"),
                                     ("admitted send p99 at 2x", "p99", "ms"),
                                     ("requests answered SYSTEM_BUSY at 2x", "busy_share", "share"),
                                     ("longest answer (SEND_OK or SYSTEM_BUSY) at 2x", "answer_max", "ms"),
                                     ("requests unanswered within 10 s at 2x", "unanswered", "requests")):
            report.add(Row("overload", f"{measure}, {label}", unit, [run[field] for run in runs], note=note))
