"""What a request needs once a handler has found the stored record it touches: permission on the
topic the record really belongs to, which its header does not say (an offset names no topic).

| record stored in | belongs to (needs ``perm``, SUB to read or copy it, PUB to end a transaction) |
| --- | --- |
| a topic T | T |
| SCHEDULE_TOPIC_XXXX, RMQ_SYS_TRANS_HALF_TOPIC (parked) | its REAL_TOPIC, read as below (a retry is parked too) |
| ``%RETRY%G`` (a group's or a pop group's retry) | the group G SUB, and its RETRY_TOPIC (the topic it was consumed from) |
| ``%DLQ%G`` | the topic ``%DLQ%G``, the group G SUB, and its RETRY_TOPIC |
| the broker's other own topics (transaction outcomes, pop state) | that topic |

Clients cannot send to the parked topics (broker/send.py refuses it), so REAL_TOPIC there is the
broker's, set from a send the sender had PUB for; RETRY_TOPIC may come from a client (a send to a
retry topic), so it only ever adds a requirement. RocketMQ checks no record (its VIEW_MESSAGE_BY_ID
and CONSUMER_SEND_MSG_BACK read any offset); RocketBox does. Pure but for ``require``, which asks
the request's ``access`` (set by acl/guard.py; None without access control or for the cluster's
own processes, then nothing is checked and nothing is computed).
"""

from __future__ import annotations

from rocketbox.cluster.acl.permissions import SUB
from rocketbox.cluster.protocol import DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX
from rocketbox.cluster.message.system_topics import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rocketbox.cluster.message.properties import PROPERTY_REAL_TOPIC, PROPERTY_RETRY_TOPIC
from rocketbox.cluster.wire_format import Command

PARKING_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC})


def real_topic(topic: str, properties: dict[str, str]) -> str:
    """The topic a stored record belongs to before any retry: a parked record's REAL_TOPIC, a retried
    one's RETRY_TOPIC (a parked retry has both)."""
    if topic in PARKING_TOPICS:
        topic = properties.get(PROPERTY_REAL_TOPIC) or topic
    if topic.startswith((RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX)):
        topic = properties.get(PROPERTY_RETRY_TOPIC) or topic
    return topic


def record_resources(topic: str, properties: dict[str, str], perm: int = SUB) -> dict[str, int]:
    """resource -> permission bits that reading (SUB) or ending (PUB) the record stored in ``topic``
    with ``properties`` needs (the table above)."""
    if topic in PARKING_TOPICS:
        topic = properties.get(PROPERTY_REAL_TOPIC) or topic
    needed: dict[str, int] = {}
    if topic.startswith(RETRY_TOPIC_PREFIX):
        needed[topic] = SUB   # the group's own resource (groupPerms are kept under %RETRY%<group>)
    elif topic.startswith(DLQ_TOPIC_PREFIX):
        needed[topic] = perm
        needed[RETRY_TOPIC_PREFIX + topic[len(DLQ_TOPIC_PREFIX):]] = SUB
    else:
        return {topic: perm}
    original = properties.get(PROPERTY_RETRY_TOPIC)
    if original and not original.startswith((RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX)):
        needed[original] = needed.get(original, 0) | perm
    return needed


def require(request: Command, needed: dict[str, int]) -> None:
    """AccessDenied (answered NO_PERMISSION) when the request's caller lacks ``needed``."""
    if request.access is not None:
        request.access.require(needed)


def require_record(request: Command, record, perm: int = SUB) -> None:
    """AccessDenied when the request's caller may not read (SUB) or end (PUB) ``record`` (a
    record_format.Record)."""
    if request.access is not None:
        request.access.require(record_resources(record.topic, record.properties, perm))


def readable_records(request: Command, records: list) -> list:
    """The records of ``records`` the caller may read; AccessDenied when there were some and it may
    read none of them (the reason of the first)."""
    access = request.access
    if access is None or not records:
        return records
    needs = [record_resources(r.topic, r.properties) for r in records]
    readable = [r for r, needed in zip(records, needs) if access.allows(needed)]
    if not readable:
        access.require(needs[0])
    return readable
