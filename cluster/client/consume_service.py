"""A push consumer's concurrent consumption (RocketMQ's ConsumeMessageConcurrentlyService): batches
run on a thread pool; what the listener fails goes back to the broker for the group's retry
topic (clustering) or is dropped (broadcasting), and what cannot go back is consumed here again.

With no consume threads (``PushConsumer(consume_threads=0)``) a batch is consumed on the thread
that received its pull, the client's I/O thread: no hand-off. Waking a pool thread and passing it
the GIL was ~140 us of a message's ~700 us end to end at 10k msg/s on two cores (perf/RESULTS.md, end
to end at 10k msg/s hop by hop). A listener that blocks there holds up every queue's pulls and the client's
other asynchronous requests, so this is for listeners that return quickly. Messages that failed and
could not go back to the broker are consumed again on one pool thread.

With a pool, a batch still runs on the I/O thread while the pool is idle and the listener has
lately returned quickly and successfully (``QUICK_CALLS_BEFORE_INLINE`` calls in a row, each within
``QUICK_LISTENER_S``): the hand-off it saves was ~165 us p50 (p90 ~450) of a message's path at 10k
msg/s, the largest part left (perf/RESULTS.md "The consume pool's hand-off"). A call that is slow
or fails sends the following batches back to the pool until the listener is quick again, so a
listener that blocks holds up the I/O thread at most once in a row; what failed is sent back from
a pool thread, never the I/O thread. While the pool has work, batches queue behind it as before
(no more listener calls at once than ``consume_threads``)."""

from __future__ import annotations

import enum
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.message import MessageExt, restore_retried_topic
from rocketbox.cluster.client.process_queue import ProcessQueue
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger(__name__)

# RocketMQ's MessageModel.
CLUSTERING = "CLUSTERING"
BROADCASTING = "BROADCASTING"

# A listener call within this is quick enough to run on the I/O thread (a pull's answer, heartbeats
# and the other queues' answers wait behind it there).
QUICK_LISTENER_S = 0.001
# Quick, successful calls in a row before batches run on the I/O thread: one slow call sends them
# back to the pool, and the streak starts again.
QUICK_CALLS_BEFORE_INLINE = 4


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeService:
    def __init__(self, consumer, threads: int):
        self.consumer = consumer
        self.inline = threads == 0
        # Inline, the pool's one thread consumes only what is retried here (_retry_consume).
        self.executor = ThreadPoolExecutor(max(1, threads), thread_name_prefix=f"consume-{consumer.group}")
        self._pool_lock = threading.Lock()
        self._pool_batches = 0          # handed to the pool and not finished
        self._quick_streak = 0          # the listener's last calls in a row that were quick and succeeded
        self.inline_batches = 0         # run on the I/O thread although there is a pool

    def submit(self, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        if self.inline:
            self._consume(pq, messages)
            return
        with self._pool_lock:
            idle = self._pool_batches == 0 and self._quick_streak >= QUICK_CALLS_BEFORE_INLINE
        if idle:
            self.inline_batches += 1
            self._consume(pq, messages, failures_to_pool=True)
        else:
            self._to_pool(pq, messages)

    def _to_pool(self, pq: ProcessQueue, messages: list[MessageExt], **kwargs) -> None:
        with self._pool_lock:
            self._pool_batches += 1
        try:
            self.executor.submit(self._pool_consume, pq, messages, **kwargs)
        except BaseException:
            with self._pool_lock:
                self._pool_batches -= 1
            raise

    def _pool_consume(self, pq: ProcessQueue, messages: list[MessageExt], **kwargs) -> None:
        try:
            self._consume(pq, messages, **kwargs)
        finally:
            with self._pool_lock:
                self._pool_batches -= 1

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True)

    def _consume(self, pq: ProcessQueue, messages: list[MessageExt], failures_to_pool: bool = False,
                 status=None) -> None:
        """``failures_to_pool``: on the I/O thread, so what failed is handled (sent back) on the pool;
        ``status``: the listener already ran (there) and answered this."""
        c = self.consumer
        if pq.dropped:
            return
        if status is None:
            for m in messages:
                restore_retried_topic(m)
            started = time.perf_counter()
            try:
                status = c.listener(messages)
            except Exception:
                log.exception("listener of %s raised; the messages will be consumed again", c.group)
                status = ConsumeStatus.RECONSUME_LATER
            failed = status is False or status == ConsumeStatus.RECONSUME_LATER
            quick = not failed and time.perf_counter() - started <= QUICK_LISTENER_S
            with self._pool_lock:
                self._quick_streak = self._quick_streak + 1 if quick else 0
            if failed and failures_to_pool:
                try:
                    self._to_pool(pq, messages, status=status)
                except RuntimeError:
                    pass  # shutting down: the offset was not committed past them, so they return later
                return
        if status is False or status == ConsumeStatus.RECONSUME_LATER:
            c.consume_failures += len(messages)
            if c.message_model == BROADCASTING:
                # No retry topic in broadcasting: RocketMQ drops what failed, and so do we.
                log.warning("broadcasting consumer of %s dropped %d messages whose consumption failed",
                            c.group, len(messages))
                kept = []
            else:
                kept = [m for m in messages if not self._send_back(pq, m)]
            if kept:
                # At-least-once: what could not go back to the broker stays in flight (the
                # offset cannot pass it) and is consumed here again later.
                timer = threading.Timer(c.reconsume_delay_s, self._retry_consume, args=(pq, messages))
                timer.daemon = True
                timer.start()
                return
        pq.done(messages)
        c.consumed += len(messages)
        if pq.flow_paused and pq.cached() <= c.cached_messages_max // 2 \
                and pq.cached_bytes <= c.cached_bytes_max // 2:
            c.pull_service.pull(pq)

    def _send_back(self, pq: ProcessQueue, message: MessageExt) -> bool:
        """CONSUMER_SEND_MSG_BACK to the broker that holds ``message``: it returns through
        %RETRY%<group> after a growing delay, or goes to %DLQ%<group> at the maximum."""
        c = self.consumer
        try:
            broker_api.send_back(c.rpc, c._endpoint(pq.mq), c.group, message, c.max_reconsume_times)
        except (ClientError, TransportError) as exc:
            log.warning("sending %s back to the broker failed (%s); it is retried here", message.msg_id, exc)
            return False
        c.sent_back += 1
        return True

    def _retry_consume(self, pq: ProcessQueue, messages: list[MessageExt]) -> None:
        c = self.consumer
        if not pq.dropped and not c._stop.is_set():
            try:
                self._to_pool(pq, messages)
            except RuntimeError:
                pass  # shutting down: the offset was not committed past them, so they return later
