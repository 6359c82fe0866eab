"""The push side of the check: a consumer group whose members are separate processes.

Each member is a ``PushConsumer`` (clustering mode) that records every delivery
(schemas.READS) and every offset commit the broker accepted (schemas.COMMITS), and writes
them as Parquet when told to stop. They run while the load runs, so they see what a
real application sees: rebalances, redeliveries after broker restarts, stalls.

The driver stops them once the load is over and the group's committed offsets have
reached every queue's maximum (or at a deadline, which the report then shows as lost).
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
import zlib

from rocketbox.spark.schemas import COMMIT, COMMITS, QUEUE_START, READER_PUSH, READS, decode_body

MEMBER_READY_TIMEOUT_S = 60.0
MEMBER_STOP_TIMEOUT_S = 60.0


def _member(namesrv: tuple[str, ...], transport: str, topic: str, group: str, out_dir: str, index: int, ready,
            stop) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema

    from rocketbox.cluster import PushConsumer
    from rocketbox.cluster.client.routes import config_for

    cfg = config_for(namesrv, rebalance_interval_ms=2_000, consumer_offset_commit_interval_ms=1_000,
                     transport=transport)
    deliveries: list[tuple] = []
    commits: list[tuple] = []
    lock = threading.Lock()
    counter = iter(range(1 << 62))

    def on_commit(mq, offset):
        commits.append((consumer.client_id, mq.broker_name, mq.queue_id, offset, time.time_ns(), COMMIT))

    def on_queue_start(mq, offset):
        commits.append((consumer.client_id, mq.broker_name, mq.queue_id, offset, time.time_ns(), QUEUE_START))

    def on_messages(messages):
        now = time.time_ns()
        with lock:
            for m in messages:
                parsed = decode_body(m.body)
                key, seq = parsed if parsed else (None, None)
                deliveries.append((READER_PUSH, consumer.client_id, next(counter), m.msg_id, key, seq,
                                   zlib.crc32(m.body), m.broker_name, m.queue_id, m.queue_offset,
                                   m.born_timestamp_ms, m.store_timestamp_ms, now))

    consumer = PushConsumer(group, config=cfg, consume_batch_max=64, on_commit=on_commit,
                            on_queue_start=on_queue_start)
    consumer.subscribe(topic)
    consumer.register_listener(on_messages)
    consumer.start()
    ready.set()
    stop.wait(24 * 3600)
    consumer.shutdown()   # its last commits are recorded too
    for name, schema, rows in (("reads", READS, deliveries), ("commits", COMMITS, commits)):
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        columns = list(zip(*rows)) if rows else [[] for _ in arrow_schema]
        table = pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, arrow_schema)],
                                     schema=arrow_schema)
        pq.write_table(table, os.path.join(out_dir, f"{name}-{index}.parquet"))


class PushGroup:
    """``members`` consumer processes of ``group`` on ``topic``, writing to ``out_dir``."""

    def __init__(self, namesrv: tuple[str, ...], topic: str, group: str, out_dir: str, members: int = 2,
                 transport: str = "native"):
        self.out_dir = out_dir
        os.makedirs(out_dir, exist_ok=True)
        context = multiprocessing.get_context("spawn")   # the driver holds a JVM gateway: no fork
        self._stop = context.Event()
        self._ready = [context.Event() for _ in range(members)]
        self._procs = [context.Process(target=_member, name=f"push-member-{i}", daemon=True,
                                       args=(namesrv, transport, topic, group, out_dir, i, self._ready[i], self._stop))
                       for i in range(members)]

    def start(self) -> "PushGroup":
        for proc in self._procs:
            proc.start()
        deadline = time.monotonic() + MEMBER_READY_TIMEOUT_S
        for ready, proc in zip(self._ready, self._procs):
            if not ready.wait(max(0.0, deadline - time.monotonic())):
                self.stop()
                raise RuntimeError(f"{proc.name} did not start (exit code {proc.exitcode})")
        return self

    def stop(self) -> list[int | None]:
        """Stop every member and wait for its files; the members' exit codes."""
        self._stop.set()
        deadline = time.monotonic() + MEMBER_STOP_TIMEOUT_S
        for proc in self._procs:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(5)
        return [proc.exitcode for proc in self._procs]

    def reads_glob(self) -> str:
        return os.path.join(self.out_dir, "reads-*.parquet")

    def commits_glob(self) -> str:
        return os.path.join(self.out_dir, "commits-*.parquet")


def caught_up(admin, topic: str, group: str) -> bool:
    """True when the group has committed every queue up to its current maximum."""
    rows = admin.queue_offsets(topic, group)
    return bool(rows) and all((r.get("consumerOffset") or 0) >= r["maxOffset"] for r in rows)
