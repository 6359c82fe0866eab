"""Latency scenarios: single sync sends one at a time, and the paced end-to-end latency."""

from __future__ import annotations

import os
import threading
import time

from rocketbox.cluster import Message, Producer, PullConsumer
from rocketbox.cluster.config import ASYNC_FLUSH, SYNC_FLUSH
from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf.harness import (FLUSH_MODES, PACED_RATE_MSG_S, PULL_MAX_NUMS, PUSH_CONSUME_THREADS, ProducerProcess,
                                    QUEUE_COUNT, Settings, Tally, await_assigned, client_config, create_topic,
                                    message_body, push_consumer)
from rocketbox.perf.report import Report, Row, TARGETS, percentile

PULL_LOOP_SUSPEND_MS = 500


def scenario_latency(s: Settings, report: Report, tmp: str) -> None:
    """Single 100-B sync sends, one at a time, from one thread, through the remoting door; async
    flush (targets) and sync flush."""
    count = s.latency_sends()
    for flush_mode, label in s.variants(FLUSH_MODES):
        with LocalCluster(os.path.join(tmp, f"latency-{label.split()[0]}"), flush_mode=flush_mode) as cluster:
            # RocketMQ's remoting door: the faster path for one message (perf/RESULTS.md;
            # the native door hands each message to ZeroMQ's I/O threads, two more wake-ups a way).
            cfg = client_config(cluster.remoting_namesrv, transport="remoting")
            p50s, p99s, p999s = [], [], []
            for run in range(s.runs):
                lat = sync_send_latencies(cfg, f"Latency{run}", count, s.measure_s_max)
                p50s.append(percentile(lat, 0.50))
                p99s.append(percentile(lat, 0.99))
                p999s.append(percentile(lat, 0.999))
            async_ = flush_mode == ASYNC_FLUSH
            note = f"remoting door; {count} sends a run after 200 warm-up"
            report.add(Row("latency", f"sync send p50, {label}", "us", p50s,
                           TARGETS["latency_p50"] if async_ else None, note=note))
            report.add(Row("latency", f"sync send p99, {label}", "us", p99s,
                           TARGETS["latency_p99"] if async_ else None, note=note))
            report.add(Row("latency", f"sync send p99.9, {label}", "us", p999s, note=note))


def scenario_e2e_latency(s: Settings, report: Report, tmp: str) -> None:
    """Producer process paced at 10k msg/s (one batch per due tick, and send_async each); receive - send."""
    duration_s = s.paced_s
    total = int(PACED_RATE_MSG_S * duration_s)
    with LocalCluster(os.path.join(tmp, "e2e-latency")) as cluster:
        # A PushConsumer with RocketMQ's pool of consume threads, and with none (the listener on the
        # thread that received the pull: consume_service.py).
        variants = s.variants((("paced_batch", "batch per due tick", PUSH_CONSUME_THREADS),
                               ("paced_async", "send_async each", PUSH_CONSUME_THREADS)))
        for mode, label, threads in variants + (("paced_batch", "batch per due tick, no consume pool", 0),):
            stats = {"p50": [], "p99": [], "p999": [], "rate": []}
            for run in range(s.runs):
                namesrv = cluster.remoting_namesrv   # the door RocketMQ's clients use, as the latency scenario
                lat, rate = paced_e2e_run(namesrv, client_config(namesrv, transport="remoting"),
                                          f"Paced{mode}{threads}x{run}", f"BenchPacedGroup{mode}{threads}x{run}", mode,
                                          total, duration_s, transport="remoting", consume_threads=threads)
                _count_run(stats, lat, rate)
            note = (f"remoting door; PushConsumer with {threads or 'no'} consume threads; target rate "
                    f"{PACED_RATE_MSG_S:,} msg/s for {duration_s:.0f} s; first 5% skipped")
            _add_paced_rows(report, label, stats, note)
        # The consumer as the peers' consumers read (a loop in one thread on one stream, Redis's
        # XREADGROUP BLOCK): a PullConsumer long-polling a one-queue topic, no hand-off to a pool.
        _pull_loop_rows(s, report, cluster, total, duration_s, "")
    # Under sync flush a consumer reads flushed records only: the flush worker is on its path.
    with LocalCluster(os.path.join(tmp, "e2e-latency-sync"), flush_mode=SYNC_FLUSH) as cluster:
        _pull_loop_rows(s, report, cluster, total, duration_s, ", sync flush")


