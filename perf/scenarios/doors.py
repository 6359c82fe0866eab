"""``python -m rocketbox.perf --only doors``: the native (ZeroMQ) door beside RocketMQ's remoting
door, one cluster, the same client (``ClientConfig.transport``), the doors
interleaved run by run: batched produce, pull drain, one sync send's latency, end to end at 10k msg/s
(one batch per due tick, and one send_async per message)."""

from __future__ import annotations

import os

from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf.harness import (BATCH_SIZE, Settings, client_config, create_topic, drain_pull, run_producers)
from rocketbox.perf.report import Report, Row, percentile
from rocketbox.perf.scenarios.latency import paced_e2e_run, sync_send_latencies

DOORS = ("native", "remoting")


def scenario_doors(s: Settings, report: Report, tmp: str) -> None:
    values: dict[tuple[str, str], list[float]] = {}

    def add(door: str, measure: str, value: float) -> None:
        values.setdefault((measure, door), []).append(value)

    total_paced = int(10_000 * s.paced_s)
    with LocalCluster(os.path.join(tmp, "doors")) as cluster:
        namesrv = {"native": cluster.namesrv, "remoting": cluster.remoting_namesrv}
        for run in range(s.runs):
            for door in DOORS:
                cfg = client_config(namesrv[door], transport=door)
                topic = f"Doors{door}{run}"
                create_topic(cfg, topic)
                sent, elapsed = run_producers(cfg, topic, s.messages, 100, BATCH_SIZE, s.producer_threads,
                                              s.measure_s_max)
                add(door, "produce", sent / elapsed)
                expected = sent + s.producer_threads   # + the warm-up sends
                read, elapsed = drain_pull(cfg, topic, expected, s.measure_s_max)
                if read != expected:
                    raise RuntimeError(f"{door}: PullConsumer read {read} of {expected}")
                add(door, "consume", read / elapsed)
                lat = sync_send_latencies(cfg, f"DoorsLatency{door}{run}", s.latency_sends(), s.measure_s_max)
                add(door, "send p50", percentile(lat, 0.5))
                add(door, "send p99", percentile(lat, 0.99))
                # Paced both ways: one batch per due tick (the client's best), and one send_async per
                # message (every message a request through the door: the per-request cost shows).
                for mode, key in (("paced_batch", "e2e batch"), ("paced_async", "e2e each")):
                    lat, rate = paced_e2e_run(namesrv[door], cfg, f"Doors{mode}{door}{run}",
                                              f"Doors{mode}Group{door}{run}", mode, total_paced, s.paced_s,
                                              transport=door)
                    add(door, f"{key} rate", rate)
                    add(door, f"{key} p50", percentile(lat, 0.5))
                    add(door, f"{key} p99", percentile(lat, 0.99))
    rows = (("produce", f"batched {BATCH_SIZE}, 100 B, async flush", "msg/s"),
            ("consume", "PullConsumer drain, 100 B", "msg/s"),
            ("send p50", "sync send p50, async flush", "us"), ("send p99", "sync send p99, async flush", "us"),
            *((f"{key} {what}", f"{label} at 10k msg/s: {title}", unit)
              for key, label in (("e2e batch", "batch per due tick"), ("e2e each", "send_async each"))
              for what, title, unit in (("rate", "rate achieved", "msg/s"), ("p50", "receive - send p50", "us"),
                                        ("p99", "receive - send p99", "us"))))
    for key, measure, unit in rows:
        for door in DOORS:
            report.add(Row("doors", f"{measure}, {door} door", unit, values[(key, door)],
                           note="one client, transport=" + door))
