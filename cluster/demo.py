"""``make run``: bring a cluster up, run a short load through the client library, report, stop.

Sends ``--messages`` messages (batched, and a sample of single sync sends for
latency) over ``--keys`` keys, consumes them with a push-consumer group of two, and
checks that every acknowledged message arrived with its body intact and each key's
messages in order within its queue. Prints throughput and latency and exits
non-zero when anything acknowledged was lost.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import zlib

from cluster import Admin, Message, Producer, PushConsumer
from cluster.config import ASYNC_FLUSH, SYNC_FLUSH, ClientConfig
from cluster.testing import LocalCluster, wait_until


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run(messages: int, keys: int, batch: int, flush_mode: str, data_dir: str) -> int:
    from rich.console import Console
    from rich.table import Table
    console = Console()
    started = time.monotonic()
    with LocalCluster(data_dir, flush_mode=flush_mode) as cluster:
        ready_s = time.monotonic() - started
        console.print(f"cluster up in {ready_s:.2f} s: NameServer {cluster.namesrv}, flush {flush_mode}")
        client_cfg = ClientConfig(namesrv_endpoints=(f"tcp://{cluster.namesrv}",), rebalance_interval_ms=1000)
        with Admin(config=client_cfg) as admin:
            admin.create_topic("DemoTopic", 4)
        received: dict[str, tuple[int, int, int]] = {}
        lock = threading.Lock()

        def on_messages(batch_messages):
            with lock:
                for m in batch_messages:
                    received[m.msg_id] = (m.queue_id, m.queue_offset, zlib.crc32(m.body))

        consumers = []
        for _ in range(2):
            consumer = PushConsumer("DemoGroup", config=client_cfg)
            consumer.subscribe("DemoTopic")
            consumer.register_listener(on_messages)
            consumer.start()
            consumers.append(consumer)
        sent: dict[str, int] = {}
        latencies_us: list[float] = []
        with Producer("DemoProducer", config=client_cfg) as producer:
            sample = min(1000, messages // 10)
            for i in range(sample):
                body = f"key-{i % keys}:{i}".encode()
                t0 = time.perf_counter()
                result = producer.send(Message("DemoTopic", body, tags="demo", keys=f"key-{i % keys}"))
                latencies_us.append((time.perf_counter() - t0) * 1e6)
                sent[result.msg_id] = zlib.crc32(body)
            # Built before the clock starts, checked after it stops: the figures measure the
            # cluster and the client library, not this demo's own bookkeeping.
            chunks = [[Message("DemoTopic", f"key-{i % keys}:{i}".encode(), tags="demo")
                       for i in range(start, min(messages, start + batch))]
                      for start in range(sample, messages, batch)]
            t0 = time.perf_counter()
            for chunk in chunks:
                producer.send_batch(chunk)
            produce_s = time.perf_counter() - t0
            for chunk in chunks:
                for m in chunk:
                    sent[m.properties["UNIQ_KEY"]] = zlib.crc32(m.body)
        batched = messages - sample
        try:
            wait_until(lambda: len(received) >= len(sent), 60, what="every message consumed")
        except TimeoutError:
            pass
        consume_s = time.perf_counter() - t0
        for consumer in consumers:
            consumer.shutdown()
    lost = [m for m in sent if m not in received]
    corrupt = [m for m in sent if m in received and received[m][2] != sent[m]]
    table = Table(title="RocketBox demo")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("cluster ready", f"{ready_s:.2f} s")
    table.add_row("sync sends (latency sample)", f"{len(latencies_us)}")
    table.add_row("sync send p50 / p99", f"{statistics.median(latencies_us):.0f} / "
                                         f"{_percentile(latencies_us, 0.99):.0f} µs")
    table.add_row(f"batched produce ({batch}/batch, one thread)*", f"{batched / produce_s:,.0f} msg/s")
    table.add_row("produce + consume end to end*", f"{len(received) / consume_s:,.0f} msg/s")
    table.add_row("acknowledged", f"{len(sent):,}")
    table.add_row("received", f"{len(received):,}")
    table.add_row("lost (acknowledged, never received)", f"{len(lost)}")
    table.add_row("body checksum mismatches", f"{len(corrupt)}")
    console.print(table)
    console.print("* the producer and both consumers share this one Python process (and its GIL); "
                  "benchmark figures, each client in its own process: make bench, perf/RESULTS.md")
    return 1 if lost or corrupt else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--flush-mode", choices=("async", "sync"), default="async")
    parser.add_argument("--data-dir")
    args = parser.parse_args(argv)
    mode = SYNC_FLUSH if args.flush_mode == "sync" else ASYNC_FLUSH
    if args.data_dir:
        return run(args.messages, args.keys, args.batch, mode, args.data_dir)
    with tempfile.TemporaryDirectory(prefix="rocketbox-demo-") as tmp:
        return run(args.messages, args.keys, args.batch, mode, tmp)


if __name__ == "__main__":
    raise SystemExit(main())
