"""``python -m perf``: end-to-end benchmarks on real clusters, with the issue's targets beside them.

Every scenario brings up its own ``LocalCluster`` (a supervisor process with NameServer,
broker, flush, reput and allocate workers, all on 127.0.0.1) in a temporary directory,
measures, and stops it. Each figure is the median of ``--runs`` runs (3; 1 with
``--quick``) with min and max. Results: a rich table on stdout and ``perf/results.json``
(``--json PATH`` to write elsewhere).

Scenarios (``--only a,b``):

| name | what | target |
| --- | --- | --- |
| baseline | bare ZeroMQ PUSH/PULL over tcp 127.0.0.1, 100-byte messages joined 256 to a frame | (scale) |
| produce | one producer process (``--producer-threads`` threads): batches of 256 and single sync sends, 100 B and 1 KiB, async and sync flush | batched >= 1,000,000 msg/s |
| consume | a pre-filled topic drained by a PullConsumer, then by a PushConsumer | >= 1,500,000 msg/s |
| e2e | produce (another process) and consume at once; a message counts when consumed | >= 700,000 msg/s |
| latency | single sync sends one at a time, p50/p99 | p50 <= 80 us, p99 <= 180 us |
| e2e_latency | producer paced at 10k msg/s (``--paced-seconds``), body carries the send time, consumer measures receive - send | (reported) |
| group_commit | sync flush, batched, 1 and several producer threads | >= 200,000 msg/s |
| ready | ``LocalCluster.start`` and ``cluster up --detach`` (CLI) until ready; ``down`` | <= 2 s |
| rss | total RSS of an idle cluster (supervisor + children), LocalCluster and CLI defaults | <= 300 MB |
| replication | batched produce (256 x 100 B) to a master with one slave: ASYNC_MASTER, then SYNC_MASTER (each send answered once the slave holds it) | sync >= 50 % of async |
| replication_flush | a master with one slave, {async, sync} replication x {async, sync} flush: batched (256 x 100 B, ``--producer-threads``) throughput and publish latency of a batch p50/p99, and single sync sends p50/p99 | sync + sync: >= 100,000 msg/s batched, batch p99 <= 2 ms |
| failover | master + 1 slave, ``failover=True``, sync flush + sync replication, single sends going on: the master SIGSTOPped until a new epoch, or its broker SIGKILLed, ``--faults`` times each (perf/failover.py); time to the first write accepted and to the first SEND_OK again; batched sync + sync with failover=False vs True | failover median <= 10 s, max <= 30 s |

``--compare`` (perf/compare.py) runs the first variant of produce, consume, e2e, latency and
e2e_latency and the same measures on Redis Streams and NATS JetStream (perf/peers).

Back-of-envelope (2 cores, CPython): the broker is one Python thread. A batch of 256
costs it ~1 us a message of Python (batch decode, a store object, msg ids) plus a
fixed ~100-200 us a request, and the producer spends ~3-5 us a message building
Message objects, properties and unique keys: so one producer process should land
around 100-250k msg/s batched, a fifth to a tenth of the 1M target, and the bare
ZeroMQ baseline (~5-10M msg/s) shows the transport is not the limit. Unbatched sync
sends are bound by the round trip (~150-250 us through two processes' poll loops and
the store): ~4-7k msg/s per thread. Consume is bound by client-side decoding
(~3-5 us a message: ``decode_at`` + ``MessageExt``): ~200-300k msg/s. Ready time is
dominated by interpreter starts and imports of six processes (~0.2-0.3 s each, two
cores): ~1-2 s. Idle RSS: six CPython processes at ~25-40 MB each plus mapped store
pages the broker touched (preheat of the first CommitLog segment counts in every
process that maps it).

Every loop here is bounded by a count and by a deadline; clusters are stopped in
``finally`` blocks (context managers); a detached CLI cluster is brought ``down``
(and its supervisor sent SIGTERM if that fails).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import asdict, dataclass, field

from cluster import Admin, Message, Producer, PullConsumer, PushConsumer
from cluster.config import ASYNC_FLUSH, ASYNC_MASTER, SYNC_FLUSH, SYNC_MASTER, ClientConfig
from cluster.procs.lifecycle import python_module_command
from cluster.testing import LocalCluster, wait_until

PERF_DIR = os.path.dirname(os.path.abspath(__file__))
RESULTS_PATH_DEFAULT = os.path.join(PERF_DIR, "results.json")
SCENARIOS = ("baseline", "produce", "consume", "e2e", "latency", "e2e_latency", "group_commit", "ready", "rss",
             "replication", "replication_flush", "failover")

BATCH_SIZE = 256
QUEUE_COUNT = 4
PRODUCER_THREADS_DEFAULT = 4
PULL_MAX_NUMS = 1024
PUSH_PULL_BATCH = 256
PACED_RATE_MSG_S = 10_000
FLUSH_MODES = ((ASYNC_FLUSH, "async flush"), (SYNC_FLUSH, "sync flush"))
# Bounds: no measurement runs longer than this, whatever the message count.
MEASURE_S_MAX = 60.0
MEASURE_S_MAX_QUICK = 15.0

TARGETS = {
    "produce_batched": (">=", 1_000_000),
    "consume": (">=", 1_500_000),
    "e2e": (">=", 700_000),
    "latency_p50": ("<=", 80),
    "latency_p99": ("<=", 180),
    "group_commit": (">=", 200_000),
    "ready": ("<=", 2.0),
    "rss": ("<=", 300),
    "replication_sync_share": (">=", 50),
    "replication_sync_sync": (">=", 100_000),
    "replication_sync_sync_p99": ("<=", 2000),
}


# ---------------------------------------------------------------- results

@dataclass
class Row:
    scenario: str
    measure: str
    unit: str
    values: list[float]
    target: tuple[str, float] | None = None
    vs_baseline: bool = False
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def met(self) -> bool | None:
        if self.target is None or self.median is None:
            return None
        op, value = self.target
        return self.median >= value if op == ">=" else self.median <= value


class Report:
    def __init__(self):
        self.rows: list[Row] = []
        self.errors: list[dict] = []
        self.baseline_msg_s: float | None = None

    def add(self, row: Row) -> Row:
        self.rows.append(row)
        return row


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "msg/s":
        return f"{value:,.0f}"
    if unit == "us":
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.2f}"
    if unit == "MB":
        return f"{value:,.0f}"
    return f"{value:,.3g}"


def print_table(report: Report, title: str) -> None:
    from rich.console import Console
    from rich.table import Table
    table = Table(title=title)
    for name, justify in (("scenario", "left"), ("measure", "left"), ("median", "right"), ("min", "right"),
                          ("max", "right"), ("unit", "left"), ("target", "right"), ("met", "center"),
                          ("x baseline", "right")):
        table.add_column(name, justify=justify)
    for row in report.rows:
        met = row.met()
        ratio = ""
        if row.vs_baseline and report.baseline_msg_s and row.median:
            ratio = f"{row.median / report.baseline_msg_s:.3f}"
        table.add_row(row.scenario, row.measure, _fmt(row.median, row.unit),
                      _fmt(min(row.values) if row.values else None, row.unit),
                      _fmt(max(row.values) if row.values else None, row.unit), row.unit,
                      f"{row.target[0]} {_fmt(row.target[1], row.unit)}" if row.target else "",
                      "" if met is None else ("[green]met[/green]" if met else "[red]not met[/red]"), ratio)
    Console(width=160).print(table)
    for error in report.errors:
        Console(width=160).print(f"[red]scenario {error['scenario']} failed:[/red] {error['error']}")


def markdown_table(report: Report) -> str:
    lines = ["| scenario | measure | median | min | max | unit | target | met | x baseline |",
             "| --- | --- | ---: | ---: | ---: | --- | ---: | :---: | ---: |"]
    for row in report.rows:
        met = row.met()
        ratio = ""
        if row.vs_baseline and report.baseline_msg_s and row.median:
            ratio = f"{row.median / report.baseline_msg_s:.3f}"
        target = f"{row.target[0]} {_fmt(row.target[1], row.unit)}" if row.target else ""
        lines.append(f"| {row.scenario} | {row.measure} | {_fmt(row.median, row.unit)} | "
                     f"{_fmt(min(row.values) if row.values else None, row.unit)} | "
                     f"{_fmt(max(row.values) if row.values else None, row.unit)} | {row.unit} | {target} | "
                     f"{'' if met is None else ('met' if met else 'NOT met')} | {ratio} |")
    return "\n".join(lines)


def machine_info() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import psutil
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu_model": model,
            "cpu_count": os.cpu_count(), "memory_total_mb": psutil.virtual_memory().total // 2**20,
            "loadavg_at_start": os.getloadavg()}


def command_line(argv=None) -> str:
    return ("python -m perf " + " ".join(argv if argv is not None else sys.argv[1:])).strip()


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=PERF_DIR, capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


# ---------------------------------------------------------------- helpers

def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def client_config(namesrv: str, **changes) -> ClientConfig:
    base = dict(namesrv_endpoints=tuple(f"tcp://{a}" for a in namesrv.split(";")), request_timeout_ms=10_000,
                rebalance_interval_ms=1000, client_heartbeat_interval_ms=5000,
                consumer_offset_commit_interval_ms=1000, pull_suspend_ms=1000)
    base.update(changes)
    return ClientConfig(**base)


def create_topic(cfg: ClientConfig, topic: str, queues: int = QUEUE_COUNT) -> None:
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, queues)


class Settings:
    def __init__(self, args):
        self.quick = args.quick
        self.runs = args.runs if args.runs else (1 if args.quick else 3)
        self.messages = args.messages if args.messages else (20_000 if args.quick else 200_000)
        self.producer_threads = args.producer_threads
        self.measure_s_max = MEASURE_S_MAX_QUICK if args.quick else MEASURE_S_MAX
        self.tmp_root = args.tmp_root
        self.paced_s = args.paced_seconds if args.paced_seconds else (3.0 if args.quick else 10.0)
        # Comparison with the peers (perf/compare.py): each scenario measures only its first variant.
        self.compare = bool(getattr(args, "compare", False))
        self.faults = getattr(args, "faults", 0)
        self.keep_logs = getattr(args, "keep_logs", None)
        self.back_to_back = getattr(args, "back_to_back", False)

    def single_sends(self) -> int:
        return max(500, min(20_000, self.messages // 10))

    def latency_sends(self) -> int:
        return max(500, min(10_000, self.messages // 20))

    def variants(self, options: tuple) -> tuple:
        """All of a scenario's variants, or in compare mode only the first (the one peers are measured on)."""
        return options[:1] if self.compare else options


