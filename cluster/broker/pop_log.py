"""The revive log, written and read back: pop state that survives the broker.

Every change to pop state is a record appended to the revive topic's one queue first and applied
to ``PopState`` second, by the same ``apply_*`` methods that replay the log when the broker
starts; so a broker killed at any moment comes back with every checkpoint and every ack it had
written. Replay starts at the revive progress offset (``REVIVE_GROUP``'s committed offset of the
revive queue, kept like any consumer offset: ``offsets.py``). Progress is only ever the lowest
offset still needed when it was committed, so a stale one is safe: replay then reads records
it did not need and re-applies commits that already stand.
"""

from __future__ import annotations

import logging

from rocketbox.cluster.broker.context import BrokerContext
from rocketbox.cluster.broker.pop_commits import HeldPopCommits
from rocketbox.cluster.broker.pop_format import (REVIVE_GROUP, TAG_ACK, TAG_CK, TAG_DONE, Checkpoint, decode_ack,
                                                 decode_checkpoint, decode_done, encode_ack, encode_checkpoint,
                                                 encode_done, revive_topic)
from rocketbox.cluster.broker.pop_state import Pending, PopState, Redelivery
from rocketbox.cluster.protocol import ProtocolError, ResponseCode, pop_retry_topic
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.ids import pack_host
from rocketbox.cluster.message.properties import PROPERTY_TAGS, encode_properties
from rocketbox.cluster.shm.store import MessageToStore, PutMessageStatus, PutResult

log = logging.getLogger(__name__)

REPLAY_BATCH = 1024
_BORN_HOST = pack_host("127.0.0.1", 0)


def queue_topic_of(ck: Checkpoint) -> str:
    return pop_retry_topic(ck.group, ck.topic) if ck.retry else ck.topic


