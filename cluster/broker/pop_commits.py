"""A pop's offset commit, held until the checkpoint that records the pop is durable.

A pop takes messages by moving its group's offset past them and writes a checkpoint saying which
it took; the checkpoint is what brings back those it never gets an ack for. Were the offset
durable first, a power cut that kept the offset (its slot page written back by the kernel, or the
periodic JSON write) and lost the checkpoint would lose those messages for the group: past its
offset, never revived. The simulation found exactly that under SYNC_FLUSH. So the offset a pop
moves is held here, in memory, until the CommitLog is durable up to the checkpoint's end
(``DurabilityWait.then``: at once when nothing waits), and only then committed. Pops read the
held offset (``query``), so a second pop does not take the same messages meanwhile; a crash
before the commit replays the checkpoint, which moves the offset again (``PopLog.replay``).

Only concurrent pops go through here: a FIFO queue is blocked until its checkpoint is acked or
revived, and those commits follow the acks.
"""

from __future__ import annotations

from rocketbox.cluster.protocol import ResponseCode

QueueKey = tuple[str, str, int]   # (group, topic, queue id)


class HeldPopCommits:
    def __init__(self, offsets, durability):
        self.offsets = offsets
        self.durability = durability
        # Per queue: the offset to commit, the CommitLog end that must be durable first, and
        # whether a wait for it is armed.
        self._held: dict[QueueKey, _Held] = {}

    def __len__(self) -> int:
        return len(self._held)

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        """The group's offset on the queue, held or committed, whichever is further."""
        committed = self.offsets.query(group, topic, queue_id)
        held = self._held.get((group, topic, queue_id))
        if held is None:
            return committed
        return held.offset if committed is None else max(committed, held.offset)

    def commit(self, group: str, topic: str, queue_id: int, offset: int, durable_at: int | None = None) -> None:
        """Move the offset to ``offset`` once the CommitLog is durable to ``durable_at`` (a checkpoint's
        end); None: nothing new needs to be durable, but a commit held for the queue still comes first."""
        key = (group, topic, queue_id)
        held = self._held.get(key)
        if held is None:
            if durable_at is None or not self.durability.waits:
                self._advance(key, offset)
                return
            held = self._held[key] = _Held(offset, durable_at)
        else:
            held.offset = max(held.offset, offset)
            if durable_at is None and held.armed:
                return
            held.end = max(held.end, durable_at or 0)
        self._arm(key, held)

    def rearm(self) -> None:
        """Wait again for the holds whose wait failed (a slow or full disk): called by a timer, never
        from a wait's own failure, which a shutdown delivers to every waiter at once."""
        for key, held in self._held.items():
            if not held.armed:
                self._arm(key, held)

    def _arm(self, key: QueueKey, held: "_Held") -> None:
        held.armed = True
        end = held.end
        self.durability.then(end, lambda outcome: self._durable(key, end, outcome))

    def _durable(self, key: QueueKey, end: int, outcome) -> None:
        held = self._held.get(key)
        if held is None or held.end > end:
            return   # a later checkpoint's wait commits it
        if outcome.code != ResponseCode.SUCCESS:
            held.armed = False   # not durable in time: never committed early
            return
        del self._held[key]
        self._advance(key, held.offset)

    def _advance(self, key: QueueKey, offset: int) -> None:
        committed = self.offsets.query(*key)
        if committed is None or committed < offset:
            self.offsets.commit(*key, offset)


class _Held:
    __slots__ = ("offset", "end", "armed")

    def __init__(self, offset: int, end: int):
        self.offset = offset
        self.end = end
        self.armed = False
