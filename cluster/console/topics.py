"""The topics pages' data: the topic list with each topic's type, one topic's queues (min and max
offsets, TPS), route, config and consumer groups, and the form checks of create/update/send."""

from __future__ import annotations

import threading
import time
from collections import deque

from rocketbox.cluster.console.forms import FormError, choice, int_field, text_field
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.protocol import AUTO_CREATE_TOPIC_KEY, DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX
from rocketbox.cluster.topic_attributes import MESSAGE_TYPES, declared_message_type

# The filter's kinds: the declared message types, then what a name says.
RETRY, DLQ, SYSTEM = "RETRY", "DLQ", "SYSTEM"
KINDS = (*MESSAGE_TYPES, RETRY, DLQ, SYSTEM)
# Topics the brokers make for themselves (schedule, transactions, pop's revive log, the template).
_SYSTEM_NAMES = {AUTO_CREATE_TOPIC_KEY, "SCHEDULE_TOPIC_XXXX", "OFFSET_MOVED_EVENT"}
_SYSTEM_PREFIXES = ("RMQ_SYS_", "rmq_sys_")
PERMS = {"6": "read and write", "4": "read only", "2": "write only"}


def topic_kind(name: str, config: dict | None, system_names=()) -> tuple[str, bool]:
    """(kind, declared): a retry, dead-letter or system topic by its name, else its message.type;
    an undeclared one reads as NORMAL (as RocketMQ's dashboard shows it) with declared False."""
    if name.startswith(RETRY_TOPIC_PREFIX):
        return RETRY, True
    if name.startswith(DLQ_TOPIC_PREFIX):
        return DLQ, True
    if name in _SYSTEM_NAMES or name.startswith(_SYSTEM_PREFIXES) or name in system_names:
        return SYSTEM, True
    declared = declared_message_type((config or {}).get("attributes") or {})
    return (declared or "NORMAL"), declared is not None


def topic_rows(admin, kind: str = "") -> list[dict]:
    """Every topic the NameServers list (of ``kind`` when given), with its type, queue counts over
    the masters that hold it, and permission. One GET_ALL_TOPIC_CONFIG per master."""
    if kind and kind not in KINDS:
        raise FormError(f"unknown topic type {kind!r}: one of {', '.join(KINDS)}")
    info = admin.cluster_info()
    system_names = set(info.get("clusterAddrTable") or {}) | set(info.get("brokerAddrTable") or {})
    configs: dict[str, list[dict]] = {}
    for name, endpoint in sorted(admin.master_endpoints().items()):
        for topic, config in admin.all_topic_configs(endpoint).items():
            configs.setdefault(topic, []).append({**config, "broker": name})
    rows = []
    for topic in sorted(set(admin.topic_list()) | set(configs)):
        held = configs.get(topic, [])
        topic_kind_, declared = topic_kind(topic, held[0] if held else None, system_names)
        if kind and topic_kind_ != kind:
            continue
        rows.append({"topic": topic, "kind": topic_kind_, "declared": declared,
                     "brokers": [c["broker"] for c in held],
                     "writeQueues": sum(int(c.get("writeQueueNums", 0)) for c in held),
                     "readQueues": sum(int(c.get("readQueueNums", 0)) for c in held),
                     "perm": held[0].get("perm") if held else None})
    return rows


class QueueRates:
    """TPS per queue, from the max offsets the console has read (each page load and live refresh of
    a topic reads them): the growth over the oldest reading of the last ``window_s``."""

    def __init__(self, window_s: float = 30.0, clock=time.monotonic):
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[tuple, deque] = {}

    def observe(self, rows: list[dict]) -> None:
        """Add ``tps`` (None until two readings a second apart exist) to each queue row."""
        now = self.clock()
        with self._lock:
            for row in rows:
                key = (row["topic"], row["broker"], row["queueId"])
                seen = self._seen.setdefault(key, deque())
                while seen and now - seen[0][0] > self.window_s:
                    seen.popleft()
                seen.append((now, row["maxOffset"]))
                then, then_max = seen[0]
                row["tps"] = round((row["maxOffset"] - then_max) / (now - then), 2) if now - then >= 1.0 else None
            if len(self._seen) > 100_000:   # topics deleted long ago: forget their queues
                self._seen = {k: v for k, v in self._seen.items() if v and now - v[-1][0] <= self.window_s}


def topic_detail(admin, topic: str, rates: QueueRates) -> dict:
    """One topic: its config per master, route, queues with offsets and TPS, and the groups that
    consume it with their total lag; its in-TPS over the last minute as its masters count it."""
    configs = admin.topic_configs(topic)
    queues = admin.queue_offsets(topic)
    rates.observe(queues)
    masters = admin.master_endpoints()
    in_tps = 0.0
    for name in sorted({q["broker"] for q in queues}):
        stats = admin.broker_stats_data(masters[name], "TOPIC_PUT_NUMS", topic) if name in masters else None
        in_tps += (stats or {}).get("statsMinute", {}).get("tps", 0.0)
    groups = []
    for group in sorted(admin.groups_of(topic)):
        try:
            lag = sum(row["lag"] for row in admin.queue_offsets(topic, group))
        except ClientError as exc:
            lag = f"? ({exc})"
        groups.append({"group": group, "lag": lag})
    first = next(iter(configs.values()), None)
    kind, declared = topic_kind(topic, first)
    return {"topic": topic, "kind": kind, "declared": declared, "configs": configs, "queues": queues,
            "inTps": round(in_tps, 2), "groups": groups,
            "totalMessages": sum(q["maxOffset"] - q["minOffset"] for q in queues)}


def topic_form(form) -> dict:
    """create/update's fields, checked: name, write queues per broker, perm, message type."""
    name = text_field(form, "topic", required=True, max_len=127)
    if name.startswith((RETRY_TOPIC_PREFIX, DLQ_TOPIC_PREFIX)):
        raise FormError(f"{name} is a consumer group's retry or dead-letter topic, which the broker makes itself")
    message_type = choice(form, "message_type", ("", *MESSAGE_TYPES)) or None
    return {"topic": name, "queue_count": int_field(form, "queues", 1, 1024, default=4),
            "perm": int(choice(form, "perm", tuple(PERMS), default="6")), "message_type": message_type}


def send_form(form) -> dict:
    """send's fields: topic, body (required), tags and keys (optional; keys split on spaces)."""
    body = text_field(form, "body", required=True, max_len=64 * 1024, strip=False)
    keys = text_field(form, "keys", max_len=1024).split()
    return {"topic": text_field(form, "topic", required=True, max_len=127), "body": body.encode(),
            "tags": text_field(form, "tags", max_len=255) or None, "keys": keys or None}
