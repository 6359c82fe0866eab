"""Throughput scenarios: the bare ZeroMQ baseline, produce, consume, produce+consume at once,
and group commit under sync flush."""

from __future__ import annotations

import multiprocessing
import os
import time

from rocketbox.cluster import PullConsumer
from rocketbox.cluster.config import ASYNC_FLUSH, SYNC_FLUSH
from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf.harness import (BATCH_SIZE, FLUSH_MODES, PULL_MAX_NUMS, PUSH_PULL_BATCH, ProducerProcess, QUEUE_COUNT,
                          Settings, Tally, await_assigned, client_config, create_topic, drain_pull, message_body,
                          push_consumer, run_producers)
from rocketbox.perf.report import Report, Row, TARGETS


def scenario_baseline(s: Settings, report: Report, tmp: str) -> None:
    """Bare ZeroMQ PUSH (here) -> PULL (another process) over tcp 127.0.0.1, 256 x 100 B a frame."""
    frames = 4_000 if s.quick else 20_000
    values = []
    for _ in range(s.runs):
        msg_s, _ = zmq_baseline(frames, s.measure_s_max)
        values.append(msg_s)
    row = report.add(Row("baseline", "ZeroMQ PUSH/PULL, 100 B x 256 a frame", "msg/s", values, vs_baseline=True,
                         note=f"{frames} frames a run, b''.join of 256 bodies a frame"))
    report.baseline_msg_s = row.median


def _zmq_sink(conn, frames: int, time_s_max: float) -> None:
    import zmq
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PULL)
    sock.setsockopt(zmq.LINGER, 0)
    port = sock.bind_to_random_port("tcp://127.0.0.1")
    conn.send(port)
    got = 0
    deadline = time.monotonic() + time_s_max + 30
    while got < frames and time.monotonic() < deadline:
        if sock.poll(1000):
            sock.recv(copy=False)
            got += 1
    conn.send(got)
    sock.close()
    ctx.term()


def zmq_baseline(frames: int, time_s_max: float) -> tuple[float, int]:
    import zmq
    mp = multiprocessing.get_context("spawn")
    parent, child = mp.Pipe()
    sink = mp.Process(target=_zmq_sink, args=(child, frames, time_s_max), daemon=True)
    sink.start()
    try:
        if not parent.poll(30):
            raise RuntimeError("ZeroMQ sink did not start")
        port = parent.recv()
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, 1000)
        sock.connect(f"tcp://127.0.0.1:{port}")
        bodies = [message_body(100) for _ in range(BATCH_SIZE)]
        sock.send(b"".join(bodies))  # connect before the clock
        t0 = time.perf_counter()
        deadline = time.monotonic() + time_s_max
        sent = 1
        while sent < frames and time.monotonic() < deadline:
            sock.send(b"".join(bodies), copy=False)
            sent += 1
        if not parent.poll(time_s_max + 30):
            raise RuntimeError("ZeroMQ sink did not finish")
        got = parent.recv()
        elapsed = time.perf_counter() - t0
        sock.close()
        ctx.term()
        return (got - 1) * BATCH_SIZE / elapsed, got
    finally:
        sink.join(5)
        if sink.is_alive():
            sink.terminate()


def scenario_produce(s: Settings, report: Report, tmp: str) -> None:
    """One producer process, ``producer_threads`` threads: batched and single, 100 B and 1 KiB, both flush modes."""
    singles = s.single_sends()
    for flush_mode, label in s.variants(FLUSH_MODES):
        with LocalCluster(os.path.join(tmp, f"produce-{label.split()[0]}"), flush_mode=flush_mode) as cluster:
            cfg = client_config(cluster.namesrv)
            for body_bytes, body_label in s.variants(((100, "100 B"), (1024, "1 KiB"))):
                for batch, kind in s.variants(((BATCH_SIZE, f"batched {BATCH_SIZE}"), (1, "single sync"))):
                    values = []
                    for run in range(s.runs):
                        topic = f"Produce{body_bytes}b{batch}r{run}"
                        create_topic(cfg, topic)
                        total = s.messages if batch > 1 else singles
                        sent, elapsed = run_producers(cfg, topic, total, body_bytes, batch, s.producer_threads,
                                                      s.measure_s_max)
                        values.append(sent / elapsed)
                    target = TARGETS["produce_batched"] if (batch > 1 and body_bytes == 100 and
                                                            flush_mode == ASYNC_FLUSH) else None
                    report.add(Row("produce", f"{kind}, {body_label}, {label}", "msg/s", values, target,
                                   vs_baseline=True,
                                   note=f"{s.producer_threads} producer threads, one process, "
                                        f"{total} messages a run"))