def _body(size: int) -> bytes:
    return (b"RocketBox-" * (size // 10 + 1))[:size]


def _split(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def run_producers(cfg: ClientConfig, topic: str, total: int, body_bytes: int, batch: int, threads: int,
                  time_s_max: float, latencies: list | None = None,
                  statuses: dict | None = None) -> tuple[int, float]:
    """``threads`` Producer objects in this process send ``total`` messages; (sent, seconds).

    ``batch`` > 1: ``send_batch`` of that many; 1: ``send`` one at a time. Each thread
    warms up (route lookup, connection) before the clock starts and stops at the deadline.
    ``latencies``: gets each send's (a whole batch's) duration in us; ``statuses``: a count
    of the answers by SendStatus name.
    """
    body = _body(body_bytes)
    shares = _split(total, threads)
    producers = [Producer(f"BenchProducer{i}", config=cfg) for i in range(threads)]
    sent = [0] * threads
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads + 1)
    deadline = [0.0]
    merge_lock = threading.Lock()

    def work(i: int) -> None:
        producer = producers[i]
        try:
            producer.send(Message(topic, body))  # warm-up: route and connection
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        barrier.wait(timeout=60)
        n = 0
        took, answers = [], {}
        try:
            while n < shares[i] and time.monotonic() < deadline[0]:
                if batch > 1:
                    k = min(batch, shares[i] - n)
                    messages = [Message(topic, body) for _ in range(k)]
                    t0 = time.perf_counter()
                    result = producer.send_batch(messages)
                else:
                    k = 1
                    message = Message(topic, body)
                    t0 = time.perf_counter()
                    result = producer.send(message)
                if latencies is not None:
                    took.append((time.perf_counter() - t0) * 1e6)
                if statuses is not None:
                    answers[result.status.name] = answers.get(result.status.name, 0) + 1
                n += k
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        sent[i] = n
        with merge_lock:
            if latencies is not None:
                latencies.extend(took)
            if statuses is not None:
                for name, count in answers.items():
                    statuses[name] = statuses.get(name, 0) + count

    workers = [threading.Thread(target=work, args=(i,), name=f"bench-producer-{i}", daemon=True)
               for i in range(threads)]
    try:
        for w in workers:
            w.start()
        deadline[0] = time.monotonic() + 60 + time_s_max
        barrier.wait(timeout=60)
        t0 = time.perf_counter()
        deadline[0] = time.monotonic() + time_s_max
        for w in workers:
            w.join(timeout=time_s_max + 30)
        elapsed = time.perf_counter() - t0
    finally:
        for p in producers:
            p.shutdown()
    if errors:
        raise RuntimeError(f"producer failed: {errors[0]!r}") from errors[0]
    return sum(sent), elapsed


# ---------------------------------------------------------------- subprocess producer

def serve_parent(conn, run) -> None:
    """Child side of ``ChildProcess``: "ready" (warmed up), wait for "go", send ``run()``'s result dict."""
    conn.send("ready")
    if conn.recv() == "go":
        conn.send(run())


def _producer_process(conn, namesrv: str, topic: str, mode: str, total: int, body_bytes: int, threads: int,
                      rate: int, time_s_max: float) -> None:
    """A producer in its own process (spawned): ``batched`` or ``paced`` (stamped bodies)."""
    try:
        cfg = client_config(namesrv)
        if mode == "batched":
            # Warm-up happens inside run_producers, before its clock; "go" gates it.
            def batched() -> dict:
                sent, elapsed = run_producers(cfg, topic, total, body_bytes, BATCH_SIZE, threads, time_s_max)
                return {"sent": sent, "elapsed_s": elapsed, "warmup": threads}
            serve_parent(conn, batched)
            return
        producer = Producer("BenchPacedProducer", config=cfg)
        try:
            producer.send(Message(topic, _stamped(-1, body_bytes)))
            serve_parent(conn, lambda: _paced(producer, topic, mode, total, body_bytes, rate, time_s_max))
        finally:
            producer.shutdown()
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


STAMP = struct.Struct(">qq")  # sequence number, send time (time.time_ns)


def _stamped(seq: int, body_bytes: int) -> bytes:
    head = STAMP.pack(seq, time.time_ns())
    return head + b"x" * max(0, body_bytes - len(head))


class Pacer:
    """When the messages of a producer paced at ``rate`` msg/s fall due; ``total`` at most, within ``time_s_max``.

    A message is stamped when it is due (or when the producer gets to it, if late). Shared by
    our paced producer and the peers' (perf/peers), threads and asyncio alike: the caller sleeps
    ``wait_s()`` when nothing is due.
    """

    def __init__(self, total: int, rate: int, time_s_max: float):
        self.total = total
        self.rate = rate
        self.sent = 0
        self.t0 = time.perf_counter()
        self.deadline = self.t0 + time_s_max

    def done(self) -> bool:
        return self.sent >= self.total or time.perf_counter() >= self.deadline

    def due(self) -> int:
        """Messages due now and not sent yet."""
        return max(0, min(self.total, int((time.perf_counter() - self.t0) * self.rate) + 1) - self.sent)

    def wait_s(self) -> float:
        """Until the next message is due, at most 0.5 ms."""
        return max(0.0, min(0.0005, (self.sent + 1) / self.rate - (time.perf_counter() - self.t0)))

    def take(self, limit: int, body_bytes: int) -> list[bytes]:
        """Stamped bodies of the messages due now, ``limit`` at most; counted as sent."""
        n = min(self.due(), limit)
        bodies = [_stamped(self.sent + i, body_bytes) for i in range(n)]
        self.sent += n
        return bodies

    def elapsed_s(self) -> float:
        return time.perf_counter() - self.t0


def _paced(producer: Producer, topic: str, mode: str, total: int, body_bytes: int, rate: int,
           time_s_max: float) -> dict:
    """Send ``total`` messages at ``rate``: ``paced_async`` (send_async each) or ``paced_batch`` (one batch a tick).

    A message is stamped when it is due (or when the producer gets to it, if late).
    """
    lock = threading.Lock()
    state = {"inflight": 0, "failed": 0}
    inflight_max = max(1000, rate // 5)

    def done(result, error):
        with lock:
            state["inflight"] -= 1
            if error is not None:
                state["failed"] += 1

    pacer = Pacer(total, rate, time_s_max)
    while not pacer.done():
        due = pacer.due()
        if not due:
            time.sleep(pacer.wait_s())
            continue
        if mode == "paced_batch":
            producer.send_batch([Message(topic, body) for body in pacer.take(BATCH_SIZE, body_bytes)])
            continue
        for _ in range(due):
            if state["inflight"] >= inflight_max:
                time.sleep(0.0002)
                break
            with lock:
                state["inflight"] += 1
            producer.send_async(Message(topic, _stamped(pacer.sent, body_bytes)), callback=done)
            pacer.sent += 1
    elapsed = pacer.elapsed_s()
    settle = time.monotonic() + 10
    while state["inflight"] > 0 and time.monotonic() < settle:
        time.sleep(0.01)
    return {"sent": pacer.sent, "elapsed_s": elapsed, "failed": state["failed"]}


class ChildProcess:
    """A spawned process running ``target(conn, *args)``, which speaks ``serve_parent``'s protocol.

    ``start`` waits for its warm-up ("ready"), ``go`` starts the clock, ``result`` is its dict.
    """

    def __init__(self, target, args: tuple, name: str, time_s_max: float):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child_conn = ctx.Pipe()
        self.time_s_max = time_s_max
        self.process = ctx.Process(target=target, name=name, daemon=True, args=(child_conn, *args))

    def start(self):
        self.process.start()
        if not self.conn.poll(60):
            raise RuntimeError(f"{self.process.name} did not get ready within 60 s")
        message = self.conn.recv()
        if message != "ready":
            raise RuntimeError(f"{self.process.name} failed to start: {message}")
        return self

    @property
    def pid(self) -> int:
        return self.process.pid

    def go(self) -> None:
        self.conn.send("go")

    def result(self) -> dict:
        if not self.conn.poll(self.time_s_max + 60):
            raise RuntimeError(f"{self.process.name} sent no result")
        result = self.conn.recv()
        if "error" in result:
            raise RuntimeError(f"{self.process.name} failed: {result['error']}")
        return result

    def stop(self) -> None:
        if self.process.is_alive():
            try:
                self.conn.send("stop")
            except OSError:
                pass
            self.process.join(5)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5)


class ProducerProcess(ChildProcess):
    """Our producer in a spawned process: ``batched`` (``threads`` threads) or paced (stamped bodies)."""

    def __init__(self, namesrv: str, topic: str, mode: str, total: int, body_bytes: int, threads: int = 1,
                 rate: int = 0, time_s_max: float = 30.0):
        super().__init__(_producer_process, (namesrv, topic, mode, total, body_bytes, threads, rate, time_s_max),
                         f"bench-producer-{mode}", time_s_max)


# ---------------------------------------------------------------- consumers

class Tally:
    """What a consumer saw: a count, and receive - send latencies of stamped bodies (ours and the peers')."""

    def __init__(self, target: int, stamped: bool = False):
        self.target = target
        self.stamped = stamped
        self.count = 0
        self.latencies_us: list[float] = []
        self.last_s = 0.0
        self.lock = threading.Lock()
        self.reached = threading.Event()

    def listener(self, messages) -> None:
        """A PushConsumer's listener."""
        self.add(len(messages), [m.body for m in messages] if self.stamped else ())

    def add(self, count: int, bodies=()) -> None:
        """``count`` messages received now; ``bodies`` are read for their stamps when ``stamped``."""
        now_ns = time.time_ns()
        lat = []
        if self.stamped:
            for body in bodies:
                seq, sent_ns = STAMP.unpack_from(body, 0)
                if seq >= 0:
                    lat.append((seq, (now_ns - sent_ns) / 1000))
        with self.lock:
            self.count += count
            self.latencies_us.extend(lat)
            self.last_s = time.perf_counter()
            if self.count >= self.target:
                self.reached.set()

    def retarget(self, target: int) -> None:
        """The producer says how many it sent: that is the count to reach."""
        with self.lock:
            self.target = target
            if self.count >= target:
                self.reached.set()

    def steady_latencies(self, total: int) -> list[float]:
        """receive - send (us) of the messages after the first 5% of ``total`` (warm-up)."""
        with self.lock:
            return [us for seq, us in self.latencies_us if seq >= total // 20]


def push_consumer(cfg: ClientConfig, group: str, topic: str, tally: Tally) -> PushConsumer:
    consumer = PushConsumer(group, config=cfg, consume_threads=2, consume_batch_max=PUSH_PULL_BATCH,
                            cached_messages_max=4 * PUSH_PULL_BATCH)
    consumer.subscribe(topic)
    consumer.register_listener(tally.listener)
    return consumer


def await_assigned(consumer: PushConsumer, queues: int, timeout_s: float = 30.0) -> None:
    wait_until(lambda: len(consumer.assigned_queues()) >= queues, timeout_s, what="queues assigned")


def drain_pull(cfg: ClientConfig, topic: str, expected: int, time_s_max: float) -> tuple[int, float]:
    """A PullConsumer reads every queue of ``topic`` from offset 0 until ``expected``; (read, seconds).

    One thread per queue in this one process, ``PULL_MAX_NUMS`` a pull.
    """
    consumer = PullConsumer("BenchPullGroup", config=cfg)
    try:
        queues = consumer.queues(topic)
        # Pre-filled means dispatched: wait (untimed) until the reput worker has indexed everything.
        wait_until(lambda: sum(consumer.max_offset(mq) for mq in queues) >= expected, 60,
                   interval_s=0.05, what=f"{expected} messages dispatched")
        ends = [consumer.max_offset(mq) for mq in queues]
        counts = [0] * len(queues)
        stop_at = time.monotonic() + time_s_max

        def work(i: int) -> None:
            offset = 0
            while offset < ends[i] and time.monotonic() < stop_at:
                result = consumer.pull(queues[i], offset, PULL_MAX_NUMS)
                offset = result.next_begin_offset
                counts[i] += len(result.messages)

        threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(queues))]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join(time_s_max + 30)
        return sum(counts), time.perf_counter() - t0
    finally:
        consumer.shutdown()


# ---------------------------------------------------------------- scenarios

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
        bodies = [_body(100) for _ in range(BATCH_SIZE)]
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


def scenario_latency(s: Settings, report: Report, tmp: str) -> None:
    """Single 100-B sync sends, one at a time, from one thread; async flush (targets) and sync flush."""
    count = s.latency_sends()
    for flush_mode, label in s.variants(FLUSH_MODES):
        with LocalCluster(os.path.join(tmp, f"latency-{label.split()[0]}"), flush_mode=flush_mode) as cluster:
            cfg = client_config(cluster.namesrv)
            p50s, p99s, p999s = [], [], []
            for run in range(s.runs):
                topic = f"Latency{run}"
                create_topic(cfg, topic)
                body = _body(100)
                with Producer("BenchLatencyProducer", config=cfg) as producer:
                    for _ in range(200):
                        producer.send(Message(topic, body))
                    lat = []
                    deadline = time.monotonic() + s.measure_s_max
                    for _ in range(count):
                        if time.monotonic() >= deadline:
                            break
                        t0 = time.perf_counter()
                        producer.send(Message(topic, body))
                        lat.append((time.perf_counter() - t0) * 1e6)
                p50s.append(percentile(lat, 0.50))
                p99s.append(percentile(lat, 0.99))
                p999s.append(percentile(lat, 0.999))
            async_ = flush_mode == ASYNC_FLUSH
            note = f"{count} sends a run after 200 warm-up"
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
        for mode, label in s.variants((("paced_batch", "batch per due tick"), ("paced_async", "send_async each"))):
            stats = {"p50": [], "p99": [], "p999": [], "rate": []}
            for run in range(s.runs):
                topic = f"Paced{mode}{run}"
                cfg = client_config(cluster.namesrv)
                create_topic(cfg, topic)
                tally = Tally(total + 1, stamped=True)
                consumer = push_consumer(cfg, f"BenchPacedGroup{mode}{run}", topic, tally)
                consumer.start()
                producer = None
                try:
                    await_assigned(consumer, QUEUE_COUNT)
                    producer = ProducerProcess(cluster.namesrv, topic, mode, total, 100, rate=PACED_RATE_MSG_S,
                                               time_s_max=duration_s * 3).start()
                    producer.go()
                    result = producer.result()
                    tally.retarget(result["sent"] - result.get("failed", 0) + 1)
                    tally.reached.wait(30)
                finally:
                    if producer is not None:
                        producer.stop()
                    consumer.shutdown()
                lat = tally.steady_latencies(total)
                stats["p50"].append(percentile(lat, 0.5))
                stats["p99"].append(percentile(lat, 0.99))
                stats["p999"].append(percentile(lat, 0.999))
                stats["rate"].append(result["sent"] / result["elapsed_s"])
            note = f"target rate {PACED_RATE_MSG_S:,} msg/s for {duration_s:.0f} s; first 5% skipped"
            report.add(Row("e2e_latency", f"rate achieved, {label}", "msg/s", stats["rate"],
                           (">=", PACED_RATE_MSG_S * 0.99), note=note + "; met within 1%"))
            for key, name in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")):
                report.add(Row("e2e_latency", f"receive - send {name}, {label}", "us", stats[key], note=note))


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


def scenario_ready(s: Settings, report: Report, tmp: str) -> None:
    """``LocalCluster.start`` until ready; ``cluster up --detach`` (CLI, production store sizes); ``down``."""
    local, cli_up, cli_down = [], [], []
    for run in range(s.runs):
        cluster = LocalCluster(os.path.join(tmp, f"ready-{run}"))
        t0 = time.perf_counter()
        try:
            cluster.start()
            local.append(time.perf_counter() - t0)
        finally:
            cluster.stop()
        up_s, down_s, _ = cli_cluster(os.path.join(tmp, f"ready-cli-{run}"), idle_s=0)
        cli_up.append(up_s)
        cli_down.append(down_s)
    report.add(Row("ready", "LocalCluster.start until ready", "s", local, TARGETS["ready"],
                   note="test store sizes (16 MiB CommitLog segments)"))
    report.add(Row("ready", "cluster up --detach (CLI) until it returns", "s", cli_up, TARGETS["ready"],
                   note="wall time of the command, interpreter start included; default store sizes"))
    report.add(Row("ready", "cluster down (CLI)", "s", cli_down))


def cli_cluster(data_dir: str, idle_s: float) -> tuple[float, float, dict | None]:
    """``cluster up --detach``, optionally measure idle memory after ``idle_s``, then ``down``."""
    from cluster.topology import free_ports
    namesrv_port, broker_port = free_ports(2)
    base = python_module_command("cluster.cli", "--data-dir", data_dir)
    t0 = time.perf_counter()
    up = subprocess.run(base + ["up", "--detach", "--namesrv-port", str(namesrv_port), "--broker-port",
                                str(broker_port), "--ready-timeout-s", "60"],
                        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    up_s = time.perf_counter() - t0
    memory = None
    try:
        if up.returncode != 0:
            raise RuntimeError(f"cluster up failed ({up.returncode}): {up.stdout[-2000:]} {up.stderr[-2000:]}")
        if idle_s:
            time.sleep(idle_s)
            from cluster.procs.supervisor import read_state_file
            memory = cluster_memory((read_state_file(data_dir) or {}).get("supervisor_pid"))
    finally:
        t1 = time.perf_counter()
        down = subprocess.run(base + ["down"], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        down_s = time.perf_counter() - t1
        if down.returncode != 0:
            _terminate_detached(data_dir)
    return up_s, down_s, memory


def _terminate_detached(data_dir: str) -> None:
    import signal
    from cluster.procs.supervisor import read_state_file
    pid = (read_state_file(data_dir) or {}).get("supervisor_pid")
    if pid:
        try:
            os.kill(int(pid), signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass


def cluster_memory(supervisor_pid: int | None) -> dict:
    """RSS and PSS (MB) of the supervisor and all its descendants, and per process."""
    import psutil
    if not supervisor_pid:
        raise RuntimeError("no supervisor pid")
    root = psutil.Process(int(supervisor_pid))
    procs = [root] + root.children(recursive=True)
    per = {}
    rss = pss = 0
    for p in procs:
        try:
            info = p.memory_full_info()
            cmd = " ".join(p.cmdline()[1:4])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        rss += info.rss
        pss += getattr(info, "pss", 0)
        per[f"{p.pid} {cmd}"] = round(info.rss / 2**20, 1)
    return {"rss_mb": rss / 2**20, "pss_mb": pss / 2**20, "processes": len(per), "per_process_rss_mb": per}


def scenario_rss(s: Settings, report: Report, tmp: str) -> None:
    """Idle memory: a LocalCluster (test store sizes), and a CLI cluster (default sizes), after a few idle seconds."""
    idle_s = 2.0 if s.quick else 5.0
    local_rss, local_pss, cli_rss, cli_pss = [], [], [], []
    extra = {}
    for run in range(s.runs):
        with LocalCluster(os.path.join(tmp, f"rss-{run}")) as cluster:
            time.sleep(idle_s)
            mem = cluster_memory(cluster.process.pid)
        local_rss.append(mem["rss_mb"])
        local_pss.append(mem["pss_mb"])
        extra["local_last"] = mem
        _, _, mem = cli_cluster(os.path.join(tmp, f"rss-cli-{run}"), idle_s=idle_s)
        cli_rss.append(mem["rss_mb"])
        cli_pss.append(mem["pss_mb"])
        extra["cli_last"] = mem
    note = f"{idle_s:.0f} s idle; RSS counts shared mapped store pages once per process"
    report.add(Row("rss", "idle RSS, LocalCluster (16 MiB segments)", "MB", local_rss, TARGETS["rss"], note=note,
                   extra=extra.get("local_last", {})))
    report.add(Row("rss", "idle PSS, LocalCluster", "MB", local_pss, note="proportional: shared pages split"))
    report.add(Row("rss", "idle RSS, cluster up (default sizes)", "MB", cli_rss, TARGETS["rss"], note=note,
                   extra=extra.get("cli_last", {})))
    report.add(Row("rss", "idle PSS, cluster up (default sizes)", "MB", cli_pss))


def scenario_replication(s: Settings, report: Report, tmp: str) -> None:
    """Batched produce to a master with one slave, async then sync replication (issue 5: the sync wait
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
    sends one at a time from one thread. Issue 5's goal: sync + sync >= 100k msg/s batched, p99 < 2 ms.
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


def scenario_failover(s: Settings, report: Report, tmp: str) -> None:
    from perf.failover import scenario_failover as run   # it imports this module
    run(s, report, tmp)


RUNNERS = {
    "baseline": scenario_baseline, "produce": scenario_produce, "consume": scenario_consume, "e2e": scenario_e2e,
    "latency": scenario_latency, "e2e_latency": scenario_e2e_latency, "group_commit": scenario_group_commit,
    "ready": scenario_ready, "rss": scenario_rss, "replication": scenario_replication,
    "replication_flush": scenario_replication_flush, "failover": scenario_failover,
}
assert tuple(RUNNERS) == SCENARIOS


# ---------------------------------------------------------------- main

def parse_args(argv=None):
    parser = argparse.ArgumentParser(prog="python -m perf", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run each, fewer messages (~2-3 minutes)")
    parser.add_argument("--only", help=f"comma-separated scenarios of: {', '.join(SCENARIOS)}")
    parser.add_argument("--json", default=None,
                        help="where to write results (default perf/results.json; with --compare perf/compare.json)")
    parser.add_argument("--messages", type=int, default=0, help="messages a batched run (200,000; quick 20,000)")
    parser.add_argument("--runs", type=int, default=0, help="runs a figure (3; quick 1)")
    parser.add_argument("--producer-threads", type=int, default=PRODUCER_THREADS_DEFAULT,
                        help="threads of the one producer process (default %(default)s)")
    parser.add_argument("--tmp-root", default=None, help="parent of the temporary cluster directories")
    parser.add_argument("--paced-seconds", type=float, default=0,
                        help="length of a run paced at 10k msg/s (10; quick 3)")
    parser.add_argument("--faults", type=int, default=0,
                        help="failover: master faults of each kind (7, back to back 15; quick 3), within ~3 minutes")
    parser.add_argument("--back-to-back", action="store_true",
                        help="failover: the next fault as soon as the group is healthy, not once every replica has "
                             "run past the supervisor's restart back-off reset (10 s)")
    parser.add_argument("--keep-logs", default=None,
                        help="failover: copy the cluster's logs/ into this directory before it is removed")
    parser.add_argument("--compare", action="store_true",
                        help="RocketBox against Redis Streams and NATS JetStream (perf/compare.py; `make peers`)")
    parser.add_argument("--peers", default=None,
                        help="with --compare (implies it): comma-separated peers of redis_streams, nats_jetstream, "
                             "or none (default: all)")
    parser.add_argument("--plot", default=None, help="with --compare: the plot (default perf/compare.png)")
    args = parser.parse_args(argv)
    args.compare = args.compare or args.peers is not None
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.compare:
        from perf.compare import run_compare
        return run_compare(args, argv)
    args.json = args.json or RESULTS_PATH_DEFAULT
    names = list(SCENARIOS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in RUNNERS]
        if unknown:
            print(f"unknown scenario(s) {unknown}; choose from {', '.join(SCENARIOS)}", file=sys.stderr)
            return 2
    settings = Settings(args)
    report = Report()
    started = time.time()
    info = machine_info()
    timings = {}
    with tempfile.TemporaryDirectory(prefix="rocketbox-perf-", dir=args.tmp_root) as tmp:
        if "baseline" not in names and any(n in names for n in ("produce", "consume", "e2e", "group_commit")):
            names.insert(0, "baseline")  # ratios need it; it takes a second
        for name in names:
            t0 = time.monotonic()
            print(f"[perf] {name} ...", flush=True)
            try:
                RUNNERS[name](settings, report, tmp)
            except Exception as exc:  # noqa: BLE001 - report and go on to the next scenario
                traceback.print_exc()
                report.errors.append({"scenario": name, "error": f"{type(exc).__name__}: {exc}"})
            timings[name] = round(time.monotonic() - t0, 1)
            print(f"[perf] {name} done in {timings[name]} s", flush=True)
    info["loadavg_at_end"] = os.getloadavg()
    command = command_line(argv)
    title = (f"RocketBox perf ({'quick' if settings.quick else 'full'}, {settings.runs} run(s), "
             f"{settings.messages:,} messages, {info['cpu_count']} cores)")
    print_table(report, title)
    out = {
        "command": command, "git_commit": git_commit(), "started_at": time.strftime(
            "%Y-%m-%dT%H:%M:%S%z", time.localtime(started)), "duration_s": round(time.time() - started, 1),
        "machine": info, "settings": {"quick": settings.quick, "runs": settings.runs, "messages": settings.messages,
                                      "producer_threads": settings.producer_threads, "batch": BATCH_SIZE,
                                      "queues": QUEUE_COUNT},
        "scenario_seconds": timings, "baseline_msg_s": report.baseline_msg_s,
        "rows": [{**asdict(r), "median": r.median, "met": r.met()} for r in report.rows],
        "errors": report.errors, "markdown": markdown_table(report),
    }
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2, default=str)
    print(f"[perf] wrote {args.json} ({out['duration_s']} s)")
    return 1 if report.errors else 0
