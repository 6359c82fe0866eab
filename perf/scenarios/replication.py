"""Replication scenarios: async vs sync replication, and replication x flush modes."""

from __future__ import annotations

import os

from rocketbox.cluster import Admin
from rocketbox.cluster.config import ASYNC_FLUSH, ASYNC_MASTER, SYNC_FLUSH, SYNC_MASTER
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.perf.harness import BATCH_SIZE, Settings, client_config, create_topic, run_producers
from rocketbox.perf.report import Report, Row, TARGETS, percentile


def scenario_replication(s: Settings, report: Report, tmp: str) -> None:
    """Batched produce to a master with one slave, async then sync replication (the sync wait
    is pipelined, so it must cost well under half the throughput; RocketMQ's blocking wait cost 10x)."""
    medians = {}
    for role, label in ((ASYNC_MASTER, "async master"), (SYNC_MASTER, "sync master")):
        with LocalCluster(os.path.join(tmp, f"replication-{role.lower()}"), slaves=1,
                          broker_overrides={"broker_role": role}) as cluster:
            cfg = client_config(cluster.namesrv)
            master = f"tcp://{cluster.topology.brokers[0].address}"
            with Admin(config=cfg) as admin:
                wait_until(lambda: admin.broker_runtime_info(master)["ha"]["inSync"], 30, what="slave in sync")
                values = []
                for run in range(s.runs):
                    topic = f"Replication{run}"
                    create_topic(cfg, topic)
                    sent, elapsed = run_producers(cfg, topic, s.messages, 100, BATCH_SIZE, s.producer_threads,
                                                  s.measure_s_max)
                    values.append(sent / elapsed)
                info = admin.broker_runtime_info(master)
            if role == SYNC_MASTER and (not info["ha"]["inSync"] or info["confirmPos"] < info["writePos"] - 4096 * 256):
                raise RuntimeError(f"the slave fell out of sync during the sync runs: {info['ha']}")
            row = report.add(Row("replication", f"batched {BATCH_SIZE}, 100 B, {label}, 1 slave", "msg/s", values,
                                 vs_baseline=True, note=f"{s.producer_threads} producer threads, one process; "
                                                        f"master, slave and their workers share the cores"))
            medians[role] = row.median
    if medians.get(ASYNC_MASTER):
        share = 100 * medians[SYNC_MASTER] / medians[ASYNC_MASTER]
        report.add(Row("replication", "sync master throughput as a share of async", "%", [share],
                       TARGETS["replication_sync_share"], note="ratio of the medians"))


REPLICATION_FLUSH_MODES = tuple((role, flush, f"{r} replication + {f} flush")
                                for role, r in ((ASYNC_MASTER, "async"), (SYNC_MASTER, "sync"))
                                for flush, f in ((ASYNC_FLUSH, "async"), (SYNC_FLUSH, "sync")))


def scenario_replication_flush(s: Settings, report: Report, tmp: str) -> None:
    """A master with one slave in each of {async, sync} replication x {async, sync} flush: batched
    throughput with the publish latency of each batch (send_batch call to answer), then single sync
    sends one at a time from one thread. The target: sync + sync >= 100k msg/s batched, p99 < 2 ms.
    Every answer must be SEND_OK (a sync master with no slave in sync answers SLAVE_NOT_AVAILABLE at
    once, which would flatter the figures)."""
    singles = s.latency_sends()
    for role, flush_mode, label in s.variants(REPLICATION_FLUSH_MODES):
        name = label.replace(" replication + ", "-").replace(" flush", "")
        with LocalCluster(os.path.join(tmp, f"replication-flush-{name}"), slaves=1, flush_mode=flush_mode,
                          broker_overrides={"broker_role": role}) as cluster:
            cfg = client_config(cluster.namesrv)
            master = f"tcp://{cluster.topology.brokers[0].address}"
            with Admin(config=cfg) as admin:
                wait_until(lambda: admin.broker_runtime_info(master)["ha"]["inSync"], 30, what="slave in sync")
            rates, p50s, p99s, single_p50s, single_p99s = [], [], [], [], []
            statuses: dict = {}
            for run in range(s.runs):
                topic = f"ReplFlush{run}"
                create_topic(cfg, topic)
                latencies: list = []
                sent, elapsed = run_producers(cfg, topic, s.messages, 100, BATCH_SIZE, s.producer_threads,
                                              s.measure_s_max, latencies=latencies, statuses=statuses)
                rates.append(sent / elapsed)
                p50s.append(percentile(latencies, 0.50))
                p99s.append(percentile(latencies, 0.99))
                topic = f"ReplFlushSingle{run}"
                create_topic(cfg, topic)
                latencies = []
                run_producers(cfg, topic, singles, 100, 1, 1, s.measure_s_max, latencies=latencies,
                              statuses=statuses)
                latencies = latencies[min(200, len(latencies) // 10):]  # warm-up
                single_p50s.append(percentile(latencies, 0.50))
                single_p99s.append(percentile(latencies, 0.99))
            if set(statuses) != {"SEND_OK"}:
                raise RuntimeError(f"{label}: answers other than SEND_OK: {statuses}")
            goal = role == SYNC_MASTER and flush_mode == SYNC_FLUSH
            note = (f"{s.producer_threads} producer threads, one process, {s.messages} messages a run; "
                    f"master, slave and their workers share the cores")
            report.add(Row("replication_flush", f"batched {BATCH_SIZE}, 100 B, {label}", "msg/s", rates,
                           TARGETS["replication_sync_sync"] if goal else None, vs_baseline=True, note=note))
            report.add(Row("replication_flush", f"batch publish p50, {label}", "us", p50s, note=note))
            report.add(Row("replication_flush", f"batch publish p99, {label}", "us", p99s,
                           TARGETS["replication_sync_sync_p99"] if goal else None, note=note))
            note = f"{singles} sends a run, one thread, the first {min(200, singles // 10)} left out"
            report.add(Row("replication_flush", f"single sync send p50, {label}", "us", single_p50s, note=note))
            report.add(Row("replication_flush", f"single sync send p99, {label}", "us", single_p99s, note=note))
