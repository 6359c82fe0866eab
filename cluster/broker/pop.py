"""POP_MESSAGE, ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME: RocketMQ 5's pop consumption.

A pop takes up to ``maxMsgNums`` messages from every readable queue of a topic (queueId -1) and
from the group's pop retry topic, writes one checkpoint per queue it took from to the revive log
(``pop_log.py``), and answers the records with a receipt handle and a delivery attempt each. The
messages stay invisible to the group until acked or until the invisible time passes; then the
revive timer (``pop_revive.py``) delivers them again. FIFO groups (``order``) take messages from a
queue only while it has nothing unacked, and stop a batch before a message group repeats, so a
message group's next message comes only after the previous one is acked.

A PRIORITY topic (RocketMQ 5.4, RIP-80: a priority message is stored in the queue of its priority,
``send.py``) is popped as Apache's broker pops it by default (``priorityOrderAsc``, ``priority.factor``
100, ``popFromRetryProbabilityForPriority`` 0): its queues from the highest id down, so a batch
takes the higher priorities first, and the retry topic last (a message that came back counts as the
lowest priority). Ordering is by queue, within one broker; a FIFO pop ignores it.

Where a new group starts (RocketMQ's PopMessageProcessor ``getInitOffset``): ``initMode`` 0 at the
queue's minimum; otherwise at 0 while the queue still holds its first message, else at its last
message. With nothing to take and ``pollTime`` > 0 the pop is parked on every queue it reads.
"""

from __future__ import annotations

import logging
import time

from rocketbox.cluster import ack_batch_format, receipt_handle
from rocketbox.cluster.acl.permissions import SUB
from rocketbox.cluster.acl.records import require
from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.filtering import SQL_SCAN_ENTRIES, sql_selector
from rocketbox.cluster.broker.pop_format import Checkpoint
from rocketbox.cluster.broker.pop_log import PopLog
from rocketbox.cluster.filter.expressions import parse_tags, tag_hashes_of
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import (PERM_READ, ProtocolError, ResponseCode, answers_refusals, field_int, field_str,
                                        pop_retry_topic, require_name)
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import PROPERTY_TAGS
from rocketbox.cluster.topic_attributes import PRIORITY
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

POP_BATCH_MAX = 32
# Pending checkpoints held in memory; past it pops are refused until acks or revives settle some.
PENDING_CHECKPOINTS_MAX = 100_000
# Ack records an ACK_MESSAGES writes in one put: a put's records go to one CommitLog segment together,
# so a huge batch is written in parts (~100 KiB each).
ACK_RECORDS_A_PUT = 1024
PROPERTY_MESSAGE_GROUP = "__SHARDINGKEY"   # RocketMQ 5's FIFO message group (MessageConst.PROPERTY_SHARDING_KEY)
INIT_MODE_MIN = 0


