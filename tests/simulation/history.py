"""What the simulation's clients saw, and the invariants over it: the checks of the Spark checker
(``spark/checker.py``), each a pure function of the history and one audit of the store, returning
the anomalies it found as lines a person can read."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

OK, FAIL, UNKNOWN, PENDING = "ok", "fail", "unknown", "pending"


@dataclass
class Sent:
    """One send attempt. ``outcome``: ok (acknowledged), fail (refused before it was stored),
    unknown (stored or not: no answer before a crash, or a flush/replica time-out)."""

    uniq: str
    key: int
    seq: int
    body: bytes
    queue_id: int
    outcome: str = PENDING
    queue_offset: int = -1
    phys: int = -1
    durable: bool = False   # acknowledged and on disk: must survive every fault from now on
    lost_in_cut: bool = False   # acknowledged, not yet flushed, gone after a power cut (async flush allows it)
    cuts_before: int = 0   # power cuts before it was sent


@dataclass
class Stored:
    """One record an audit read back: where it sits and what it holds."""

    queue_id: int
    queue_offset: int
    phys: int
    uniq: str | None
    body: bytes


@dataclass
class History:
    sent: dict[str, Sent] = field(default_factory=dict)
    pulled: list[tuple[int, int, str | None]] = field(default_factory=list)   # (queue, offset, uniq) in order
    popped: set[str] = field(default_factory=set)
    events: list[str] = field(default_factory=list)
    # Per power cut, each queue's end before it: a queue the cut shortened reuses the offsets up to there.
    ends_before_cut: list[dict[int, int]] = field(default_factory=list)


def audit(history: History, stored: list[Stored], *, after_power_cut: bool) -> list[str]:
    """Anomalies in what the store holds now (every queue read from its start), against what was sent.
    ``after_power_cut``: acknowledged records not yet flushed may be gone (they are marked so)."""
    found = []
    lost_before = {s.uniq for s in history.sent.values() if s.lost_in_cut}
    at: dict[str, Stored] = {}
    for record in stored:
        sent = history.sent.get(record.uniq or "")
        if sent is None or sent.body != record.body:
            found.append(f"unexpected: {record.queue_id}:{record.queue_offset} holds {record.uniq!r} "
                         f"({'never sent' if sent is None else 'not the body sent'})")
            continue
        if sent.outcome == FAIL:
            found.append(f"aborted_read: {sent.uniq} was refused yet is stored at {record.queue_id}:{record.queue_offset}")
        if sent.uniq in at:
            found.append(f"duplicate: {sent.uniq} stored at {at[sent.uniq].queue_offset} and {record.queue_offset}")
        at[sent.uniq] = record
        if sent.outcome == OK and not sent.lost_in_cut and (record.queue_id, record.queue_offset) != (
                sent.queue_id, sent.queue_offset):
            found.append(f"inconsistent_offset: {sent.uniq} acknowledged at {sent.queue_id}:{sent.queue_offset}, "
                         f"stored at {record.queue_id}:{record.queue_offset}")
    for sent in history.sent.values():
        if sent.outcome != OK or sent.lost_in_cut or sent.uniq in at:
            continue
        if sent.durable or not after_power_cut:
            found.append(f"lost: {sent.uniq} acknowledged at {sent.queue_id}:{sent.queue_offset}"
                         f"{' and flushed' if sent.durable else ''} is gone")
        else:
            sent.lost_in_cut = True
    found += _holes(history, at, lost_before)
    found += _queue_gaps(stored)
    found += key_order(history, stored)
    return found


def _holes(history: History, at: dict[str, Stored], lost_before: set[str]) -> list[str]:
    """A power cut loses a suffix of the CommitLog, never a record with later ones kept (the
    records lost in earlier cuts left their places to later sends)."""
    acknowledged = sorted((s for s in history.sent.values() if s.outcome == OK and s.phys >= 0 and
                           s.uniq not in lost_before), key=lambda s: s.phys)
    gone = [s for s in acknowledged if s.uniq not in at]
    if not gone:
        return []
    first_gone = gone[0].phys
    kept_after = [s.uniq for s in acknowledged if s.phys > first_gone and s.uniq in at]
    return [f"hole: {gone[0].uniq} at phys {first_gone} is gone but later records stay ({', '.join(kept_after[:3])})"] \
        if kept_after else []


def _queue_gaps(stored: list[Stored]) -> list[str]:
    """Each queue's entries are consecutive from its start: a ConsumeQueue has no holes."""
    found = []
    by_queue: dict[int, list[int]] = {}
    for record in stored:
        by_queue.setdefault(record.queue_id, []).append(record.queue_offset)
    for queue_id, offsets in by_queue.items():
        if offsets != list(range(offsets[0], offsets[0] + len(offsets))):
            found.append(f"queue_order: queue {queue_id} reads back offsets {offsets[:8]}...")
    return found


def key_order(history: History, stored: list[Stored]) -> list[str]:
    """The messages of one key, in store order, have increasing seqs (one producer, one queue a key)."""
    found, last = [], {}
    for record in sorted(stored, key=lambda r: (r.queue_id, r.queue_offset)):
        sent = history.sent.get(record.uniq or "")
        if sent is None:
            continue
        if sent.key in last and last[sent.key] >= sent.seq:
            found.append(f"key_order: key {sent.key} seq {sent.seq} stored after seq {last[sent.key]}")
        last[sent.key] = sent.seq
    return found


def delivered(history: History, queue_id: int, queue_offset: int, uniq: str | None, body: bytes,
              last_offset: int | None) -> list[str]:
    """Anomalies in one delivery to a consumer: what it got must have been sent as it was, not
    refused, and (``last_offset``: the consumer's previous offset on that queue in this session)
    come after what it got before."""
    found = []
    sent = history.sent.get(uniq or "")
    if sent is None or sent.body != body:
        found.append(f"unexpected: delivered {queue_id}:{queue_offset} {uniq!r}")
    elif sent.outcome == FAIL:
        found.append(f"aborted_read: delivered {uniq}, which was refused")
    if last_offset is not None and queue_offset <= last_offset:
        found.append(f"queue_order: queue {queue_id} delivered offset {queue_offset} after {last_offset}")
    return found


def popped_everything(history: History) -> list[str]:
    """At-least-once for the pop consumer: every acknowledged message that survived was popped,
    except one stored at an offset a power cut freed (below the queue's end before the cut): the
    group's offset, persisted past the records the cut lost, skips it. A known gap, as in RocketMQ
    (its pull corrects an offset past the end only when it is past it when asked); closing it needs
    the broker to pull its committed offsets back to each queue's recovered end at boot."""
    return [f"lost (pop): {s.uniq} acknowledged at {s.queue_id}:{s.queue_offset} was never popped"
            for s in history.sent.values() if s.outcome == OK and not s.lost_in_cut and s.uniq not in history.popped
            and not _at_freed_offset(history, s)]


def _at_freed_offset(history: History, sent: Sent) -> bool:
    return any(sent.queue_offset < ends.get(sent.queue_id, 0) for ends in history.ends_before_cut[sent.cuts_before - 1::-1]
               ) if sent.cuts_before else False


def digest(history: History) -> str:
    """One line for everything the clients saw (outcomes, offsets, deliveries, faults)."""
    seen = repr(([(s.uniq, s.outcome, s.queue_offset, s.phys, s.durable, s.lost_in_cut) for s in history.sent.values()],
                 history.pulled, sorted(history.popped), history.events))
    return hashlib.sha256(seen.encode()).hexdigest()[:16]
