"""The consumer groups pages' data: every group with its members and total lag (the tools' and
brokers' own groups only when asked, as rocketmq-dashboard), one group's members (their version
as RocketMQ names it), subscriptions and lag per queue, and the reset-offset form."""

from __future__ import annotations

from rocketbox.cluster.console.forms import FormError, text_field, time_field
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.mq_version import version_desc
from rocketbox.cluster.protocol import RETRY_TOPIC_PREFIX, ResponseCode, is_system_group

# The group list's orders (the dashboard's: by group, quantity, TPS, delay).
SORTS = ("lag", "group", "members", "consumeTps")


def _connection(admin, group: str) -> dict | None:
    """The group's ConsumerConnection, None when no member is online."""
    try:
        return admin.consumer_connection(group)
    except BrokerError as exc:
        if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return None
        raise


def _queue_rows(admin, group: str) -> tuple[list[dict], float]:
    """Per queue of every topic the group has offsets on (its retry topic included): broker and
    committed offsets and the lag; and the group's consume TPS summed over the masters."""
    rows, tps = [], 0.0
    for name, endpoint in sorted(admin.master_endpoints().items()):
        stats = admin.consume_stats(endpoint, group)
        tps += stats["consumeTps"]
        for mq, offsets in sorted(stats["offsetTable"].items()):
            rows.append({"topic": mq.topic, "broker": mq.broker_name, "queueId": mq.queue_id,
                         "brokerOffset": offsets["brokerOffset"], "consumerOffset": offsets["consumerOffset"],
                         "lag": max(offsets["brokerOffset"] - offsets["consumerOffset"], 0),
                         "lastTimestamp": offsets.get("lastTimestamp", 0)})
    return rows, round(tps, 2)


def group_rows(admin, *, show_system: bool = False, name_filter: str = "") -> tuple[list[dict], list[str]]:
    """Every subscription group the masters know (the tools' and brokers' own only with
    ``show_system``; those whose name holds ``name_filter``): members online, total lag, consume TPS.
    And the system groups left out."""
    rows, hidden = [], []
    for group, config in sorted(admin.consumer_groups().items()):
        system = is_system_group(group)
        if system and not show_system:
            hidden.append(group)
            continue
        if name_filter.lower() not in group.lower():
            continue
        queues, tps = _queue_rows(admin, group)
        connection = _connection(admin, group)
        rows.append({"group": group, "system": system, "members": len((connection or {}).get("connectionSet", [])),
                     "topics": sorted({q["topic"] for q in queues}), "lag": sum(q["lag"] for q in queues),
                     "consumeTps": tps, "consumeEnable": config.get("consumeEnable", True),
                     "retryMaxTimes": config.get("retryMaxTimes")})
    return rows, hidden


def sorted_rows(rows: list[dict], sort: str) -> list[dict]:
    """By name, or the most first (members, lag, TPS), as the dashboard orders its group list."""
    if sort == "group":
        return sorted(rows, key=lambda r: r["group"])
    return sorted(rows, key=lambda r: (-r[sort], r["group"]))


def group_detail(admin, group: str) -> dict:
    connection = _connection(admin, group)
    queues, tps = _queue_rows(admin, group)
    lag_by_topic: dict[str, int] = {}
    for q in queues:
        lag_by_topic[q["topic"]] = lag_by_topic.get(q["topic"], 0) + q["lag"]
    subscriptions = sorted((connection or {}).get("subscriptionTable", {}).values(), key=lambda s: s["topic"])
    config = admin.consumer_groups().get(group)
    return {"group": group, "config": config, "online": connection is not None,
            "members": [{**m, "versionDesc": version_desc(m.get("version"))}
                        for m in (connection or {}).get("connectionSet", [])],
            "messageModel": (connection or {}).get("messageModel"),
            "consumeType": (connection or {}).get("consumeType"),
            "subscriptions": subscriptions, "queues": queues, "lagByTopic": lag_by_topic,
            "lag": sum(q["lag"] for q in queues), "consumeTps": tps,
            # The group's own topics first, its retry topic after them (the reset form's default).
            "topics": sorted(set(lag_by_topic) | {s["topic"] for s in subscriptions},
                             key=lambda t: (t.startswith(RETRY_TOPIC_PREFIX), t))}


def reset_form(form) -> dict:
    """reset-offset's fields: the topic, and the time (or ``skip`` to move to the end)."""
    topic = text_field(form, "topic", required=True, max_len=127)
    if form.get("skip"):
        return {"topic": topic, "timestamp_ms": -1}
    when = time_field(form, "time", required=True)
    if when < 0:
        raise FormError("time must not be before 1970")
    return {"topic": topic, "timestamp_ms": when}
