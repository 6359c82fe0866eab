"""RECALL_MESSAGE (370, RocketMQ 5.3.2's RecallMessageProcessor): cancel a timed message before it is due.

A send of a timed message (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) answers a recall handle
(``message/recall_handle.py``: topic, broker, TIMER_OUT_MS + 1, UNIQ_KEY). A recall that passes
RocketMQ's checks, in its order and with its codes and remarks (off: NO_PERMISSION; a slave:
SLAVE_NOT_AVAILABLE; no topic: TOPIC_NOT_EXIST; a handle unreadable, of another topic or broker, or
whose time passed or lies beyond the timer's 3 days: ILLEGAL_OPERATION), is kept in the
``RecallLedger`` and answered SUCCESS with the message's id; the schedule service drops the message
where it meets it (every hop: ``ScheduleService._deliver``). A delay-level message has no handle.

Where RocketMQ writes a marker message into its timer wheel, RocketBox keeps the recalled keys in
``config/timerRecall.json`` (atomic and fsynced before the answer, so a recall answered SUCCESS
outlives a SIGKILL), at most ``RECALLS_MAX`` not yet met. The file is the master's own: a slave
promoted by failover does not know the recalls (docs/ARCHITECTURE.md, "Known gaps").
"""

from __future__ import annotations

import logging

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.json_files import read_json, write_json
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.message import recall_handle
from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals, field_str
from rocketbox.cluster.shm import durable, paths
from rocketbox.cluster.shm.schedule_format import TIMER_MAX_DELAY_MS
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# Recalls kept at once (each is a line of the file rewritten on every recall).
RECALLS_MAX = 10_000
# A recalled message not met this long after its time is taken as gone (its topic deleted, its
# record expired): the recall is forgotten, so the ledger does not fill with dead keys.
FORGET_AFTER_MS = 3_600_000
# What RocketMQ adds to every recall answer (its regionId default).
REGION = "DefaultRegion"


def ledger_key(topic: str, message_id: str) -> str:
    """RocketMQ's delete key (TimerMessageStore.buildDeleteKey)."""
    return f"{topic}+{message_id}"


class RecallLedger:
    """Recalled timed messages not yet met by the schedule service: delete key -> the handle's time."""

    def __init__(self, store_dir: str):
        durable.makedirs(paths.config_dir(store_dir))
        self.path = paths.config_path(store_dir, "timerRecall")
        stored = read_json(self.path, {})
        self._due: dict[str, int] = {k: v for k, v in stored.items() if isinstance(v, int)} \
            if isinstance(stored, dict) else {}

    def __len__(self) -> int:
        return len(self._due)

    def add(self, topic: str, message_id: str, due_ms: int, now_ms: int) -> bool:
        """Kept durably; False when the ledger is full of recalls not yet due."""
        key = ledger_key(topic, message_id)
        if key not in self._due:
            self._due = {k: t for k, t in self._due.items() if t + FORGET_AFTER_MS > now_ms}
            if len(self._due) >= RECALLS_MAX:
                return False
        self._due[key] = due_ms
        write_json(self.path, self._due)
        return True

    def take(self, topic: str, message_id: str | None) -> bool:
        """Whether this message was recalled; the recall is spent once met."""
        if not self._due or not message_id:
            return False
        if self._due.pop(ledger_key(topic, message_id), None) is None:
            return False
        write_json(self.path, self._due)
        return True


class RecallProcessor:
    def __init__(self, ctx: BrokerContext, ledger: RecallLedger):
        self.cfg = ctx.cfg
        self.topics = ctx.topics
        self.clock = ctx.clock
        self.may_write = ctx.may_write
        self.ledger = ledger
        self.recalls = 0

    @answers_refusals
    def on_recall(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        handle_text = field_str(request, "recallHandle")
        if not self.cfg.recall_message_enabled:
            raise ProtocolError("recall failed, operation is forbidden", ResponseCode.NO_PERMISSION)
        if self.cfg.is_slave:
            raise ProtocolError("recall failed, broker service not available", ResponseCode.SLAVE_NOT_AVAILABLE)
        if not self.may_write():
            raise ProtocolError("recall failed, broker service not available", ResponseCode.SERVICE_NOT_AVAILABLE)
        if self.topics.get(topic) is None:
            raise ProtocolError(f"recall failed, the topic[{topic}] not exist", ResponseCode.TOPIC_NOT_EXIST)
        try:
            handle = recall_handle.decode(handle_text)
        except ValueError as exc:
            raise ProtocolError(str(exc), ResponseCode.ILLEGAL_OPERATION) from None
        if handle.topic != topic:
            raise ProtocolError("recall failed, topic not match", ResponseCode.ILLEGAL_OPERATION)
        if handle.broker_name != self.cfg.broker_name:
            raise ProtocolError("recall failed, broker service not available", ResponseCode.ILLEGAL_OPERATION)
        due_ms = recall_handle.parse_timestamp(handle.timestamp)
        now_ms = self.clock.now_ms()
        if not 0 < due_ms - now_ms < TIMER_MAX_DELAY_MS:
            raise ProtocolError("recall failed, timestamp invalid", ResponseCode.ILLEGAL_OPERATION)
        if not self.ledger.add(topic, handle.message_id, due_ms, now_ms):
            _limited.warning("recalls-full", "recall of %s in %s refused: %d recalls wait already", handle.message_id,
                             topic, len(self.ledger))
            return request.response(ResponseCode.SYSTEM_ERROR, {"MSG_REGION": REGION},
                                    remark="recall failed, execute error")
        self.recalls += 1
        return request.response(ResponseCode.SUCCESS, {"msgId": handle.message_id, "MSG_REGION": REGION})