class PopLog:
    def __init__(self, ctx: BrokerContext):
        cfg = ctx.cfg
        self.store = ctx.store
        self.offsets = ctx.offsets
        self.clock = ctx.clock
        self.ensure_system_topic = ctx.ensure_system_topic
        self.on_written = ctx.on_written
        # Where the last record this log wrote ends: a pop's answer waits for it (durability.py).
        self.last_end = 0
        self.topic = revive_topic(cfg.cluster_name)
        self.state = PopState()
        # A live pop's offset, committed once its checkpoint is durable (pop_commits.py).
        self.commits = HeldPopCommits(ctx.offsets, ctx.durability)
        self.replayed_records = 0

    # ------------------------------------------------------------ writing

    def _append(self, tag: str, *bodies: bytes) -> PutResult:
        """Records of one kind in the revive queue, in one put (all or nothing); ProtocolError when the
        store refuses them (nothing changed)."""
        self.ensure_system_topic(self.topic)
        properties = encode_properties({PROPERTY_TAGS: tag})
        born_ms = self.clock.now_ms()
        result = self.store.put_messages(self.topic, 0, [
            MessageToStore(body=body, flag=0, properties=properties, sys_flag=0, born_timestamp_ms=born_ms,
                           born_host=_BORN_HOST) for body in bodies])
        if result.status != PutMessageStatus.PUT_OK:
            code = (ResponseCode.SERVICE_NOT_AVAILABLE if result.status == PutMessageStatus.SERVICE_NOT_AVAILABLE
                    else ResponseCode.SYSTEM_ERROR)
            raise ProtocolError(f"the pop log could not be written: {result.status.name}", code)
        self.last_end = result.end_phys_offset
        self.on_written()
        return result

    def checkpoint(self, ck: Checkpoint) -> Pending:
        result = self._append(TAG_CK, encode_checkpoint(ck))
        ck.ck_offset = result.queue_offset
        return self.apply_checkpoint(ck, durable_at=result.end_phys_offset)

    def ack(self, *acks: tuple[Pending, int]) -> PutResult:
        """Each (pending pop, queue offset) acked: their ack records in one put, then each applied."""
        result = self._append(TAG_ACK, *(encode_ack(pending.ck.ck_offset, queue_offset)
                                         for pending, queue_offset in acks))
        for pending, queue_offset in acks:
            self.apply_ack(pending, queue_offset)
        return result

    def done(self, pending: Pending, redeliver: dict[int, int]) -> None:
        """Settle a revived checkpoint; for a FIFO one ``redeliver`` is what its queue owes again."""
        end_offset = -1
        if pending.ck.order:
            redeliver, end_offset = self.state.debt_after_revive(pending, redeliver)
        self._append(TAG_DONE, encode_done(pending.ck.ck_offset, redeliver, end_offset))
        self.apply_done(pending.ck.ck_offset, redeliver, end_offset)

    # ------------------------------------------------------------ applying (live and replayed)

    def apply_checkpoint(self, ck: Checkpoint, durable_at: int | None = None) -> Pending:
        """``durable_at``: a live checkpoint's end in the CommitLog (None: replayed, so durable)."""
        pending = self.state.add(ck, queue_topic_of(ck))
        if not ck.order and ck.queue_offsets:
            # A pop commits as it takes, once its checkpoint is durable; replayed, this restores a
            # commit the last snapshot missed.
            offset = max(ck.queue_offsets) + 1
            if durable_at is None:
                self.advance(ck.group, pending.queue_topic, ck.queue_id, offset)
            else:
                self.commits.commit(ck.group, pending.queue_topic, ck.queue_id, offset, durable_at)
        return pending

    def apply_ack(self, pending: Pending, queue_offset: int) -> bool:
        completed = self.state.ack(pending, queue_offset)
        if completed and pending.ck.order:
            ck = pending.ck
            self.advance(ck.group, pending.queue_topic, ck.queue_id, max(ck.queue_offsets) + 1)
            self.state.forget_paid(pending.key, self.offsets.query(ck.group, pending.queue_topic, ck.queue_id))
        return completed

    def apply_done(self, ck_offset: int, redeliver: dict[int, int], end_offset: int) -> Pending | None:
        pending = self.state.settle(ck_offset)
        if pending is None or not pending.ck.order:
            return pending
        ck = pending.ck
        if redeliver:
            self.state.redeliveries[pending.key] = Redelivery(ck_offset, end_offset, dict(redeliver))
            first = min(redeliver)
        else:
            self.state.redeliveries.pop(pending.key, None)
            first = max(max(ck.queue_offsets), end_offset) + 1
        # A FIFO queue goes on from its first message still owed, whatever was committed before.
        self.offsets.commit(ck.group, pending.queue_topic, ck.queue_id, first)
        return pending

    def advance(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        committed = self.offsets.query(group, topic, queue_id)
        if committed is None or committed < offset:
            self.offsets.commit(group, topic, queue_id, offset)

    def commit_progress(self) -> None:
        """Replay starts here after a restart: committed once the records that settled what lies
        before it (done records, the copies written before them) are durable."""
        progress = self.state.progress(self.store.queue_next_offset(self.topic, 0))
        if self.commits.query(REVIVE_GROUP, self.topic, 0) != progress:
            self.commits.commit(REVIVE_GROUP, self.topic, 0, progress, durable_at=self.last_end)

    # ------------------------------------------------------------ replay

    def replay(self) -> None:
        """Rebuild the state from the log (the ConsumeQueue is complete: recovery dispatched it)."""
        offset = self.offsets.query(REVIVE_GROUP, self.topic, 0) or 0
        while True:
            entries = self.store.queue_entries(self.topic, 0, offset, REPLAY_BATCH)
            if not entries:
                break
            for queue_offset, phys, _size, _tag in entries:
                record = self.store.read_record(phys)
                if record is not None:
                    self._replay_one(queue_offset, record)
            offset = entries[-1][0] + 1
        if self.replayed_records:
            log.info("pop state rebuilt from %d revive log records: %d checkpoints pending, %d FIFO queues owed",
                     self.replayed_records, len(self.state), len(self.state.redeliveries))
        self.commit_progress()

    def _replay_one(self, queue_offset: int, record: fmt.Record) -> None:
        tag = record.properties.get(PROPERTY_TAGS)
        try:
            if tag == TAG_CK:
                self.apply_checkpoint(decode_checkpoint(record.body, queue_offset))
            elif tag == TAG_ACK:
                ck_offset, acked_offset = decode_ack(record.body)
                pending = self.state.pending.get(ck_offset)
                if pending is not None and acked_offset not in pending.acked:
                    self.apply_ack(pending, acked_offset)
            elif tag == TAG_DONE:
                ck_offset, redeliver, end_offset = decode_done(record.body)
                self.apply_done(ck_offset, redeliver, end_offset)
            else:
                raise ValueError(f"unknown tag {tag!r}")
        except ValueError as exc:
            log.warning("revive log record %d skipped: %s", queue_offset, exc)
            return
        self.replayed_records += 1
