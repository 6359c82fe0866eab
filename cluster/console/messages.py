"""The messages pages' data: lookups (by message id of either kind, ``client/message_lookup.py``;
by unique key, by key within a time range, by queue and offset) and one message's detail:
properties, a body preview (text when it decodes as UTF-8, else hex), each consumer group's
consume state, and its retries."""

from __future__ import annotations

from rocketbox.cluster.client.message_lookup import application_topics, messages_by_id
from rocketbox.cluster.console.forms import FormError, int_field, text_field, time_field
from rocketbox.cluster.errors import ClientError, NoRouteError
from rocketbox.cluster.protocol import MessageQueue
from rocketbox.cluster.zmq_transport import TransportError

PREVIEW_BYTES = 4096
LOOKUPS = ("id", "unique", "key", "offset")
# An offset msg id and a RocketMQ 4 msg id are 32 hex characters, a RocketMQ 5 client's 34.
MSG_ID_MAX = 64


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


def topic_choices(admin) -> list[str]:
    """The topics the forms suggest: applications' (none when the NameServers do not answer)."""
    try:
        return application_topics(admin.topic_list())
    except (ClientError, TransportError):
        return []


def lookup(admin, form) -> tuple[str, list]:
    """(what was asked, the messages found) for the search form's ``by``: id, unique, key, offset."""
    by = text_field(form, "by", default="id") or "id"
    if by not in LOOKUPS:
        raise FormError(f"look up by one of {', '.join(LOOKUPS)}, not {by[:20]!r}")
    if by == "id":
        msg_id = text_field(form, "msg_id", required=True, max_len=MSG_ID_MAX)
        topic = text_field(form, "topic", max_len=127) or None
        return f"message id {msg_id}" + (f" in {topic}" if topic else ""), messages_by_id(admin, msg_id, topic)
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


def message_detail(admin, msg_id: str, topic: str | None = None) -> dict:
    """One message by either of its ids (the first stored, when a retried send stored it twice)."""
    if len(msg_id) > MSG_ID_MAX:
        raise FormError(f"a message id is at most {MSG_ID_MAX} characters, not {len(msg_id)}")
    found = messages_by_id(admin, msg_id, topic)
    if not found:
        raise NoRouteError(f"no message has the id {msg_id}: it is no offset message id of this cluster's brokers, "
                           f"nor a msg id (UNIQ_KEY) in " + (f"topic {topic}" if topic else "any topic"))
    m = found[0]
    tracks = admin.message_track(m)
    try:
        retries = [message_row(r) for r in admin.message_retries(m, [t["consumerGroup"] for t in tracks])]
        retries_problem = ""
    except ClientError as exc:
        retries, retries_problem = [], str(exc)
    return {**message_row(m), "properties": dict(sorted(m.properties.items())), "body": body_preview(m.body),
            "tracks": tracks, "retries": retries, "retriesProblem": retries_problem}
