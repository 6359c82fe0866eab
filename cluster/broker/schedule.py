"""Delayed and timed messages: parking them, and delivering them when due.

Parking (``park``): a send with DELAY=n (a delay level) or a timer property (RocketMQ 5's
TIMER_DELIVER_MS=t, an exact delivery time; TIMER_DELAY_SEC / TIMER_DELAY_MS, a delay from the send,
whose time is its TIMER_OUT_MS + 1) is stored in SCHEDULE_TOPIC_XXXX with REAL_TOPIC and REAL_QID;
a timed one also with TIMER_OUT_MS, the time's timer slot, which its recall handle names.
Level n waits in queue n-1, where delivery times only grow (store time + one delay),
so the head of the queue says whether anything there is due. An exact time goes to the
level with the longest delay that does not pass it, and is parked again, closer, each
time that level delivers it; the last step, under the shortest delay, goes to the timer
queue (one past the levels), whose entries hold their exact times and are each due
within that shortest delay. No step ever delivers before the time asked.

Delivering (``tick``, every ``TICK_S`` on the broker's loop): for each level, the due head
entries are written to their real topic as new messages (same UNIQ_KEY, properties,
body, born time) and the level's progress is committed to ``delayOffset`` (RocketMQ's
delayOffset.json, here kept like consumer offsets: it outlives a broker SIGKILL). A
crash between the write and the commit delivers that message again (at least once).
What a delivered message carries is what Apache's broker writes: a delay level's copy keeps DELAY,
REAL_TOPIC and REAL_QID (ScheduleMessageService); a timed one keeps its timer properties and
TIMER_OUT_MS, gains TIMER_ENQUEUE_MS and TIMER_DEQUEUE_MS, and loses REAL_TOPIC and REAL_QID
(TimerMessageStore). A timed message recalled (broker/recall.py) is dropped at its next hop.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.offsets import ConsumerOffsetManager
from rocketbox.cluster.broker.recall import RecallLedger
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.message.properties import (PROPERTY_DELAY, PROPERTY_REAL_QID, PROPERTY_REAL_TOPIC,
                                                  PROPERTY_TIMER_DEQUEUE_MS, PROPERTY_TIMER_ENQUEUE_MS,
                                                  PROPERTY_TIMER_OUT_MS, PROPERTY_UNIQ_KEY)
from rocketbox.cluster.config import parse_levels
from rocketbox.cluster.shm.schedule_format import (is_timed, parked_due_ms, queue_of_level, requested_deliver_ms,
                                                     timer_out_ms)
from rocketbox.cluster.message.system_topics import SCHEDULE_TOPIC
from rocketbox.cluster.shm.store import PutMessageStatus, copy_of_record

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

PROGRESS_GROUP = "SCHEDULE_SERVICE"
TICK_S = 0.1
ENTRIES_PER_TICK = 256
# Timer-queue entries read ahead of the oldest undelivered one (all due within the shortest delay).
TIMER_WINDOW = 4096



class ScheduleService:
    def __init__(self, ctx: BrokerContext, recalls: RecallLedger):
        cfg = ctx.cfg
        self.store = ctx.store
        self.topics = ctx.topics
        self.clock = ctx.clock
        self.on_written = ctx.on_written
        self.ensure_system_topic = ctx.ensure_system_topic
        self.durability = ctx.durability
        self.levels_ms = parse_levels(cfg.store.message_delay_levels)
        self.timer_queue = len(self.levels_ms)
        self.progress = ConsumerOffsetManager(cfg.store.store_dir, name="delayOffset")
        self._timer_delivered: set[int] = set()   # timer-queue offsets delivered above the next one
        # queue -> the offset delivered up to whose copies still wait to be durable (durability.py):
        # read on from there, committed only once they are.
        self._delivered_to: dict[int, int] = {}
        self.delivered = 0
        self.recalls = recalls   # timed messages recalled (broker/recall.py): dropped where met
        self.recalled = 0

    # ---------------------------------------------------------------- parking

    def plan(self, props: dict[str, str], now_ms: int | None = None) -> int | None:
        """The schedule queue a message with these properties waits in, None to store it now.
        ValueError for a DELAY or timer property that is not a number. A timed message's properties
        are its parked ones (``park``: TIMER_OUT_MS set)."""
        now_ms = self.clock.now_ms() if now_ms is None else now_ms
        if is_timed(props) and PROPERTY_DELAY not in props:
            left = parked_due_ms(props) - now_ms
            if left <= 0:
                return None
            fitting = [level for level, delay in enumerate(self.levels_ms, 1) if delay <= left]
            return queue_of_level(fitting[-1]) if fitting else self.timer_queue
        delay = props.get(PROPERTY_DELAY)
        if delay is None:
            return None
        level = int(delay)
        if level <= 0:
            return None
        return queue_of_level(min(level, len(self.levels_ms)))

    def park(self, props: dict[str, str], topic: str, queue_id: int) -> tuple[int | None, dict[str, str]]:
        """Where a sent delayed or timed message waits and the properties it waits with; (None, props)
        when it is due now (stored as sent). ValueError for a property that is not a number.

        A timed message gets RocketMQ's TIMER_OUT_MS, its delivery time's timer slot (what its recall
        handle names), and keeps every timer property for its consumers (TimerMessageStore)."""
        now_ms = self.clock.now_ms()
        if is_timed(props) and PROPERTY_DELAY not in props:
            deliver_ms = requested_deliver_ms(props, now_ms)
            if deliver_ms <= now_ms:
                return None, props
            props = {**props, PROPERTY_TIMER_OUT_MS: str(timer_out_ms(deliver_ms))}
        schedule_queue = self.plan(props, now_ms)
        if schedule_queue is None:
            return None, props
        return schedule_queue, self.parked_properties(props, topic, queue_id)

    @staticmethod
    def parked_properties(props: dict[str, str], topic: str, queue_id: int) -> dict[str, str]:
        # Set, not defaulted, as RocketMQ's CommitLog does: a delivered delayed message keeps its REAL_TOPIC,
        # and sent again with a delay it must wait for the topic it is sent to now.
        return {**props, PROPERTY_REAL_TOPIC: topic, PROPERTY_REAL_QID: str(queue_id)}

    # ---------------------------------------------------------------- delivering

    def tick(self) -> None:
        now = self.clock.now_ms()
        wrote = False
        for queue_id in range(len(self.levels_ms)):
            wrote |= self._deliver_level(queue_id, now)
        wrote |= self._deliver_timer_queue(now)
        if wrote:
            self.on_written()

    def _committed(self, queue_id: int) -> int:
        return self.progress.query(PROGRESS_GROUP, SCHEDULE_TOPIC, queue_id) or 0

    def _next(self, queue_id: int) -> int:
        """Where delivery goes on in a queue: past what was delivered, durable or not yet."""
        return self._delivered_to.get(queue_id) or self._committed(queue_id)

    def _commit_when_durable(self, queue_id: int, offset: int) -> None:
        """Commit a queue's progress once the copies delivered so far are as durable as a client's send:
        the progress saved never names a delivery the disk (or a SYNC_MASTER's slave) may not hold. A
        wait that times out commits too: the copies are in the log, as a send answered FLUSH_*_TIMEOUT."""
        self._delivered_to[queue_id] = offset

        def done(outcome) -> None:
            if outcome.code != ResponseCode.SUCCESS:
                _limited.warning("not-durable", "schedule: delivered copies not confirmed durable (%s)", outcome.remark)
            if offset > self._committed(queue_id):
                self.progress.commit(PROGRESS_GROUP, SCHEDULE_TOPIC, queue_id, offset)
            if self._delivered_to.get(queue_id) == offset:
                del self._delivered_to[queue_id]

        self.durability.then(self.store.commitlog.write_pos, done)

    def _deliver_level(self, queue_id: int, now: int) -> bool:
        offset = self._next(queue_id)
        start = offset
        for queue_offset, phys, _size, due_ms in self.store.queue_entries(SCHEDULE_TOPIC, queue_id, offset,
                                                                          ENTRIES_PER_TICK):
            if due_ms > now:
                break
            if not self._deliver(phys, now):
                break
            offset = queue_offset + 1
        if offset != start:
            self._commit_when_durable(queue_id, offset)
        return offset != start

    def _deliver_timer_queue(self, now: int) -> bool:
        offset = self._next(self.timer_queue)
        wrote = False
        for queue_offset, phys, _size, due_ms in self.store.queue_entries(SCHEDULE_TOPIC, self.timer_queue,
                                                                          offset, TIMER_WINDOW):
            if queue_offset in self._timer_delivered or due_ms > now:
                continue
            if not self._deliver(phys, now):
                break
            self._timer_delivered.add(queue_offset)
            wrote = True
        while offset in self._timer_delivered:
            self._timer_delivered.discard(offset)
            offset += 1
        if wrote or offset != self._next(self.timer_queue):
            self._commit_when_durable(self.timer_queue, offset)
        return wrote

    def _deliver(self, phys: int, now: int) -> bool:
        """Write the parked record at ``phys`` where it belongs (or park it closer); False to
        try again later (the store refused the write)."""
        rec = self.store.read_record(phys)
        if rec is None:
            _limited.warning("no-record", "schedule: no record at %d; skipped", phys)
            return True
        props = rec.properties
        topic = props.get(PROPERTY_REAL_TOPIC)
        timed = is_timed(props) and PROPERTY_DELAY not in props
        try:
            queue_id = int(props.get(PROPERTY_REAL_QID, "0"))
            next_queue = self.plan(props, now) if timed else None
        except (KeyError, ValueError):
            next_queue = None
            queue_id = 0
        if not topic or (self.topics.get(topic) is None and not self.ensure_system_topic(topic)):
            _limited.warning("no-topic", "schedule: the message at %d belongs to %r, which does not exist; dropped",
                             phys, topic)
            return True
        if timed and self.recalls.take(topic, props.get(PROPERTY_UNIQ_KEY)):
            self.recalled += 1   # RocketMQ's timer drops it where its recall's marker names it
            return True
        if next_queue is not None:
            # Parked again, closer: the time it was first parked stays what the timer took it in at.
            props = {**props, PROPERTY_TIMER_ENQUEUE_MS: props.get(PROPERTY_TIMER_ENQUEUE_MS)
                     or str(rec.store_timestamp_ms)}
            target_topic, target_queue = SCHEDULE_TOPIC, next_queue
        elif timed:
            # Delivered as RocketMQ 5's TimerMessageStore delivers it: every timer property kept (so a
            # 5.x consumer reads its delivery_timestamp and type DELAY), when the timer took it in and
            # let it out added, the real topic and queue cleared.
            props = {k: v for k, v in props.items() if k not in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QID)}
            props.setdefault(PROPERTY_TIMER_ENQUEUE_MS, str(rec.store_timestamp_ms))
            props[PROPERTY_TIMER_DEQUEUE_MS] = str(now)
            target_topic, target_queue = topic, queue_id
        else:
            # Delivered as RocketMQ's ScheduleMessageService delivers a delay level: REAL_TOPIC, REAL_QID
            # and DELAY stay in the stored properties (its messageTimeUp clears DELAY only from the map
            # it then ignores), so a consumer sees where the message waited.
            target_topic, target_queue = topic, queue_id
        message = copy_of_record(rec, props)
        result = self.store.put_messages(target_topic, target_queue, [message])
        if result.status != PutMessageStatus.PUT_OK:
            _limited.warning("retry", "schedule: delivering the message at %d to %s failed (%s); will retry", phys,
                             topic, result.status.name)
            return False
        self.delivered += 1
        return True

    def persist(self, force: bool = False) -> None:
        self.progress.persist(force)
