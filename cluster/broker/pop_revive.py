"""The revive timer: popped messages whose invisible time passed unacked are delivered again.

Every ``TICK_S`` on a writable master, each checkpoint past its deadline is settled:

- a message of a concurrent group is copied to the group's pop retry topic ``%RETRY%<group>_<topic>``
  with ``reconsume_times`` = the attempts it has had, so its next pop is attempt + 1; once it has had
  ``retryMaxTimes + 1`` attempts (RocketMQ 5's max delivery attempts) it goes to ``%DLQ%<group>``;
- a FIFO group's message is not copied: its queue is unblocked and owes the message again, in
  place and in order, with attempt + 1 (``pop_state.Redelivery``); past the maximum it goes to the
  dead-letter topic and the queue moves on.

The copies are written before the ``done`` record: a broker killed between the two revives the
checkpoint again when it restarts, so such a message can be delivered twice, never lost.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.pop_log import PopLog
from rocketbox.cluster.broker.pop_state import Pending
from rocketbox.cluster.broker.retry import PROPERTY_ORIGIN_MESSAGE_ID
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import ProtocolError, dlq_topic, pop_retry_topic
from rocketbox.cluster.message.properties import PROPERTY_RETRY_TOPIC, PROPERTY_UNIQ_KEY
from rocketbox.cluster.shm.store import PutMessageStatus, copy_of_record

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

TICK_S = 0.1
REVIVES_PER_TICK = 512
RETRY_LATER_MS = 1000


class PopReviver:
    def __init__(self, ctx: BrokerContext, pop_log: PopLog):
        self.store = ctx.store
        self.log = pop_log
        self.state = pop_log.state
        self.retry_max_times_of = ctx.groups.retry_max_times
        self.clock = ctx.clock
        self.may_write = ctx.may_write
        self.ensure_system_topic = ctx.ensure_system_topic
        self.on_written = ctx.on_written
        self.pull_waiters = ctx.pull_waiters
        self.dead_lettered = 0    # messages moved to %DLQ% after the max attempts

    def tick(self) -> None:
        if self.may_write():
            now_ms = self.clock.now_ms()
            for pending in self.state.due(now_ms, REVIVES_PER_TICK):
                try:
                    self._revive(pending)
                except (ProtocolError, OSError) as exc:
                    # Taken off the deadline heap with the rest of this tick's: each is tried again
                    # later, or its messages would never come back (a full disk raises OSError).
                    _limited.warning("not-revived", "pop checkpoint %d of %s not revived yet: %s", pending.ck.ck_offset,
                                     pending.ck.group, exc)
                    self.state.retry_later(pending, now_ms + RETRY_LATER_MS)
        self.log.commits.rearm()
        self.log.commit_progress()

    def _revive(self, pending: Pending) -> None:
        ck = pending.ck
        max_attempts = self.retry_max_times_of(ck.group) + 1
        again, dead, redeliver = [], [], {}
        for queue_offset, phys, attempt in pending.unacked():
            if attempt >= max_attempts:
                dead.append((phys, attempt))
            elif ck.order:
                redeliver[queue_offset] = attempt + 1
            else:
                again.append((phys, attempt))
        self._copy(ck, again, pop_retry_topic(ck.group, ck.topic))
        self._copy(ck, dead, dlq_topic(ck.group))
        if dead:
            self.dead_lettered += len(dead)
            _limited.info("dead-letter", "%d messages of %s go to %s after %d delivery attempts", len(dead), ck.topic,
                          dlq_topic(ck.group), max_attempts)
        self.log.done(pending, redeliver)
        if ck.order:
            self.pull_waiters.wake([(pending.queue_topic, ck.queue_id)])

    def _copy(self, ck, messages: list[tuple[int, int]], target: str) -> None:
        copies = []
        for phys, attempt in messages:
            record = self.store.read_record(phys)
            if record is None:
                _limited.warning("gone", "a popped message of %s at CommitLog offset %d is gone (retention): not "
                                 "delivered again", ck.topic, phys)
                continue
            properties = record.properties
            properties.setdefault(PROPERTY_RETRY_TOPIC, ck.topic)
            properties.setdefault(PROPERTY_ORIGIN_MESSAGE_ID,
                                  properties.get(PROPERTY_UNIQ_KEY) or record.offset_msg_id)
            copies.append(copy_of_record(record, properties, reconsume_times=attempt))
        if not copies:
            return
        self.ensure_system_topic(target)
        result = self.store.put_messages(target, 0, copies)
        if result.status != PutMessageStatus.PUT_OK:
            raise ProtocolError(f"{target} refused the copies: {result.status.name}")
        self.on_written()
