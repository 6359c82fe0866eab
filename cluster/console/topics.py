"""The topics pages' data: the topic list with each topic's type, one topic's queues (min and max
offsets, TPS), route, config and consumer groups, and the form checks of create/update/send."""

from __future__ import annotations

import threading
import time
from collections import deque

from rocketbox.cluster.console.forms import FormError, choice, int_field, text_field
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.protocol import DLQ_TOPIC_PREFIX, RETRY_TOPIC_PREFIX, MessageQueue
from rocketbox.cluster.message.system_topics import is_system_topic
from rocketbox.cluster.topic_attributes import MESSAGE_TYPES, declared_message_type

# The filter's kinds: the declared message types, then what a name says.
RETRY, DLQ, SYSTEM = "RETRY", "DLQ", "SYSTEM"
KINDS = (*MESSAGE_TYPES, RETRY, DLQ, SYSTEM)
PERMS = {"6": "read and write", "4": "read only", "2": "write only"}
# Questions a first look at a topic may ask the brokers for its queues' rates (one per active queue).
SEEDS_ASKED_MAX = 64


def topic_kind(name: str, config: dict | None, system_names=()) -> tuple[str, bool]:
    """(kind, declared): a retry, dead-letter or system topic by its name, else its message.type;
    an undeclared one reads as NORMAL (as RocketMQ's dashboard shows it) with declared False."""
    if name.startswith(RETRY_TOPIC_PREFIX):
        return RETRY, True
    if name.startswith(DLQ_TOPIC_PREFIX):
        return DLQ, True
    if is_system_topic(name) or name in system_names:
        return SYSTEM, True
    declared = declared_message_type((config or {}).get("attributes") or {})
    return (declared or "NORMAL"), declared is not None


def topic_rows(admin, kind: str = "", name_filter: str = "") -> list[dict]:
    """Every topic the NameServers list (of ``kind`` when given, whose name holds ``name_filter``),
    with its type, queue counts over the masters that hold it, and permission. One
    GET_ALL_TOPIC_CONFIG per master."""
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
        if (kind and topic_kind_ != kind) or name_filter.lower() not in topic.lower():
            continue
        rows.append({"topic": topic, "kind": topic_kind_, "declared": declared,
                     "brokers": [c["broker"] for c in held],
                     "writeQueues": sum(int(c.get("writeQueueNums", 0)) for c in held),
                     "readQueues": sum(int(c.get("readQueueNums", 0)) for c in held),
                     "perm": held[0].get("perm") if held else None})
    return rows


class QueueRates:
    """TPS per queue: the growth of its max offset since the latest reading ``window_s`` or more old
    (the oldest there is, before).
    The console reads max offsets at each load and live refresh of a topic's page; a queue read
    for the first time gets a reading from ``window_s`` ago out of the store (``seed``: the offset
    stored first since then), so the first page shows its rate at once."""

    def __init__(self, window_s: float = 30.0, clock=time.monotonic):
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[tuple, deque] = {}

    @staticmethod
    def _key(row: dict) -> tuple:
        return row["topic"], row["broker"], row["queueId"]

    def unseen(self, rows: list[dict]) -> list[dict]:
        with self._lock:
            return [row for row in rows if self._key(row) not in self._seen]

    def observe(self, rows: list[dict], seeds: dict | None = None) -> None:
        """Add ``tps`` to each queue row: None while no reading a second or more older exists.
        ``seeds``: queue key -> its max offset ``window_s`` ago, for queues not read before."""
        now = self.clock()
        with self._lock:
            for row in rows:
                key = self._key(row)
                seen = self._seen.get(key)
                if seen is None:
                    seen = self._seen[key] = deque()
                    if (seeds or {}).get(key) is not None:
                        seen.append((now - self.window_s, seeds[key]))
                while len(seen) > 1 and now - seen[1][0] >= self.window_s:   # keep one at the window's start
                    seen.popleft()
                seen.append((now, row["maxOffset"]))
                then, then_max = seen[0]
                row["tps"] = round((row["maxOffset"] - then_max) / (now - then), 2) if now - then >= 1.0 else None
            if len(self._seen) > 100_000:   # topics deleted long ago: forget their queues
                self._seen = {k: v for k, v in self._seen.items() if v and now - v[-1][0] <= self.window_s}


def _seeds(admin, rows: list[dict], window_s: float) -> dict:
    """Each queue's max offset ``window_s`` ago: the offset first stored since (SEARCH_OFFSET_BY_TIMESTAMP)
    for a queue written to since, its max offset for one that was not (no question asked). At most
    SEEDS_ASKED_MAX questions; a queue the broker does not answer for waits for a second reading."""
    since_ms = int((time.time() - window_s) * 1000)
    seeds, asked = {}, 0
    for row in rows:
        key = QueueRates._key(row)
        if row["lastUpdateTimestamp"] < since_ms:
            seeds[key] = row["maxOffset"]
        elif asked < SEEDS_ASKED_MAX:
            asked += 1
            try:
                seeds[key] = admin.search_offset(MessageQueue(*key), since_ms)
            except ClientError:
                continue
    return seeds


def queue_rows(admin, topic: str, rates: QueueRates) -> list[dict]:
    """The topic's queues: min and max offsets, when the last was stored, and TPS (``rates``)."""
    rows = admin.queue_offsets(topic)
    rates.observe(rows, _seeds(admin, rates.unseen(rows), rates.window_s))
    return rows


def topic_detail(admin, topic: str, rates: QueueRates) -> dict:
    """One topic: its config per master, route, queues with offsets and TPS, and the groups that
    consume it with their total lag; its in-TPS over the last minute as its masters count it."""
    configs = admin.topic_configs(topic)
    queues = queue_rows(admin, topic, rates)
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