class PopProcessor:
    def __init__(self, ctx: BrokerContext, pop_log: PopLog):
        self.cfg = ctx.cfg
        self.store = ctx.store
        self.topics = ctx.topics
        self.offsets = ctx.offsets
        self.groups = ctx.groups
        self.pull_waiters = ctx.pull_waiters
        self.log = pop_log
        self.state = pop_log.state
        self.commits = pop_log.commits
        self.durability = ctx.durability
        self.clock = ctx.clock
        self.may_write = ctx.may_write

    # ------------------------------------------------------------ POP_MESSAGE

    @answers_refusals
    def on_pop(self, request: Command, reply) -> Command | None:
        group = require_name("group", field_str(request, "consumerGroup"))
        topic = field_str(request, "topic")
        max_count = max(1, min(field_int(request, "maxMsgNums", POP_BATCH_MAX), POP_BATCH_MAX))
        invisible_ms = field_int(request, "invisibleTime")
        poll_ms = min(max(field_int(request, "pollTime", 0), 0), self.cfg.pull_suspend_ms_max)
        order = request.fields.get("order", "false").lower() == "true"
        init_mode = field_int(request, "initMode", -1)
        if invisible_ms <= 0:
            raise ProtocolError(f"invisibleTime must be positive, not {invisible_ms}")
        if not self.may_write():
            return request.response(ResponseCode.SERVICE_NOT_AVAILABLE,
                                    remark=f"broker {self.cfg.broker_name} is not a writable master: pop from the master")
        topic_cfg = self.topics.get(topic)
        if topic_cfg is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"topic {topic} does not exist")
        if not topic_cfg.perm & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION, remark=f"topic {topic} is not readable")
        queue_id = field_int(request, "queueId", -1)
        if not -1 <= queue_id < topic_cfg.readQueueNums:
            raise ProtocolError(f"queueId {queue_id} is out of range: topic {topic} has "
                                f"{topic_cfg.readQueueNums} read queues")
        group_cfg = self.groups.ensure(group)
        if group_cfg is None:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    remark=f"subscription group [{group}] does not exist")
        if not group_cfg.consumeEnable:
            return request.response(ResponseCode.NO_PERMISSION, remark=f"subscription group no permission, {group}")
        if len(self.state) >= PENDING_CHECKPOINTS_MAX:
            return request.response(ResponseCode.SYSTEM_BUSY,
                                    remark=f"{PENDING_CHECKPOINTS_MAX} pops wait for acks here; retry later")
        expression = request.fields.get("exp", "*")
        selector = sql_selector(request.fields.get("expType"), expression, self.cfg.enable_property_filter)
        tags = parse_tags(expression) if selector is None else None
        tag_hashes = tag_hashes_of(expression) if selector is None else None
        by_priority = topic_cfg.message_type == PRIORITY and not order
        queue_ids = [queue_id] if queue_id >= 0 else range(topic_cfg.readQueueNums)
        queues = [(topic, q) for q in (reversed(queue_ids) if by_priority else queue_ids)]
        retry = None if order else (pop_retry_topic(group, topic), 0)
        pop = _Pop(group, topic, queues, max_count, invisible_ms, order, init_mode, tags, tag_hashes, selector,
                   retry_last=by_priority)
        deadline = time.monotonic() + poll_ms / 1000
        answered = []

        def serve(final: bool) -> bool:
            if answered:
                return True
            if not self.may_write():
                answered.append(True)
                reply(request.response(ResponseCode.SERVICE_NOT_AVAILABLE, remark="no longer a writable master"))
                return True
            try:
                response = self._serve(request, pop)
            except ProtocolError as exc:
                response = request.response(exc.code, remark=str(exc))
            if response is None:
                if not final:
                    return False
                response = request.response(ResponseCode.PULL_NOT_FOUND, {"restNum": "0"},
                                            remark=f"no message to pop from {topic} in {poll_ms} ms")
            answered.append(True)
            if response.code == ResponseCode.SUCCESS:
                # The messages are invisible to the group from this answer on: their checkpoints first.
                response = self.durability.answer(response, self.log.last_end, reply)
            if response is not None:
                reply(response)
            return True

        if serve(poll_ms == 0):
            return None
        if len(self.pull_waiters) >= self.cfg.parked_pulls_max:
            answered.append(True)
            return request.response(ResponseCode.SYSTEM_BUSY,
                                    remark=f"{self.cfg.parked_pulls_max} pulls already wait here; retry later")
        # The retry queue too, even before the revive timer first makes it: its first copy wakes this.
        for queue_topic, q in queues + ([retry] if retry else []):
            self.pull_waiters.park(queue_topic, q, deadline, serve)
        return None

    def _serve(self, request: Command, pop: "_Pop") -> Command | None:
        now_ms = self.clock.now_ms()
        records: list[bytes] = []
        handles: list[str] = []
        attempts: list[int] = []
        rest = 0
        queues = pop.queues
        retry = pop_retry_topic(pop.group, pop.topic)
        if not pop.order and self.topics.get(retry) is not None:
            # What came back is served first; on a PRIORITY topic last, as the lowest priority.
            queues = [*queues, (retry, 0)] if pop.retry_last else [(retry, 0), *queues]
        for queue_topic, queue_id in queues:
            room = pop.max_count - len(records)
            taken, scanned_to = self._take(pop, queue_topic, queue_id, room) if room > 0 else ([], 0)
            if taken:
                ck = Checkpoint(pop.group, pop.topic, queue_id, queue_topic != pop.topic, now_ms, pop.invisible_ms,
                                pop.order, [t[0] for t in taken], [t[1] for t in taken], [t[2] for t in taken])
                self.log.checkpoint(ck)
                if not pop.order and scanned_to > taken[-1][0] + 1:
                    # What it skipped past its last message, committed with the checkpoint's commit.
                    self.commits.commit(pop.group, queue_topic, queue_id, scanned_to)
                for (queue_offset, phys, attempt, raw) in taken:
                    records.append(raw)
                    attempts.append(attempt)
                    handles.append(receipt_handle.ReceiptHandle(
                        ck.ck_offset, now_ms, pop.invisible_ms, ck.retry, queue_id, queue_offset, phys,
                        self.cfg.broker_name).encode())
            committed = self.commits.query(pop.group, queue_topic, queue_id) or 0
            rest += max(0, self.store.max_offset(queue_topic, queue_id) - committed)
        if not records:
            return None
        fields = {"popTime": str(now_ms), "invisibleTime": str(pop.invisible_ms), "restNum": str(rest),
                  "handles": ",".join(handles), "attempts": ",".join(map(str, attempts))}
        return request.response(ResponseCode.SUCCESS, fields, b"".join(records))

    def _start_offset(self, pop: "_Pop", queue_topic: str, queue_id: int) -> int:
        committed = self.commits.query(pop.group, queue_topic, queue_id)
        if committed is not None:
            return committed
        low, high = self.store.min_offset(queue_topic, queue_id), self.store.max_offset(queue_topic, queue_id)
        if pop.init_mode == INIT_MODE_MIN or queue_topic != pop.topic or low == 0:
            start = low
        else:
            start = max(low, high - 1)
        self.offsets.commit(pop.group, queue_topic, queue_id, start)
        return start

    def _take(self, pop: "_Pop", queue_topic: str, queue_id: int,
              room: int) -> tuple[list[tuple[int, int, int, bytes]], int]:
        """(queue offset, CommitLog offset, attempt, record bytes) of the messages popped from one queue,
        and the queue offset it read up to."""
        key = (pop.group, queue_topic, queue_id)
        if pop.order and self.state.is_blocked(key):
            return [], 0
        start = self._start_offset(pop, queue_topic, queue_id)
        owed = self.state.redeliveries.get(key) if pop.order else None
        scan = room if pop.tags is None and pop.selector is None and owed is None else max(room, SQL_SCAN_ENTRIES)
        entries = self.store.queue_entries(queue_topic, queue_id, start, scan)
        tag_hashes = pop.tag_hashes
        taken: list[tuple[int, int, int, bytes]] = []
        message_groups: set[str] = set()
        scanned_to = start
        for queue_offset, phys, size, tag_hash in entries:
            if owed is not None and queue_offset <= owed.end_offset and queue_offset not in owed.attempts:
                scanned_to = queue_offset + 1   # acked before its checkpoint was revived
                continue
            if tag_hashes is not None and tag_hash not in tag_hashes:
                scanned_to = queue_offset + 1
                continue
            raw = self.store.commitlog.read(phys, size)
            record = fmt.decode_at(raw, 0, check_crc=False) if raw is not None else None
            if type(record) is not fmt.Record:
                _limited.warning("skipped", "pop of %s:%d skips offset %d: no record at CommitLog offset %d",
                                 queue_topic, queue_id, queue_offset, phys)
                scanned_to = queue_offset + 1
                continue
            properties = record.properties
            if not pop.matches(properties):
                scanned_to = queue_offset + 1
                continue
            if pop.order:
                message_group = properties.get(PROPERTY_MESSAGE_GROUP)
                if message_group is not None:
                    if message_group in message_groups:
                        break   # its next message waits for the ack of this one
                    message_groups.add(message_group)
            attempt = owed.attempts.get(queue_offset) if owed is not None else None
            taken.append((queue_offset, phys, attempt or record.reconsume_times + 1, bytes(raw)))
            scanned_to = queue_offset + 1
            if len(taken) >= room:
                break
        if not taken and scanned_to > start:
            # Nothing this group wants up to here: the next pop reads on from past it (after any
            # pop's commit still held for its checkpoint).
            self.commits.commit(pop.group, queue_topic, queue_id, scanned_to)
            self.state.forget_paid(key, scanned_to)
        return taken, scanned_to

    # ------------------------------------------------------------ ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME

    def _pending_of(self, request: Command, text: str | None = None):
        """The handle (``extraInfo``, or ``text``: one of ACK_MESSAGES') and the pop it acks."""
        group = require_name("group", field_str(request, "consumerGroup"))
        try:
            handle = receipt_handle.decode(field_str(request, "extraInfo") if text is None else text)
        except receipt_handle.InvalidReceiptHandle as exc:
            raise ProtocolError(str(exc)) from None
        if not self.may_write():
            raise ProtocolError(f"broker {self.cfg.broker_name} is not a writable master",
                                ResponseCode.SERVICE_NOT_AVAILABLE)
        pending = self.state.ackable(handle.ck_offset, group, handle.queue_offset)
        topic = request.fields.get("topic")
        if pending is None or (topic and topic != pending.ck.topic):
            raise _nothing_to_ack(group)
        require(request, {pending.ck.topic: SUB})   # a request without a topic was checked for the group only
        return handle, pending

    @answers_refusals
    def on_ack(self, request: Command, reply) -> Command | None:
        handle, pending = self._pending_of(request)
        result = self.log.ack((pending, handle.queue_offset))
        self._wake_if_unblocked(pending)
        # Answered once the ack record is as durable as a send (durability.py).
        return self.durability.answer(request.response(ResponseCode.SUCCESS), result.end_phys_offset, reply)

    @answers_refusals
    def on_ack_batch(self, request: Command, reply) -> Command | None:
        """ACK_MESSAGES (ack_batch_format.py): each handle acked as ACK_MESSAGE acks it, its own outcome
        in the answer's body; the ack records of up to ACK_RECORDS_A_PUT handles in one put (a put a
        handle was most of an ack's broker time), one durability wait for them all."""
        try:
            handles = ack_batch_format.decode_handles(request.body)
        except ValueError as exc:
            raise ProtocolError(f"malformed ACK_MESSAGES body: {exc}") from None
        outcomes: list = []
        ackable: list[tuple[int, tuple]] = []   # (place in outcomes, (pending, queue offset))
        asked = set()
        for text in handles:
            try:
                handle, pending = self._pending_of(request, text)
                if (handle.ck_offset, handle.queue_offset) in asked:   # the batch names it twice
                    raise _nothing_to_ack(pending.ck.group)
            except ProtocolError as exc:
                outcomes.append((exc.code, str(exc)))
                continue
            asked.add((handle.ck_offset, handle.queue_offset))
            ackable.append((len(outcomes), (pending, handle.queue_offset)))
            outcomes.append(None)
        end = -1
        for first in range(0, len(ackable), ACK_RECORDS_A_PUT):
            part = ackable[first:first + ACK_RECORDS_A_PUT]
            try:
                result = self.log.ack(*(ack for _, ack in part))
            except ProtocolError as exc:
                outcome = (exc.code, str(exc))
            else:
                end = max(end, result.end_phys_offset)
                outcome = (ResponseCode.SUCCESS, "")
                for _, (pending, _) in part:
                    self._wake_if_unblocked(pending)
            for place, _ in part:
                outcomes[place] = outcome
        response = request.response(ResponseCode.SUCCESS, body=ack_batch_format.encode_outcomes(outcomes))
        return response if end < 0 else self.durability.answer(response, end, reply)

    @answers_refusals
    def on_change_invisible_time(self, request: Command, reply) -> Command | None:
        handle, pending = self._pending_of(request)
        invisible_ms = field_int(request, "invisibleTime")
        if invisible_ms <= 0:
            raise ProtocolError(f"invisibleTime must be positive, not {invisible_ms}")
        old = pending.ck
        index = old.queue_offsets.index(handle.queue_offset)
        now_ms = self.clock.now_ms()
        ck = Checkpoint(old.group, old.topic, old.queue_id, old.retry, now_ms, invisible_ms, old.order,
                        [handle.queue_offset], [old.commitlog_offsets[index]], [old.attempts[index]])
        # The new checkpoint first: a crash between the two leaves the message owed twice, never lost.
        self.log.checkpoint(ck)
        result = self.log.ack((pending, handle.queue_offset))
        new_handle = receipt_handle.ReceiptHandle(ck.ck_offset, now_ms, invisible_ms, ck.retry, ck.queue_id,
                                                  handle.queue_offset, handle.commitlog_offset, handle.broker_name)
        response = request.response(ResponseCode.SUCCESS, {"receiptHandle": new_handle.encode(),
                                                           "popTime": str(now_ms), "invisibleTime": str(invisible_ms)})
        return self.durability.answer(response, result.end_phys_offset, reply)

    def _wake_if_unblocked(self, pending) -> None:
        if pending.ck.order and not self.state.is_blocked(pending.key):
            self.pull_waiters.wake([(pending.queue_topic, pending.ck.queue_id)])


def _nothing_to_ack(group: str) -> ProtocolError:
    return ProtocolError(f"no message to ack for {group}: the handle's message was acked already, or its "
                         f"invisible time passed and it was delivered again", ResponseCode.NO_MESSAGE)


class _Pop:
    """One POP_MESSAGE's terms."""

    def __init__(self, group, topic, queues, max_count, invisible_ms, order, init_mode, tags, tag_hashes, selector,
                 retry_last=False):
        self.group, self.topic, self.queues, self.retry_last = group, topic, queues, retry_last
        self.max_count, self.invisible_ms, self.order, self.init_mode = max_count, invisible_ms, order, init_mode
        # Tags are matched by their ConsumeQueue hash first, then by name (two tags may share a hash).
        self.tags, self.tag_hashes, self.selector = tags, tag_hashes, selector

    def matches(self, properties: dict[str, str]) -> bool:
        if self.selector is not None:
            return self.selector.matches(properties)
        return self.tags is None or properties.get(PROPERTY_TAGS) in self.tags
