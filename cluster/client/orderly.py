"""Orderly consumption for PushConsumer (RocketMQ's ConsumeMessageOrderlyService and the
lock side of RebalanceImpl), switched on by ``PushConsumer.register_message_listener_orderly``.

- Locks. A queue the rebalance assigns is locked at its broker (LOCK_BATCH_MQ) before it
  is pulled; a queue the broker refuses (another member still holds it) is left for the
  next rebalance, which comes within ``LOCK_RETRY_S``. Held locks are renewed every
  ``rebalance_lock_interval_ms`` (20 s); a queue whose lock was last confirmed more than
  ``rebalance_lock_max_live_ms`` (30 s, below the broker's 60 s) ago is neither pulled nor
  consumed until a renewal succeeds. A queue the rebalance takes away finishes the batch
  its listener is running, commits its offset, and only then is unlocked (UNLOCK_BATCH_MQ),
  so the next owner starts where this one stopped. A dead member's locks expire at the
  broker (or go when the broker expires the client).
- One thread per queue at a time. Pulled batches wait in their queue's line, in offset
  order; one consume loop per queue takes them one by one on the consumer's thread pool.
- Failure is retried in place: SUSPEND_CURRENT_QUEUE_A_MOMENT (or False, or an exception)
  leaves the batch at the head of its line and the queue waits
  ``suspend_current_queue_time_ms`` (1000 ms, clamped to 10..30000 as RocketMQ does; the
  listener may change it for one batch through its context), nothing behind it is
  consumed meanwhile, and nothing goes to the retry topic. Only after
  ``max_reconsume_times`` retries (RocketMQ's orderly default is Integer.MAX_VALUE, i.e.
  never) does a batch go to the group's dead-letter topic and the queue move on.
- Offsets are committed as in concurrent mode: the first offset not yet consumed.

A listener is ``listener(messages, context) -> ConsumeOrderlyStatus``; None or True count
as SUCCESS (as this package's concurrent listeners), False as SUSPEND_CURRENT_QUEUE_A_MOMENT.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
from dataclasses import dataclass
from typing import Callable, Iterable

from rocketbox.cluster.fastjson_format import body_json
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.client.message import MessageExt, MessageQueue
from rocketbox.cluster.errors import ClientError, raise_for
from rocketbox.cluster.protocol import RequestCode, to_json_bytes
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger(__name__)

# DefaultMQPushConsumer.suspendCurrentQueueTimeMillis, and ConsumeMessageOrderlyService's bounds on it.
SUSPEND_CURRENT_QUEUE_TIME_MS_DEFAULT = 1000
SUSPEND_MS_MIN, SUSPEND_MS_MAX = 10, 30_000
# maxReconsumeTimes -1 means Integer.MAX_VALUE for an orderly consumer.
ORDERLY_RECONSUME_TIMES_MAX = 2**31 - 1
# rocketmq.client.maxTimeConsumeContinuously: one loop yields its thread after this long.
CONSUME_CONTINUOUSLY_S_MAX = 60.0
# A queue whose lock lapsed: try to lock it again after this, resume consuming if granted.
RELOCK_DELAY_S = 0.1
# Pulls of a queue without a valid lock wait this long (RocketMQ's PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION).
PULL_WITHOUT_LOCK_DELAY_S = 3.0
# A queue the broker would not lock yet (its previous owner is finishing) is asked for again this soon.
LOCK_RETRY_S = 1.0


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


_SUCCESS = (None, True, ConsumeOrderlyStatus.SUCCESS)


@dataclass
class ConsumeOrderlyContext:
    """What an orderly listener is told; it may set the suspend time for a failing batch."""

    mq: MessageQueue
    suspend_current_queue_time_ms: int
    reconsume_times: int = 0  # failed attempts of this batch so far


OrderlyListener = Callable[[list[MessageExt], ConsumeOrderlyContext], "ConsumeOrderlyStatus | bool | None"]


def _mq_json(mq: MessageQueue) -> dict:
    return {"topic": mq.topic, "brokerName": mq.broker_name, "queueId": mq.queue_id}


def _lock_body(group: str, client_id: str, mqs: Iterable[MessageQueue]) -> bytes:
    return to_json_bytes({"consumerGroup": group, "clientId": client_id, "mqSet": [_mq_json(q) for q in mqs]})


def lock_batch_mq(rpc, endpoint: str, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
    """LOCK_BATCH_MQ: lock or renew ``mqs`` for ``client_id``; the ones it holds now."""
    response = rpc.call(endpoint, Command(RequestCode.LOCK_BATCH_MQ, {}, _lock_body(group, client_id, mqs)))
    raise_for(response, endpoint)
    return {MessageQueue(str(q["topic"]), str(q["brokerName"]), int(q["queueId"]))
            for q in body_json(response.body or b"{}").get("lockOKMQSet") or []}


def unlock_batch_mq(rpc, endpoint: str, group: str, client_id: str, mqs: Iterable[MessageQueue]) -> None:
    response = rpc.call(endpoint, Command(RequestCode.UNLOCK_BATCH_MQ, {}, _lock_body(group, client_id, mqs)))
    raise_for(response, endpoint)


class _Line:
    """One queue's batches waiting to be consumed, and whether a loop is consuming them."""

    def __init__(self, pq):
        self.pq = pq
        self.batches: collections.deque[list[MessageExt]] = collections.deque()
        self.consuming = False  # a loop runs, or is suspended, for this queue: no second one starts
        self.guard = threading.Lock()  # batches and consuming
        self.consume_lock = threading.Lock()  # held while a batch is consumed and accounted for
        self.failures = 0  # failed attempts of the batch at the head


