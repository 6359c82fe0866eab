"""The messages pages' data: lookups (by offset message id, by unique key, by key within a time
range, by queue and offset) and one message's detail: properties, a body preview (text when it
decodes as UTF-8, else hex), each consumer group's consume state, and its retries."""

from __future__ import annotations

from rocketbox.cluster.console.forms import FormError, int_field, text_field, time_field
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.protocol import MessageQueue
from rocketbox.cluster.shm.commitlog_format import parse_offset_msg_id

PREVIEW_BYTES = 4096
LOOKUPS = ("id", "unique", "key", "offset")


def message_row(m) -> dict:
    return {"topic": m.topic, "broker": m.broker_name, "queueId": m.queue_id, "queueOffset": m.queue_offset,
            "msgId": m.msg_id, "offsetMsgId": m.offset_msg_id, "tags": m.tags or "",
            "keys": " ".join(m.keys or ()), "storeTimestamp": m.store_timestamp_ms,
            "bornTimestamp": m.born_timestamp_ms, "reconsumeTimes": m.reconsume_times,
            "bodySize": len(m.body)}


def body_preview(body: bytes) -> dict:
    """Text when the (first PREVIEW_BYTES of the) body is UTF-8 without control characters other
    than whitespace, else a hex dump of those bytes."""
    head = body[:PREVIEW_BYTES]
    try:
        text = head.decode("utf-8")
        if all(c.isprintable() or c in "\n\r\t" for c in text):
            return {"format": "text", "preview": text, "truncated": len(body) > PREVIEW_BYTES}
    except UnicodeDecodeError:
        pass
    lines = [f"{i:08x}  {head[i:i + 16].hex(' ')}" for i in range(0, len(head), 16)]
    return {"format": "hex", "preview": "\n".join(lines), "truncated": len(body) > PREVIEW_BYTES}


def lookup(admin, form) -> tuple[str, list]:
    """(what was asked, the messages found) for the search form's ``by``: id, unique, key, offset."""
    by = text_field(form, "by", default="id") or "id"
    if by not in LOOKUPS:
        raise FormError(f"look up by one of {', '.join(LOOKUPS)}, not {by[:20]!r}")
    if by == "id":
        msg_id = text_field(form, "msg_id", required=True, max_len=64)
        try:
            parse_offset_msg_id(msg_id)
        except ValueError:
            raise FormError(f"{msg_id!r} is not an offset message id (32 hex characters); a producer's msg id "
                            f"is a unique key: look it up with its topic") from None
        return f"offset message id {msg_id}", [admin.view_message(msg_id)]
    topic = text_field(form, "topic", required=True, max_len=127)
    limit = int_field(form, "max", 1, 64, default=32)
    if by == "unique":
        key = text_field(form, "key", required=True, max_len=128)
        return f"unique key {key} in {topic}", admin.query_by_unique_key(topic, key, limit)
    if by == "key":
        key = text_field(form, "key", required=True, max_len=128)
        begin, end = time_field(form, "begin") or 0, time_field(form, "end")
        if end is not None and end < begin:
            raise FormError("the end of the time range is before its beginning")
        return f"key {key} in {topic}", admin.query_by_key(topic, key, limit, begin, end)
    broker = text_field(form, "broker", required=True, max_len=127)
    queue_id = int_field(form, "queue", 0, 65535)
    offset = int_field(form, "offset", 0, 2 ** 62)
    message = admin.message_at(MessageQueue(topic, broker, queue_id), offset)
    return f"{topic} {broker}:{queue_id}@{offset}", [message] if message is not None else []


def message_detail(admin, offset_msg_id: str) -> dict:
    try:
        parse_offset_msg_id(offset_msg_id)
    except ValueError:
        raise FormError(f"{offset_msg_id[:64]!r} is not an offset message id (32 hex characters)") from None
    m = admin.view_message(offset_msg_id)
    tracks = admin.message_track(m)
    try:
        retries = [message_row(r) for r in admin.message_retries(m, [t["consumerGroup"] for t in tracks])]
        retries_problem = ""
    except ClientError as exc:
        retries, retries_problem = [], str(exc)
    return {**message_row(m), "properties": dict(sorted(m.properties.items())), "body": body_preview(m.body),
            "tracks": tracks, "retries": retries, "retriesProblem": retries_problem}