def _pull_loop_rows(s: Settings, report: Report, cluster, total: int, duration_s: float, label: str) -> None:
    stats = {"p50": [], "p99": [], "p999": [], "rate": []}
    for run in range(s.runs):
        namesrv = cluster.remoting_namesrv
        lat, rate = paced_pull_e2e_run(namesrv, client_config(namesrv, transport="remoting"), f"PacedPull{run}",
                                       f"BenchPullLoopGroup{run}", total, duration_s)
        _count_run(stats, lat, rate)
    note = (f"remoting door; a PullConsumer long-polling a 1-queue topic in one thread; producer batch per due "
            f"tick at {PACED_RATE_MSG_S:,} msg/s for {duration_s:.0f} s; first 5% skipped")
    _add_paced_rows(report, f"pull loop, 1 queue{label}", stats, note, (("p50", "p50"), ("p99", "p99")))


def _count_run(stats: dict, latencies: list[float], rate: float) -> None:
    stats["p50"].append(percentile(latencies, 0.5))
    stats["p99"].append(percentile(latencies, 0.99))
    stats["p999"].append(percentile(latencies, 0.999))
    stats["rate"].append(rate)


def _add_paced_rows(report: Report, label: str, stats: dict, note: str,
                    names=(("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"))) -> None:
    report.add(Row("e2e_latency", f"rate achieved, {label}", "msg/s", stats["rate"],
                   (">=", PACED_RATE_MSG_S * 0.99), note=note + "; met within 1%"))
    for key, name in names:
        report.add(Row("e2e_latency", f"receive - send {name}, {label}", "us", stats[key], note=note))


def paced_e2e_run(namesrv: str, cfg, topic: str, group: str, mode: str, total: int, duration_s: float,
                  transport: str = "native", consume_threads: int = PUSH_CONSUME_THREADS) -> tuple[list[float], float]:
    """One paced run: a producer process at 10k msg/s, a PushConsumer here; (receive - send
    latencies in us of the steady part, achieved send rate)."""
    create_topic(cfg, topic)
    tally = Tally(total + 1, stamped=True)
    consumer = push_consumer(cfg, group, topic, tally, consume_threads)
    consumer.start()
    try:
        await_assigned(consumer, QUEUE_COUNT)
        rate = _paced_producer_run(namesrv, topic, mode, total, duration_s, transport, tally)
    finally:
        consumer.shutdown()
    return tally.steady_latencies(total), rate


def _paced_producer_run(namesrv: str, topic: str, mode: str, total: int, duration_s: float, transport: str,
                        tally: Tally) -> float:
    """A producer process paced at 10k msg/s until done; waits for ``tally`` to count what it sent.
    Returns the achieved send rate."""
    producer = ProducerProcess(namesrv, topic, mode, total, 100, rate=PACED_RATE_MSG_S,
                               time_s_max=duration_s * 3, transport=transport)
    try:
        producer.start()
        producer.go()
        result = producer.result()
    finally:
        producer.stop()
    tally.retarget(result["sent"] - result.get("failed", 0) + 1)
    tally.reached.wait(30)
    return result["sent"] / result["elapsed_s"]


def paced_pull_e2e_run(namesrv: str, cfg, topic: str, group: str, total: int,
                       duration_s: float) -> tuple[list[float], float]:
    """A producer process at 10k msg/s (a batch per due tick, remoting door) to a one-queue topic read
    here by a PullConsumer long-polling in one thread; (receive - send us of the steady part, send rate)."""
    create_topic(cfg, topic, 1)
    tally = Tally(total + 1, stamped=True)
    stop = threading.Event()
    consumer = PullConsumer(group, config=cfg)
    mq = consumer.queues(topic)[0]
    failures: list[BaseException] = []

    def read_loop() -> None:
        offset = consumer.max_offset(mq)
        try:
            while not stop.is_set():
                result = consumer.pull(mq, offset, PULL_MAX_NUMS, "*", suspend_ms=PULL_LOOP_SUSPEND_MS)
                if result.messages:
                    tally.add(len(result.messages), [m.body for m in result.messages])
                offset = result.next_begin_offset
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    reader = threading.Thread(target=read_loop, name="pull-loop", daemon=True)
    reader.start()
    try:
        rate = _paced_producer_run(namesrv, topic, "paced_batch", total, duration_s, "remoting", tally)
    finally:
        stop.set()
        reader.join(PULL_LOOP_SUSPEND_MS / 1000 + 5)
        consumer.shutdown()
    if failures:
        raise RuntimeError(f"the pull loop failed: {failures[0]!r}")
    return tally.steady_latencies(total), rate


def sync_send_latencies(cfg, topic: str, count: int, time_s_max: float) -> list[float]:
    """``count`` single 100-B sync sends from one thread after 200 warm-up; each one's time in us."""
    create_topic(cfg, topic)
    body = message_body(100)
    with Producer("BenchLatencyProducer", config=cfg) as producer:
        for _ in range(200):
            producer.send(Message(topic, body))
        lat = []
        deadline = time.monotonic() + time_s_max
        for _ in range(count):
            if time.monotonic() >= deadline:
                break
            t0 = time.perf_counter()
            producer.send(Message(topic, body))
            lat.append((time.perf_counter() - t0) * 1e6)
    return lat
