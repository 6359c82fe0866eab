"""Reading stored messages back by id, key or time: VIEW_MESSAGE_BY_ID (33), QUERY_MESSAGE (12),
GET_EARLIEST_MSG_STORETIME (32).

QUERY_MESSAGE as RocketMQ's Java client asks it (MQAdminImpl.queryMessage: every master of the
topic at once, each answer's header decoded into QueryMessageResponseHeader, whose two fields are
required): the answer carries ``indexLastUpdateTimestamp`` and ``indexLastUpdatePhyoffset`` (the
newest indexed record's store time and CommitLog offset) whether found or not; a query for a unique
key (extField ``_UNIQUE_KEY_QUERY`` true: viewMessage by UNIQ_KEY, mqadmin queryMsgByUniqueKey and
queryMsgTraceById) reads up to ``defaultQueryMaxNum`` (32) whatever maxNum says, as RocketMQ's
QueryMessageProcessor does. Bodies are records as consumers get them (``delivered_records``).
"""

from __future__ import annotations

from rocketbox.cluster import _native
from rocketbox.cluster.acl.records import readable_records, require_record
from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals, field_int, field_str
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.wire_format import Command

# MixAll.UNIQUE_MSG_QUERY_FLAG and MessageStoreConfig.defaultQueryMaxNum / maxMsgsNumBatch.
UNIQUE_KEY_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
UNIQUE_KEY_QUERY_MAX = 32
QUERY_MAX = 64
# QueryMessageRequestHeader's endTimestamp is a Java long: Long.MAX_VALUE means "until now".
_TIME_MAX = (1 << 63) - 1


class MessageQueries:
    def __init__(self, store):
        self.store = store

    def _record_bytes(self, phys_offset: int) -> bytes | None:
        record = self.store.read_record(phys_offset)
        return None if record is None else self.store.commitlog.read(phys_offset, record.total_size)

    @answers_refusals
    def on_view_message(self, request: Command, reply=None) -> Command:
        if "msgId" in request.fields:
            try:
                _, _, phys_offset = parse_offset_msg_id(request.fields["msgId"])
            except ValueError as exc:
                raise ProtocolError(f"not an offset message id: {exc}") from None
        else:
            phys_offset = field_int(request, "offset")
        record = self.store.read_record(phys_offset)
        if record is None:
            return request.response(ResponseCode.SYSTEM_ERROR,
                                    remark=f"no message at CommitLog offset {phys_offset}")
        require_record(request, record)   # an offset names no topic: the record's own is checked
        raw = self.store.commitlog.read(phys_offset, record.total_size)
        return request.response(ResponseCode.SUCCESS, body=_native.delivered_records(raw))

    @answers_refusals
    def on_query_message(self, request: Command, reply=None) -> Command:
        topic = field_str(request, "topic")
        key = field_str(request, "key")
        if request.fields.get(UNIQUE_KEY_QUERY_FLAG) == "true":
            max_num = UNIQUE_KEY_QUERY_MAX
        else:
            max_num = max(1, min(field_int(request, "maxNum", 32), QUERY_MAX))
        begin = field_int(request, "beginTimestamp", 0)
        end = min(field_int(request, "endTimestamp", _TIME_MAX), _TIME_MAX)
        indexed_ms, indexed_phys = self.store.index.last_update()
        fields = {"indexLastUpdateTimestamp": str(indexed_ms), "indexLastUpdatePhyoffset": str(indexed_phys)}
        records = readable_records(request, self.store.query_by_key(topic, key, max_num, begin, end))
        raws = [raw for raw in (self._record_bytes(r.phys_offset) for r in records) if raw is not None]
        if not raws:
            return request.response(ResponseCode.QUERY_NOT_FOUND, fields,
                                    remark=f"no message with key {key} in topic {topic} in that time range")
        return request.response(ResponseCode.SUCCESS, fields, _native.delivered_records(b"".join(raws)))

    @answers_refusals
    def on_earliest_msg_store_time(self, request: Command, reply=None) -> Command:
        """The store time of the queue's oldest message still kept; -1 when it holds none (RocketMQ's
        getEarliestMessageTime)."""
        topic = field_str(request, "topic")
        queue_id = field_int(request, "queueId")
        stored_ms = self.store.store_timestamp_at(topic, queue_id, self.store.min_offset(topic, queue_id))
        return request.response(ResponseCode.SUCCESS, {"timestamp": str(stored_ms or -1)})
