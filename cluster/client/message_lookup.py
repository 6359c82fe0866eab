"""Finding a message by the id a user holds. RocketMQ gives a message two: the offset message id
(``offsetMsgId``: the storing broker's address and the record's CommitLog offset, read back at once)
and the msg id its producer made (``msgId``, the UNIQ_KEY property: the client's address, pid and a
counter, found through the brokers' IndexFile under ``topic#UNIQ_KEY``). A UNIQ_KEY is 32 hex
characters too (34 from a RocketMQ 5 client), so it parses as an offset id of a broker that is not
there (the client's address, a "port" of pid bytes).

``messages_by_id`` takes either kind, as mqadmin's queryMsgById and the dashboard's viewMessage do:
the CLI's ``query --id`` and the console's "By message id" and message page both use it."""

from __future__ import annotations

import time

from rocketbox.cluster.client.message import MessageExt
from rocketbox.cluster.errors import BrokerError, ClientError, NoRouteError
from rocketbox.cluster.protocol import DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX
from rocketbox.cluster.message.system_topics import is_system_topic
from rocketbox.cluster.message.ids import parse_offset_msg_id

# A msg id without its topic is looked for in every topic that holds applications' messages, one
# index query per topic and broker: bounded in topics and in time (then the topic is needed).
MAX_TOPICS_SEARCHED = 1000
SEARCH_BUDGET_S = 20.0


def application_topics(topics) -> list[str]:
    """The topics a producer's message is first stored in: not a group's retry or dead-letter topic
    (their copies keep the UNIQ_KEY), not the brokers' own (schedule, transactions, pop)."""
    return sorted(t for t in topics if not t.startswith((RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX))
                  and not is_system_topic(t))


def _by_offset_msg_id(admin, msg_id: str) -> MessageExt | None:
    """The message an offset message id of this cluster names; None when ``msg_id`` is none (not 32
    hex characters, or no broker of this cluster at the address inside). BrokerError when the broker
    it names has no message there."""
    try:
        parse_offset_msg_id(msg_id)
    except ValueError:
        return None
    try:
        return admin.view_message(msg_id)
    except NoRouteError:   # Admin.view_message asks only this cluster's brokers
        return None


def _by_unique_key_everywhere(admin, msg_id: str, max_num: int) -> list[MessageExt]:
    topics = application_topics(admin.topic_list())
    if len(topics) > MAX_TOPICS_SEARCHED:
        raise ValueError(f"{msg_id} is no offset message id of this cluster; to find it as a msg id (UNIQ_KEY) "
                         f"give its topic: the cluster has {len(topics)} topics")
    deadline = time.monotonic() + SEARCH_BUDGET_S
    found: list[MessageExt] = []
    for searched, topic in enumerate(topics):
        if time.monotonic() > deadline:
            raise ClientError(f"searched {searched} of {len(topics)} topics for the msg id {msg_id} in "
                              f"{SEARCH_BUDGET_S:.0f} s without finding it: give its topic")
        try:
            found.extend(admin.query_by_unique_key(topic, msg_id, max_num - len(found)))
        except NoRouteError:   # deleted since the list was read
            continue
        if len(found) >= max_num:
            break
    return found


def messages_by_id(admin, msg_id: str, topic: str | None = None, max_num: int = 32) -> list[MessageExt]:
    """The message(s) ``msg_id`` names: an offset message id of this cluster's brokers (the message,
    when of ``topic`` if one is given), else a msg id (UNIQ_KEY) in ``topic``, or without a topic in
    every topic of applications (more than one when a producer retried a send). [] when none has it."""
    refusal = None
    try:
        message = _by_offset_msg_id(admin, msg_id)
    except BrokerError as exc:   # a broker of this cluster, no message there: a UNIQ_KEY alike by chance?
        message, refusal = None, exc
    if message is not None:
        return [message] if topic is None or message.topic == topic else []
    found = (admin.query_by_unique_key(topic, msg_id, max_num) if topic
             else _by_unique_key_everywhere(admin, msg_id, max_num))
    if not found and refusal is not None:
        raise refusal
    return sorted(found, key=lambda m: (m.store_timestamp_ms, m.broker_name, m.queue_offset))
