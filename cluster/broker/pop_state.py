"""What a broker's pop consumers hold: checkpoints not yet settled, and the FIFO queues they block.

The revive log (``pop_format.py``) is the truth; this is its reading, kept in memory and rebuilt
by replaying the log from the revive progress offset when the broker starts. Pure: no I/O.

- A checkpoint is *pending* until every message in it is acked (it is dropped) or its invisible
  time passes and the revive timer settles it (``due``, then ``settle``).
- A FIFO checkpoint blocks its queue while pending: nothing more is popped from that queue.
- When a FIFO checkpoint is revived with messages unacked, its queue owes a *redelivery*: those
  offsets are popped again (in order, attempt + 1), the acked ones between them are skipped.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from rocketbox.cluster.broker.pop_format import Checkpoint

# (group, the topic of the queue popped, queue id): the retry topic's name when popped from it.
QueueKey = tuple[str, str, int]


@dataclass
class Pending:
    ck: Checkpoint
    queue_topic: str
    acked: set[int] = field(default_factory=set)   # queue offsets

    @property
    def key(self) -> QueueKey:
        return (self.ck.group, self.queue_topic, self.ck.queue_id)

    @property
    def complete(self) -> bool:
        return len(self.acked) >= len(self.ck.queue_offsets)

    def unacked(self) -> list[tuple[int, int, int]]:
        """(queue offset, CommitLog offset, attempt) of each message not acked, in queue order."""
        ck = self.ck
        return [(o, p, a) for o, p, a in zip(ck.queue_offsets, ck.commitlog_offsets, ck.attempts)
                if o not in self.acked]


@dataclass
class Redelivery:
    """A revived FIFO checkpoint's debt to its queue."""
    ck_offset: int          # the revived checkpoint whose done record holds this debt: replay starts there
    end_offset: int         # the checkpoint's last queue offset: offsets up to it not listed are skipped
    attempts: dict[int, int]  # queue offset -> the attempt it is delivered with next


class PopState:
    def __init__(self):
        self.pending: dict[int, Pending] = {}
        self._deadlines: list[tuple[int, int]] = []   # (deadline ms, ck offset), a heap; stale entries skipped
        self.blocking: dict[QueueKey, set[int]] = {}  # FIFO queue -> its pending checkpoints
        self.redeliveries: dict[QueueKey, Redelivery] = {}

    def __len__(self) -> int:
        return len(self.pending)

    def add(self, ck: Checkpoint, queue_topic: str) -> Pending:
        pending = self.pending[ck.ck_offset] = Pending(ck, queue_topic)
        heapq.heappush(self._deadlines, (ck.deadline_ms, ck.ck_offset))
        if ck.order:
            self.blocking.setdefault(pending.key, set()).add(ck.ck_offset)
        return pending

    def ackable(self, ck_offset: int, group: str, queue_offset: int) -> Pending | None:
        """The pending checkpoint a handle names, when the message is still unacked there."""
        pending = self.pending.get(ck_offset)
        if pending is None or pending.ck.group != group or queue_offset in pending.acked \
                or queue_offset not in pending.ck.queue_offsets:
            return None
        return pending

    def ack(self, pending: Pending, queue_offset: int) -> bool:
        """Mark one message acked; True when that completed (and so removed) the checkpoint."""
        pending.acked.add(queue_offset)
        if not pending.complete:
            return False
        self.settle(pending.ck.ck_offset)
        return True

    def settle(self, ck_offset: int) -> Pending | None:
        pending = self.pending.pop(ck_offset, None)
        if pending is not None and pending.ck.order:
            blockers = self.blocking.get(pending.key)
            if blockers is not None:
                blockers.discard(ck_offset)
                if not blockers:
                    del self.blocking[pending.key]
        return pending

    def debt_after_revive(self, pending: Pending, redeliver: dict[int, int]) -> tuple[dict[int, int], int]:
        """What a FIFO queue owes once ``pending`` is revived owing ``redeliver``: its earlier debt
        beyond this checkpoint's messages, plus ``redeliver``; and the offset the debt covers to."""
        ck = pending.ck
        earlier = self.redeliveries.get(pending.key)
        attempts = {o: a for o, a in earlier.attempts.items() if o not in ck.queue_offsets} if earlier else {}
        attempts.update(redeliver)
        return attempts, max(max(ck.queue_offsets), earlier.end_offset if earlier else -1)

    def forget_paid(self, key: QueueKey, committed: int) -> None:
        """Drop a FIFO queue's debt once its committed offset has passed all of it."""
        debt = self.redeliveries.get(key)
        if debt is not None and committed > debt.end_offset:
            del self.redeliveries[key]

    def is_blocked(self, key: QueueKey) -> bool:
        return key in self.blocking

    def due(self, now_ms: int, limit: int) -> list[Pending]:
        """Pending checkpoints whose invisible time has passed, earliest first (they stay pending
        until settled)."""
        found = []
        heap = self._deadlines
        while heap and heap[0][0] <= now_ms and len(found) < limit:
            _, ck_offset = heapq.heappop(heap)
            pending = self.pending.get(ck_offset)
            if pending is not None:
                found.append(pending)
        return found

    def retry_later(self, pending: Pending, when_ms: int) -> None:
        """A revive that could not be written now is tried again at ``when_ms``."""
        heapq.heappush(self._deadlines, (when_ms, pending.ck.ck_offset))

    def progress(self, next_offset: int) -> int:
        """The revive log offset below which nothing is needed to rebuild this state."""
        # Checkpoints are added in log order and dicts keep it: the oldest pending one is the first.
        oldest = next(iter(self.pending), next_offset)
        return min([oldest, *(r.ck_offset for r in self.redeliveries.values()), next_offset])