class OrderlyService:
    def __init__(self, consumer, listener: OrderlyListener, suspend_current_queue_time_ms: int,
                 max_reconsume_times: int):
        self.consumer = consumer
        self.listener = listener
        self.suspend_ms = suspend_current_queue_time_ms
        self.max_reconsume_times = max_reconsume_times
        self._lines: dict[object, _Line] = {}  # process queue -> its line
        self._lines_lock = threading.Lock()
        self._lock_times: dict[MessageQueue, float] = {}  # queue -> when its last granted lock was asked
        self._renewer: threading.Thread | None = None
        self._retry_timer: threading.Timer | None = None
        self.suspended = 0
        self.dead_lettered = 0
        # Broadcasting members each read every queue: nothing to lock (as RocketMQ).
        self.locking = getattr(consumer, "message_model", "CLUSTERING") == "CLUSTERING"

    # ------------------------------------------------------------ locks

    def _by_endpoint(self, mqs: Iterable[MessageQueue]) -> dict[str, list[MessageQueue]]:
        grouped: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            try:
                grouped.setdefault(self.consumer._endpoint(mq), []).append(mq)
            except ClientError as exc:
                log.warning("no broker to lock %s at: %s", mq, exc)
        return grouped

    def lock(self, mqs: Iterable[MessageQueue]) -> set[MessageQueue]:
        """Lock (or renew) ``mqs`` at their brokers; the ones granted. Refused ones lose their lock."""
        mqs = set(mqs)
        if not self.locking:
            return mqs
        granted: set[MessageQueue] = set()
        c = self.consumer
        for endpoint, asked in self._by_endpoint(mqs).items():
            sent = c.clock.monotonic()
            try:
                held = lock_batch_mq(c.rpc, endpoint, c.group, c.client_id, asked)
            except (ClientError, TransportError) as exc:
                log.warning("locking %d queues at %s failed: %s", len(asked), endpoint, exc)
                continue  # the locks we had stay valid until their time runs out
            for mq in asked:
                if mq in held:
                    self._lock_times[mq] = sent
                elif self._lock_times.pop(mq, None) is not None:
                    log.warning("consumer %s lost the lock of %s", c.client_id, mq)
            granted |= held & set(asked)
        if mqs - granted and not c._stop.is_set():
            self._retry_rebalance_soon()
        self._start_renewer()
        return granted

    def _retry_rebalance_soon(self) -> None:
        if self._retry_timer is not None and self._retry_timer.is_alive():
            return
        self._retry_timer = threading.Timer(LOCK_RETRY_S, self.consumer._rebalance_now.set)
        self._retry_timer.daemon = True
        self._retry_timer.start()

    def lock_valid(self, mq: MessageQueue) -> bool:
        if not self.locking:
            return True
        granted = self._lock_times.get(mq)
        return granted is not None and \
            self.consumer.clock.monotonic() - granted <= self.consumer.cfg.rebalance_lock_max_live_ms / 1000

    def _start_renewer(self) -> None:
        if self._renewer is None:
            self._renewer = threading.Thread(target=self._renew_loop, name=f"lock-{self.consumer.group}",
                                             daemon=True)
            self._renewer.start()

    def _renew_loop(self) -> None:
        c = self.consumer
        while not c._stop.wait(c.cfg.rebalance_lock_interval_ms / 1000):
            try:
                with c._queues_lock:
                    mqs = list(c._queues)
                if mqs:
                    self.lock(mqs)
            except Exception:
                log.exception("renewing the queue locks of %s failed", c.group)

    def hold_pull(self, pq) -> bool:
        """True (and the pull put off) while ``pq``'s queue has no valid lock."""
        if self.lock_valid(pq.mq):
            return False
        self.consumer._pause(pq, PULL_WITHOUT_LOCK_DELAY_S)
        return True

    def _unlock(self, mqs: Iterable[MessageQueue]) -> None:
        if not self.locking:
            return
        c = self.consumer
        mqs = list(mqs)
        for mq in mqs:
            self._lock_times.pop(mq, None)
        for endpoint, asked in self._by_endpoint(mqs).items():
            try:
                unlock_batch_mq(c.rpc, endpoint, c.group, c.client_id, asked)
            except (ClientError, TransportError) as exc:
                log.warning("unlocking %d queues at %s failed (they expire there): %s", len(asked), endpoint, exc)

    def release(self, pq) -> None:
        """``pq`` was taken away (and marked dropped): let its running batch end, commit, unlock.

        On a thread of its own: the batch may take a while and the rebalance must go on."""
        threading.Thread(target=self._release, args=(pq,), name=f"release-{pq.mq.queue_id}", daemon=True).start()

    def forget(self, pq) -> None:
        """``pq`` was dropped: forget its line once the batch being consumed ends (an offset reset
        restarts the queue at once, and its old batch must not run beside the new line)."""
        with self._lines_lock:
            line = self._lines.pop(pq, None)
        if line is not None:
            with line.consume_lock:
                pass  # the batch being consumed is finished and accounted for

    def _release(self, pq) -> None:
        self.forget(pq)
        c = self.consumer
        c._commit(pq, force=True, handing_over=True)
        with c._queues_lock:
            taken_again = pq.mq in c._queues  # re-assigned meanwhile: the lock is the new one's
        if not taken_again:
            self._unlock([pq.mq])

    def shutdown(self, pqs) -> None:
        """After the consume loops ended and offsets were committed: give every lock back."""
        if self._retry_timer is not None:
            self._retry_timer.cancel()
        self._unlock([pq.mq for pq in pqs])

    # ------------------------------------------------------------ consuming

    def submit(self, pq, batch: list[MessageExt]) -> None:
        """A pulled batch (already counted in ``pq``): into its queue's line, in offset order."""
        with self._lines_lock:
            line = self._lines.get(pq)
            if line is None:
                line = self._lines[pq] = _Line(pq)
        with line.guard:
            line.batches.append(batch)
            if line.consuming:
                return
            line.consuming = True
        self._run(line)

    def _run(self, line: _Line) -> None:
        try:
            self.consumer._executor.submit(self._consume_line, line)
        except RuntimeError:
            pass  # shutting down: nothing past the commit point was consumed

    def _later(self, delay_s: float, function, *args) -> None:
        timer = threading.Timer(delay_s, function, args=args)
        timer.daemon = True
        timer.start()

    def _relock_and_run(self, line: _Line) -> None:
        pq = line.pq
        if pq.dropped or self.consumer._stop.is_set():
            return
        if self.lock([pq.mq]):
            self._run(line)
        else:
            self._later(PULL_WITHOUT_LOCK_DELAY_S, self._relock_and_run, line)

    def _consume_line(self, line: _Line) -> None:
        pq = line.pq
        started = self.consumer.clock.monotonic()
        while True:
            if pq.dropped or self.consumer._stop.is_set():
                return  # the line is given up with its queue; the offset stays at its head
            if not self.lock_valid(pq.mq):
                log.info("lock of %s not valid; consuming it waits for a new lock", pq.mq)
                self._later(RELOCK_DELAY_S, self._relock_and_run, line)
                return
            if self.consumer.clock.monotonic() - started > CONSUME_CONTINUOUSLY_S_MAX:
                self._later(0.01, self._run, line)  # let other queues have this thread
                return
            with line.guard:
                if not line.batches:
                    line.consuming = False
                    return
                batch = line.batches[0]
            with line.consume_lock:
                if pq.dropped:
                    return
                context = ConsumeOrderlyContext(pq.mq, self.suspend_ms, line.failures)
                try:
                    status = self.listener(batch, context)
                except Exception:
                    log.exception("orderly listener of %s raised; %s waits and retries", self.consumer.group, pq.mq)
                    status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                if status in _SUCCESS or self._gave_up(line, batch):
                    self._consumed(line, batch, status in _SUCCESS)
                    suspend_s = None
                else:
                    suspend_s = min(max(context.suspend_current_queue_time_ms, SUSPEND_MS_MIN), SUSPEND_MS_MAX) / 1000
            if suspend_s is not None:
                self._later(suspend_s, self._run, line)  # the line stays "consuming": nothing overtakes
                return
            c = self.consumer
            if pq.flow_paused and pq.cached() <= c.cached_messages_max // 2:
                c._pull(pq)

    def _gave_up(self, line: _Line, batch: list[MessageExt]) -> bool:
        """A failed attempt: True once the batch is past its retries and in the dead-letter topic."""
        c = self.consumer
        c.consume_failures += len(batch)
        line.failures += 1
        if line.failures <= self.max_reconsume_times:
            self.suspended += 1
            return False
        try:
            endpoint = c._endpoint(line.pq.mq)
            for message in batch:
                # A maximum of 0 sends it straight to %DLQ%<group>, as RocketMQ's orderly consumer
                # does with a message whose in-place retries ran out.
                broker_api.send_back(c.rpc, endpoint, c.group, message, 0)
        except (ClientError, TransportError) as exc:
            log.warning("dead-lettering a batch of %s failed (%s); it is retried in place", line.pq.mq, exc)
            return False
        self.dead_lettered += len(batch)
        return True

    def _consumed(self, line: _Line, batch: list[MessageExt], succeeded: bool) -> None:
        with line.guard:
            line.batches.popleft()
            line.failures = 0
        line.pq.done(batch)
        if succeeded:
            self.consumer.consumed += len(batch)
