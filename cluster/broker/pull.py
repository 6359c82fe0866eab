"""PULL_MESSAGE with long polling; the response body is raw CommitLog records.

Response codes and ``nextBeginOffset`` follow RocketMQ's PullMessageProcessor
(rocketmq-protocol.md §5.4). With nothing new and the SUSPEND flag set, the pull is
parked until a dispatch touches its queue or its hold time ends.
"""

from __future__ import annotations

import logging
import os
import time

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster import _native
from rocketbox.cluster.broker.filtering import SQL_SCAN_ENTRIES, select_records, sql_selector
from rocketbox.cluster.filter.expressions import tag_hashes_of
from rocketbox.cluster.config import name_problem
from rocketbox.cluster.protocol import (PERM_READ, PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUBSCRIPTION, PULL_FLAG_SUSPEND,
                                        ResponseCode, answers_refusals, field_int, field_str)
from rocketbox.cluster.message.record_format import phys_offset_at
from rocketbox.cluster.shm.store import GetMessageStatus as GetStatus
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)



def memory_share_bytes(ratio: float = 0.4) -> int:
    """RocketMQ's accessMessageInMemoryMaxRatio applied to this machine's physical memory."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * ratio)
    except (ValueError, OSError):
        return 1 << 30


class PullProcessor:
    def __init__(self, ctx: BrokerContext, ha):
        """``ha``: the broker's HA side (a master suggests its slave for reads far behind)."""
        self.cfg = cfg = ctx.cfg
        # The ClientRegistry, whose heartbeats registered the subscriptions of pulls that carry none.
        self.clients = ctx.clients
        self.store = ctx.store
        self.topics = ctx.topics
        self.offsets = ctx.offsets
        self.groups = ctx.groups
        # (topic, group) -> messages served: consumerProgress' consume TPS (stats.py samples it).
        self.served_by_group: dict[tuple[str, str], int] = {}
        self.served_bytes_by_group: dict[tuple[str, str], int] = {}
        self.pulls_by_group: dict[tuple[str, str], int] = {}   # pulls that found messages (statsAll's avgpt)
        # (group, topic, queue) -> the offset the group's last pull reached: inflight = it - committed.
        self.pulled_to: dict[tuple[str, str, int], int] = {}
        self.pull_waiters = ctx.pull_waiters
        self.ha = ha
        self.messages_served = 0
        self.read_distance = self.cfg.slave_read_distance_bytes or memory_share_bytes()
        self.suggested_slave = 0    # pulls a master sent to its slave
        self.suggested_master = 0   # pulls a slave sent back to its master

    @answers_refusals
    def on_pull(self, request: Command, reply) -> Command | None:
        topic = field_str(request, "topic")
        group = field_str(request, "consumerGroup")
        queue_id = field_int(request, "queueId")
        offset = field_int(request, "queueOffset")
        max_count = max(1, min(field_int(request, "maxMsgNums", 32), self.cfg.pull_batch_count_max))
        sys_flag = field_int(request, "sysFlag", 0)
        suspend_ms = min(field_int(request, "suspendTimeoutMillis", 15_000), self.cfg.pull_suspend_ms_max)
        topic_cfg = self.topics.get(topic)
        if topic_cfg is None:
            return request.response(ResponseCode.TOPIC_NOT_EXIST, remark=f"topic {topic} does not exist")
        if not topic_cfg.perm & PERM_READ:
            return request.response(ResponseCode.NO_PERMISSION, remark=f"topic {topic} is not readable")
        if not 0 <= queue_id < topic_cfg.readQueueNums:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    remark=f"queueId {queue_id} is out of range: topic {topic} has "
                                           f"{topic_cfg.readQueueNums} read queues")
        refusal = self._group_refusal(request, group)
        if refusal is not None:
            return refusal
        if sys_flag & PULL_FLAG_SUBSCRIPTION:
            subscription, expression_type = request.fields.get("subscription", "*"), request.fields.get("expressionType")
        else:
            registered = self._registered_subscription(request, group, topic)
            if isinstance(registered, Command):
                return registered
            subscription, expression_type = registered.expression, registered.expression_type
        # A tag subscription filters on ConsumeQueue hashes; an SQL92 one on each record's properties.
        selector = sql_selector(expression_type, subscription, self.cfg.enable_property_filter)
        tag_hashes = tag_hashes_of(subscription) if selector is None else None
        if sys_flag & PULL_FLAG_COMMIT_OFFSET:
            commit_offset = field_int(request, "commitOffset", -1)
            # Same rules as UPDATE_CONSUMER_OFFSET: a valid group, an offset inside the queue.
            if 0 <= commit_offset <= self.store.readable_end(topic, queue_id) and not name_problem("group", group):
                self.offsets.commit(group, topic, queue_id, commit_offset)
        may_suspend = bool(sys_flag & PULL_FLAG_SUSPEND) and suspend_ms > 0
        deadline = time.monotonic() + suspend_ms / 1000

        def serve(final: bool) -> bool:
            response = self._serve(request, topic, queue_id, offset, max_count, tag_hashes, selector)
            if response is None:
                if not final:
                    return False
                response = self._not_found(request, topic, queue_id, offset)
            reply(response)
            return True

        if serve(not may_suspend):
            return None
        if len(self.pull_waiters) >= self.cfg.parked_pulls_max:
            # Every parked pull holds memory until it is answered: refuse past the cap.
            reply(request.response(ResponseCode.SYSTEM_BUSY,
                                   remark=f"{self.cfg.parked_pulls_max} pulls already wait here; retry later"))
            return None
        self.pull_waiters.park(topic, queue_id, deadline, serve)
        return None

    def _group_refusal(self, request, group: str) -> Command | None:
        """RocketMQ's subscription group checks: the group must exist (or be made now) and may consume."""
        group_cfg = self.groups.get(group)
        if group_cfg is None and not name_problem("group", group):
            group_cfg = self.groups.ensure(group)
        if group_cfg is None and not self.groups.auto_create:
            return request.response(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                    remark=f"subscription group [{group}] does not exist")
        if group_cfg is not None and not group_cfg.consumeEnable:
            return request.response(ResponseCode.NO_PERMISSION, remark=f"subscription group no permission, {group}")
        return None

    def _registered_subscription(self, request, group: str, topic: str):
        """The subscription of a pull without FLAG_SUBSCRIPTION (the Java push consumer's default: its
        heartbeat registered it), or the refusal RocketMQ's PullMessageProcessor answers."""
        registered = self.clients.subscription(group, topic)
        if registered is None:
            return request.response(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                    remark=f"the consumer's subscription not exist: group {group} registered none "
                                           f"for topic {topic} (a pull without FLAG_SUBSCRIPTION uses the "
                                           f"heartbeat's)")
        if registered.sub_version < field_int(request, "subVersion", 0):
            return request.response(ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                    remark=f"the consumer's subscription not latest: group {group}, topic {topic}")
        return registered

    def _not_found(self, request, topic, queue_id, offset) -> Command:
        return request.response(ResponseCode.PULL_NOT_FOUND, self._offset_fields(topic, queue_id, offset))

    def _offset_fields(self, topic, queue_id, next_begin) -> dict[str, str]:
        return {"nextBeginOffset": str(next_begin),
                "minOffset": str(self.store.min_offset(topic, queue_id)),
                "maxOffset": str(self.store.max_offset(topic, queue_id)),
                "suggestWhichBrokerId": "0"}

    def _suggest(self, payload) -> int:
        """Which broker id the next pull of this queue should go to (RocketMQ's suggestWhichBrokerId)."""
        distance = self.store.commitlog.write_pos - phys_offset_at(payload)
        far = self.cfg.slave_read_enabled and distance > self.read_distance
        if self.cfg.is_slave:
            if far:
                return self.cfg.broker_id
            self.suggested_master += 1
            return 0
        if far and self.ha.in_sync:
            self.suggested_slave += 1
            # The lowest slave in sync: 1 with static roles; with a controller a slave's id is its replica id.
            return min(self.ha.in_sync_ids, default=1)
        return 0

    def _serve(self, request, topic, queue_id, offset, max_count, tag_hashes, selector=None) -> Command | None:
        """The answer, or None when the consumer is caught up (park or PULL_NOT_FOUND)."""
        scan_count = max_count if selector is None else max(max_count, SQL_SCAN_ENTRIES)
        result = self.store.get_messages(topic, queue_id, offset, scan_count,
                                         self.cfg.pull_batch_bytes_max, tag_hashes, joined=True)
        status = result.status
        next_begin, payload, count = result.next_begin_offset, result.payload, result.message_count
        if selector is not None and status == GetStatus.FOUND:
            # RocketMQ's isMatchedByCommitLog: none matching still moves nextBeginOffset past them all.
            payload, count, stopped_at = select_records(payload, count, selector, max_count)
            if stopped_at is not None:
                next_begin = stopped_at
            if not count:
                status = GetStatus.NO_MATCHED_MESSAGE
        fields = {"nextBeginOffset": str(next_begin), "minOffset": str(result.min_offset),
                  "maxOffset": str(result.max_offset), "suggestWhichBrokerId": "0"}
        if status == GetStatus.FOUND:
            self.messages_served += count
            group = request.fields.get("consumerGroup", "")
            key = (topic, group)
            self.served_by_group[key] = self.served_by_group.get(key, 0) + count
            self.served_bytes_by_group[key] = self.served_bytes_by_group.get(key, 0) + len(payload)
            self.pulls_by_group[key] = self.pulls_by_group.get(key, 0) + 1
            self.pulled_to[(group, topic, queue_id)] = next_begin
            fields["suggestWhichBrokerId"] = str(self._suggest(payload))
            if self.cfg.store.record_crc_enabled:
                # The store's own proof of a whole record, not the message's: consumers never see it.
                payload = _native.delivered_records(payload)
            return request.response(ResponseCode.SUCCESS, fields, payload)
        if status == GetStatus.OFFSET_OVERFLOW_ONE:
            return None
        if status in (GetStatus.NO_MESSAGE_IN_QUEUE, GetStatus.NO_MATCHED_LOGIC_QUEUE):
            if offset == 0:
                return None
            fields["nextBeginOffset"] = "0"
            return request.response(ResponseCode.PULL_OFFSET_MOVED, fields,
                                    remark=f"queue {topic}:{queue_id} is empty; offset {offset} moved to 0")
        if status == GetStatus.NO_MATCHED_MESSAGE:
            return request.response(ResponseCode.PULL_RETRY_IMMEDIATELY, fields)
        if status == GetStatus.OFFSET_TOO_SMALL:
            fields["nextBeginOffset"] = str(result.min_offset)
            return request.response(ResponseCode.PULL_OFFSET_MOVED, fields,
                                    remark=f"offset {offset} is below the queue's minimum {result.min_offset}")
        if status == GetStatus.OFFSET_OVERFLOW_BADLY:
            fields["nextBeginOffset"] = str(result.max_offset)
            return request.response(ResponseCode.PULL_OFFSET_MOVED, fields,
                                    remark=f"offset {offset} is past the queue's maximum {result.max_offset}")
        return request.response(ResponseCode.SYSTEM_ERROR, fields, remark=f"store answered {status.name}")
