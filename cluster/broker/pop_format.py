"""The pop log's records: what a broker writes to its revive topic so that pop state survives it.

RocketMQ 5 keeps pop consumption in the store, not in memory: each pop appends a checkpoint
("ck") to the system topic ``rmq_sys_REVIVE_LOG_<cluster>``, each ack an "ack" naming it.
Ours does the same, with one queue and three kinds of record, told apart by their TAGS:

- ``ck``: one pop of one queue: group, topic, queue, whether it was the pop retry topic, pop time,
  invisible time, whether the group is FIFO, and per message its queue offset, CommitLog offset
  and delivery attempt. A checkpoint is named by its own offset in the revive queue.
- ``ack``: the message at queue offset ``o`` of checkpoint ``ck`` is done with.
- ``done``: checkpoint ``ck`` was revived (its unacknowledged messages went back to be delivered
  again, or to the dead-letter queue): loading the log must not revive it a second time. A FIFO
  checkpoint's mark also names the offsets its queue owes again, with their next attempt.

Bodies are compact JSON (a checkpoint holds up to 32 messages); pure, no I/O. A body that is not a
record (any message a client sent to the revive topic) is a ValueError, never anything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from rocketbox.cluster.message.system_topics import REVIVE_TOPIC_PREFIX

# Where the revive scan has got to: the revive queue offset below which every checkpoint is settled,
# committed as this system group's offset of the revive queue (RocketMQ's CID_RMQ_SYS_REVIVE_GROUP).
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"
TAG_CK, TAG_ACK, TAG_DONE = "ck", "ack", "done"


def revive_topic(cluster_name: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster_name


@dataclass
class Checkpoint:
    group: str
    topic: str          # the topic the consumer asked for (not the retry topic's name)
    queue_id: int
    retry: bool         # popped from the group's pop retry topic
    pop_time_ms: int
    invisible_ms: int
    order: bool         # a FIFO group's pop: its queue waits until these are acked
    queue_offsets: list[int]
    commitlog_offsets: list[int]
    attempts: list[int]
    ck_offset: int = -1  # its own offset in the revive queue, once written

    @property
    def deadline_ms(self) -> int:
        return self.pop_time_ms + self.invisible_ms


def encode_checkpoint(ck: Checkpoint) -> bytes:
    return json.dumps({"g": ck.group, "t": ck.topic, "q": ck.queue_id, "r": int(ck.retry), "pt": ck.pop_time_ms,
                       "it": ck.invisible_ms, "f": int(ck.order), "o": ck.queue_offsets,
                       "p": ck.commitlog_offsets, "a": ck.attempts}, separators=(",", ":")).encode()


def decode_checkpoint(body: bytes, ck_offset: int) -> Checkpoint:
    """ValueError for a body that is not a checkpoint."""
    try:
        raw = json.loads(body)
        ck = Checkpoint(str(raw["g"]), str(raw["t"]), int(raw["q"]), bool(raw["r"]), int(raw["pt"]), int(raw["it"]),
                        bool(raw["f"]), [int(o) for o in raw["o"]], [int(p) for p in raw["p"]],
                        [int(a) for a in raw["a"]], ck_offset)
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"not a pop checkpoint: {exc}") from None
    if not len(ck.queue_offsets) == len(ck.commitlog_offsets) == len(ck.attempts):
        raise ValueError("a pop checkpoint's message lists differ in length")
    return ck


def encode_ack(ck_offset: int, queue_offset: int) -> bytes:
    return json.dumps({"ck": ck_offset, "o": queue_offset}, separators=(",", ":")).encode()


def decode_ack(body: bytes) -> tuple[int, int]:
    """(checkpoint offset, queue offset); ValueError for a body that is not an ack."""
    try:
        raw = json.loads(body)
        return int(raw["ck"]), int(raw["o"])
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ValueError(f"not a pop ack: {exc}") from None


def encode_done(ck_offset: int, redeliver: dict[int, int] | None = None, end_offset: int = -1) -> bytes:
    """``redeliver``: what a FIFO queue owes after this revive, whole (earlier revives' debts merged
    in): queue offset -> the attempt it is delivered with next; offsets up to ``end_offset`` not
    in it are acked and skipped (FIFO messages are delivered again in place, not copied)."""
    raw: dict = {"ck": ck_offset}
    if redeliver:
        raw["r"] = {str(offset): attempt for offset, attempt in sorted(redeliver.items())}
        raw["e"] = end_offset
    return json.dumps(raw, separators=(",", ":")).encode()


def decode_done(body: bytes) -> tuple[int, dict[int, int], int]:
    """(checkpoint offset, FIFO debt, its end offset); ValueError for a body that is not a revive mark."""
    try:
        raw = json.loads(body)
        redeliver = {int(offset): int(attempt) for offset, attempt in (raw.get("r") or {}).items()}
        return int(raw["ck"]), redeliver, int(raw.get("e", -1))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise ValueError(f"not a pop revive mark: {exc}") from None