def scenario_consume(s: Settings, report: Report, tmp: str) -> None:
    """Drain a pre-filled topic of 100-B messages: PullConsumer (thread per queue), then a PushConsumer."""
    with LocalCluster(os.path.join(tmp, "consume")) as cluster:
        cfg = client_config(cluster.namesrv)
        pull_values, push_values = [], []
        for run in range(s.runs):
            topic = f"Consume{run}"
            create_topic(cfg, topic)
            sent, _ = run_producers(cfg, topic, s.messages, 100, BATCH_SIZE, s.producer_threads, s.measure_s_max)
            expected = sent + s.producer_threads  # + the warm-up sends
            read, elapsed = drain_pull(cfg, topic, expected, s.measure_s_max)
            if read != expected:
                raise RuntimeError(f"PullConsumer read {read} of {expected}")
            pull_values.append(read / elapsed)
            # A group new to a queue with history starts at its max offset: commit 0 first.
            group = f"BenchPushGroup{run}"
            with PullConsumer(group, config=cfg) as committer:
                for mq in committer.queues(topic):
                    committer.commit_offset(mq, 0)
            tally = Tally(expected)
            consumer = push_consumer(client_config(cluster.namesrv, pull_batch_count=PUSH_PULL_BATCH), group,
                                     topic, tally)
            t0 = time.perf_counter()
            consumer.start()
            try:
                tally.reached.wait(s.measure_s_max)
                elapsed = (tally.last_s or time.perf_counter()) - t0
            finally:
                consumer.shutdown()
            if tally.count < expected:
                raise RuntimeError(f"PushConsumer got {tally.count} of {expected} in {s.measure_s_max} s")
            push_values.append(tally.count / elapsed)
        report.add(Row("consume", "PullConsumer drain, 100 B", "msg/s", pull_values, TARGETS["consume"],
                       vs_baseline=True, note=f"{QUEUE_COUNT} queues, a thread each, {PULL_MAX_NUMS} a pull"))
        report.add(Row("consume", "PushConsumer drain, 100 B", "msg/s", push_values, TARGETS["consume"],
                       vs_baseline=True, note=f"pull batch {PUSH_PULL_BATCH}, 2 consume threads, from start()"))


def scenario_e2e(s: Settings, report: Report, tmp: str) -> None:
    """A producer process sends batches while a PushConsumer here consumes; counted when consumed."""
    with LocalCluster(os.path.join(tmp, "e2e")) as cluster:
        values = []
        for run in range(s.runs):
            topic = f"E2E{run}"
            cfg = client_config(cluster.namesrv, pull_batch_count=PUSH_PULL_BATCH)
            create_topic(cfg, topic)
            warmup = s.producer_threads
            tally = Tally(s.messages + warmup)
            consumer = push_consumer(cfg, f"BenchE2EGroup{run}", topic, tally)
            consumer.start()
            producer = None
            try:
                await_assigned(consumer, QUEUE_COUNT)
                producer = ProducerProcess(cluster.namesrv, topic, "batched", s.messages, 100,
                                           threads=s.producer_threads, time_s_max=s.measure_s_max).start()
                t0 = time.perf_counter()
                producer.go()
                result = producer.result()
                tally.retarget(result["sent"] + warmup)
                tally.reached.wait(s.measure_s_max)
                elapsed = tally.last_s - t0
            finally:
                if producer is not None:
                    producer.stop()
                consumer.shutdown()
            if tally.count < tally.target:
                raise RuntimeError(f"consumed {tally.count} of {tally.target}")
            values.append((tally.count - warmup) / elapsed)
        report.add(Row("e2e", "produce + consume at once, 100 B, batched", "msg/s", values, TARGETS["e2e"],
                       vs_baseline=True, note=f"producer process ({s.producer_threads} threads, batches of "
                                              f"{BATCH_SIZE}) + PushConsumer in the runner"))


def scenario_group_commit(s: Settings, report: Report, tmp: str) -> None:
    """Sync flush, batches of 256 x 100 B, one thread and ``producer_threads`` threads (group commit)."""
    with LocalCluster(os.path.join(tmp, "group-commit"), flush_mode=SYNC_FLUSH) as cluster:
        cfg = client_config(cluster.namesrv)
        for threads in sorted({1, s.producer_threads, 2 * s.producer_threads}):
            values = []
            for run in range(s.runs):
                topic = f"GroupCommit{threads}t{run}"
                create_topic(cfg, topic)
                sent, elapsed = run_producers(cfg, topic, s.messages, 100, BATCH_SIZE, threads, s.measure_s_max)
                values.append(sent / elapsed)
            report.add(Row("group_commit", f"sync flush, batched {BATCH_SIZE}, {threads} thread(s)", "msg/s",
                           values, TARGETS["group_commit"] if threads > 1 else None, vs_baseline=True,
                           note="one producer process"))
