"""The load: a Spark job whose tasks each run a producer and record a history of every attempt.

Message ``m`` of ``messages`` has key ``k{m % keys}`` and that key's sequence number
``m // keys``; task ``t`` of ``tasks`` sends the keys with ``k % tasks == t``, each key's
messages in sequence order to the queue its key hashes to (RocketMQ's
SelectMessageQueueByHash), so per-key order is defined and checkable. Consecutive
messages for one queue go in one batch send (``batch`` of them; 1 = single sends).

Each task sends its queues in parallel, one thread per queue (see ``run_task``).
Every attempt is recorded as an ``invoke`` row and a completion row (schemas.HISTORY):
``ok`` with the queue and offset, ``fail`` when the send definitely did not happen, and
``info`` when it may have (a time-out, a lost connection, FLUSH_*_TIMEOUT,
SLAVE_NOT_AVAILABLE). Anything but ``ok`` is retried (up to ``attempts_max``) with the
same UNIQ_KEY and body, as an application resending the same message object would;
the producer's own retries are off so that one attempt is one request. A batch that is
not ``ok`` is resent whole before any later message of its queue, which keeps key order.
"""

from __future__ import annotations

import threading
import time
import zlib
from dataclasses import dataclass

from rocketbox.spark.schemas import FAIL, INFO, INVOKE, OK, encode_body

RETRY_BACKOFF_S = 0.05


@dataclass(frozen=True)
class LoadPlan:
    namesrv: tuple[str, ...]
    topic: str
    messages: int
    keys: int = 100
    tasks: int = 2
    body_bytes: int = 100
    batch: int = 32
    rate_msg_s: float | None = None      # all tasks together; None: flat out
    attempts_max: int = 5
    request_timeout_ms: int = 3_000
    time_s_max: float = 600.0            # a task stops starting sends after this
    transport: str = "native"            # or "remoting": RocketMQ's protocol (RocketBox's or Apache's door)

    def key_name(self, k: int) -> str:
        return f"k{k}"

    def task_messages(self, task: int) -> list[tuple[str, int]]:
        """(key, seq) pairs task ``task`` sends, in sending order."""
        return [(self.key_name(m % self.keys), m // self.keys)
                for m in range(self.messages) if (m % self.keys) % self.tasks == task]


def classify(error: BaseException) -> str:
    """fail when the request surely was not stored, info when it may have been."""
    from rocketbox.cluster.errors import BrokerError, ClientClosed, MessageInvalid, NoRouteError
    if isinstance(error, (BrokerError, MessageInvalid, NoRouteError, ClientClosed)):
        return FAIL   # answered with a refusal, or never sent
    return INFO       # no answer: time-out, connection lost


def run_task(plan: LoadPlan, task: int, process: str) -> list[tuple]:
    """Send task ``task``'s share; the history rows (in HISTORY's column order).

    One thread per queue, each a Jepsen "process" of its own (``<process>-q<queue>``):
    a queue's sends stay sequential, which keeps key order, while the queues' requests
    overlap, which keeps the broker's group commit fed.
    """
    from rocketbox.cluster import Producer
    from rocketbox.cluster.client.routes import config_for
    from rocketbox.cluster.client.selectors import select_by_hash
    cfg = config_for(plan.namesrv, request_timeout_ms=plan.request_timeout_ms, send_retry_count=0,
                     transport=plan.transport)
    with Producer(f"rocketbox-load-{task}", config=cfg) as producer:
        queues = producer.routes.publish_route(plan.topic)[1]
        per_queue: dict = {}
        for key, seq in plan.task_messages(task):
            per_queue.setdefault(select_by_hash(queues, key), []).append((key, seq))
        deadline = time.monotonic() + plan.time_s_max
        results: dict = {}
        threads = [threading.Thread(target=lambda mq=mq, items=items: results.__setitem__(
            mq, _send_queue(producer, plan, mq, items, f"{process}-q{mq.queue_id}", deadline)),
            name=f"load-q{mq.queue_id}", daemon=True) for mq, items in per_queue.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return [row for rows in results.values() for row in rows]


def _send_queue(producer, plan: LoadPlan, mq, items: list[tuple[str, int]], process: str,
                deadline: float) -> list[tuple]:
    """One queue's messages in order, ``plan.batch`` a request, each retried until ``ok``."""
    from rocketbox.cluster import Message
    rows: list[tuple] = []
    op_counter = iter(range(1 << 62))
    # This queue's share of the target rate, in requests.
    share = plan.rate_msg_s * len(items) / max(1, plan.messages) if plan.rate_msg_s else 0
    interval_s = plan.batch / share if share else 0.0
    next_send = time.monotonic()
    for start in range(0, len(items), plan.batch):
        if time.monotonic() > deadline:
            break
        batch_items = []
        for key, seq in items[start:start + plan.batch]:
            body = encode_body(key, seq, plan.body_bytes)
            batch_items.append((key, seq, body, zlib.crc32(body)))
        messages = [Message(plan.topic, body, keys=key) for key, _seq, body, _crc in batch_items]
        for attempt in range(plan.attempts_max):
            if interval_s:
                delay = next_send - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                next_send = max(next_send + interval_s, time.monotonic() - 1.0)
            if _attempt(producer, mq, messages, batch_items, process, op_counter, rows) == OK:
                break
            time.sleep(RETRY_BACKOFF_S * (attempt + 1))
    return rows


def _attempt(producer, mq, messages, items, process, op_counter, rows) -> str:
    """One batch send: invoke and completion rows for each of its messages; the outcome."""
    from rocketbox.cluster import SendStatus
    invoke_ns = time.time_ns()
    error = None
    try:
        if len(messages) == 1:
            result = producer.send(messages[0], queue=mq)
        else:
            result = producer.send_batch(messages, queue=mq)
        # Any other status (FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE): stored on
        # the master, but not as durably as promised: indeterminate.
        outcome = OK if result.status == SendStatus.SEND_OK else INFO
        if outcome != OK:
            error = result.status.name
    except Exception as exc:  # every failure is a history row, never a dead task
        result = None
        outcome = classify(exc)
        error = f"{type(exc).__name__}: {exc}"[:300]
    done_ns = time.time_ns()
    for j, ((key, seq, _body, crc), message) in enumerate(zip(items, messages)):
        op = next(op_counter)
        msg_id = message.properties.get("UNIQ_KEY", "")
        rows.append((process, op, INVOKE, key, seq, msg_id, crc, invoke_ns, None, mq.queue_id, None, None))
        if outcome == OK:
            rows.append((process, op, OK, key, seq, msg_id, crc, done_ns, result.queue.broker_name,
                         result.queue.queue_id, result.queue_offset + j, None))
        else:
            rows.append((process, op, outcome, key, seq, msg_id, crc, done_ns, None, mq.queue_id, None, error))
    return outcome


def generate(spark, plan: LoadPlan, history_path: str) -> None:
    """Run the load as a Spark job (one task per ``plan.tasks``) and write the history as Parquet."""
    from rocketbox.spark.schemas import HISTORY

    def task_rows(index, _items):
        import os
        return run_task(plan, index, f"task-{index}-pid-{os.getpid()}")

    rdd = spark.sparkContext.parallelize(range(plan.tasks), plan.tasks).mapPartitionsWithIndex(task_rows)
    spark.createDataFrame(rdd, HISTORY).write.mode("overwrite").parquet(history_path)
