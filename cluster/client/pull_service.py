"""A push consumer's pulling (RocketMQ's PullMessageService): one long-polling pull in flight per
queue, flow control by the messages and bytes a queue has cached, and hand-over of what arrived
to the consume service (or, orderly, to the queue's line)."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future

from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.broker_api import PullStatus
from rocketbox.cluster.client.message_selector import MessageSelector
from rocketbox.cluster.client.process_queue import ProcessQueue
from rocketbox.cluster.errors import ClientError

log = logging.getLogger(__name__)


class PullService:
    def __init__(self, consumer):
        self.consumer = consumer
        self._paused: list[tuple[float, ProcessQueue]] = []
        self._paused_lock = threading.Lock()

    def pull(self, pq: ProcessQueue) -> None:
        c = self.consumer
        if pq.dropped or c._stop.is_set():
            return
        if c._orderly is not None and c._orderly.hold_pull(pq):
            return  # no valid lock on its queue
        with pq.lock:
            if pq.pull_in_flight:
                return
            if pq.cached_count >= c.cached_messages_max or pq.cached_bytes >= c.cached_bytes_max:
                # Flow control: consumption resumes the pull as soon as the cache drains below half
                # the caps; the timed retry is only a fallback (RocketMQ waits a fixed 50 ms).
                if not pq.flow_paused:
                    c.flow_control_pauses += 1
                pq.flow_paused = True
                paused = True
            else:
                pq.flow_paused = False
                pq.pull_in_flight = True
                paused = False
        if paused:
            self.pause(pq, 0.05)
            return
        try:
            endpoint, broker_id = c._pull_endpoint(pq.mq)
        except ClientError as exc:
            log.warning("no broker for %s: %s", pq.mq, exc)
            pq.pull_in_flight = False
            self.pause(pq, 1.0)
            return
        selector = c._selector(pq.mq.topic)
        request = broker_api.pull_request(c.group, pq.mq, pq.next_offset, c.cfg.pull_batch_count,
                                          selector.expression, c.cfg.pull_suspend_ms,
                                          expression_type=selector.expression_type)
        # Resolved on the I/O thread, which consumes the messages itself when there is no consume pool.
        c.rpc.call_async(endpoint, request, c.cfg.pull_suspend_ms + c.cfg.request_timeout_ms,
                         on_done=lambda f: self._on_pulled(pq, endpoint, selector, f, broker_id))

    def pause(self, pq: ProcessQueue, delay_s: float) -> None:
        with self._paused_lock:
            self._paused.append((self.consumer.clock.monotonic() + delay_s, pq))

    def resume_paused(self, now: float) -> None:
        with self._paused_lock:
            due = [pq for t, pq in self._paused if t <= now]
            self._paused = [(t, pq) for t, pq in self._paused if t > now]
        for pq in due:
            self.pull(pq)

    def _on_pulled(self, pq: ProcessQueue, endpoint: str, selector: MessageSelector, future: Future,
                   broker_id: int = 0) -> None:
        c = self.consumer
        try:
            c._pulled(pq.mq, broker_id, None if future.exception() is not None else future.result())
            self._handle_pulled(pq, endpoint, selector, future)
        except Exception:
            # Whatever went wrong, the queue must not stay marked as pulling forever.
            log.exception("handling a pull of %s failed; pulling again shortly", pq.mq)
            pq.pull_in_flight = False
            self.pause(pq, 1.0)

    def _handle_pulled(self, pq: ProcessQueue, endpoint: str, selector: MessageSelector, future: Future) -> None:
        c = self.consumer
        if pq.dropped or c._stop.is_set():
            return
        exc = future.exception()
        if exc is not None:
            log.info("pull of %s failed, retrying: %s", pq.mq, exc)
            pq.pull_in_flight = False
            self.pause(pq, 0.5)
            return
        try:
            result = broker_api.pull_result(future.result(), pq.mq, endpoint, selector.tags_to_recheck())
        except ClientError as error:
            log.warning("pull of %s refused: %s", pq.mq, error)
            pq.pull_in_flight = False
            self.pause(pq, 1.0)
            return
        if result.status == PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal; moving to %d", pq.next_offset, pq.mq, result.next_begin_offset)
        if result.messages:
            for i in range(0, len(result.messages), c.consume_batch_max):
                batch = result.messages[i:i + c.consume_batch_max]
                pq.add(batch)  # before next_offset moves: the commit point never passes unconsumed work
                if c._orderly is not None:
                    c._orderly.submit(pq, batch)  # into the queue's line, consumed in order
                else:
                    c.consume_service.submit(pq, batch)
        pq.next_offset = result.next_begin_offset
        pq.pull_in_flight = False  # only now: a pull started earlier would reuse the old offset
        self.pull(pq)
