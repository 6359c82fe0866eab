"""What every scenario measures with: settings, clusters' client configs, producer processes,
pacing, consumers that tally what arrived, and bounded drains."""

from __future__ import annotations

import multiprocessing
import struct
import threading
import time

from rocketbox.cluster import Admin, Message, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.config import ASYNC_FLUSH, ClientConfig, SYNC_FLUSH
from rocketbox.cluster.testing import wait_until


def turned(items: list, round_: int) -> list:
    """``items`` in the order of round ``round_`` of an interleaved A/B: turned by one each round, so
    that no variant always runs after the same one."""
    at = round_ % len(items) if items else 0
    return items[at:] + items[:at]


BATCH_SIZE = 256
QUEUE_COUNT = 4
PRODUCER_THREADS_DEFAULT = 4
PULL_MAX_NUMS = 1024
PUSH_PULL_BATCH = 256
PUSH_CONSUME_THREADS = 2
PACED_RATE_MSG_S = 10_000
FLUSH_MODES = ((ASYNC_FLUSH, "async flush"), (SYNC_FLUSH, "sync flush"))
# Bounds: no measurement runs longer than this, whatever the message count.
MEASURE_S_MAX = 60.0
MEASURE_S_MAX_QUICK = 15.0


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


def message_body(size: int) -> bytes:
    return (b"RocketBox-" * (size // 10 + 1))[:size]


def split_evenly(total: int, parts: int) -> list[int]:
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
    body = message_body(body_bytes)
    shares = split_evenly(total, threads)
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
                      rate: int, time_s_max: float, transport: str = "native") -> None:
    """A producer in its own process (spawned): ``batched`` or ``paced`` (stamped bodies), through
    the door ``transport`` names (``namesrv`` is that door's NameServer addresses)."""
    try:
        cfg = client_config(namesrv, transport=transport)
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
                 rate: int = 0, time_s_max: float = 30.0, transport: str = "native"):
        super().__init__(_producer_process, (namesrv, topic, mode, total, body_bytes, threads, rate, time_s_max,
                                             transport), f"bench-producer-{mode}", time_s_max)


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


def push_consumer(cfg: ClientConfig, group: str, topic: str, tally: Tally,
                  consume_threads: int = PUSH_CONSUME_THREADS) -> PushConsumer:
    consumer = PushConsumer(group, config=cfg, consume_threads=consume_threads, consume_batch_max=PUSH_PULL_BATCH,
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
