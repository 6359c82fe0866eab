"""The one wait between a write and its answer: RocketMQ's ``CommitLog.handleDiskFlushAndHA``.

Every write a client is answered for (a send, a send-back, an END_TRANSACTION, a pop with its
checkpoint, an ack or a changed invisible time) and the schedule's progress go through ``answer``:
under SYNC_FLUSH the bytes are on disk first (``FlushWaiters``, group commit), on a SYNC_MASTER a
slave holds them too (``HAServer.await_replica``). Disk and slave are waited for at once, not one
after the other: the answer goes when the later is done. As RocketMQ combines the two futures, a
failed slave wait names the answer even when the disk's timed out too (FLUSH_SLAVE_TIMEOUT 12 or
SLAVE_NOT_AVAILABLE 11 over FLUSH_DISK_TIMEOUT 10); the write itself stays in the log either way.
Under ASYNC_FLUSH on an ASYNC_MASTER the answer is returned as it came: no per-write cost. In
controller mode what a SYNC_MASTER waits for is RocketMQ 5's (``sync_state.py``).
"""

from __future__ import annotations

import time
from typing import Callable

from rocketbox.cluster.config import SYNC_FLUSH, SYNC_MASTER
from rocketbox.cluster.protocol import ResponseCode


class Outcome:
    """An answer's code and remark, in the shape ``answer`` sets on a response: what a waiter with no
    client (the schedule) passes as its response."""
    __slots__ = ("code", "remark")

    def __init__(self, code: int = ResponseCode.SUCCESS, remark: str = ""):
        self.code = code
        self.remark = remark


_FLUSHED = Outcome()


class _BothDone:
    """Answers ``response`` once ``parts`` waits are done: the slave's failure if any, else the disk's."""
    __slots__ = ("response", "reply", "left", "disk", "slave")

    def __init__(self, response, reply: Callable, parts: int):
        self.response = response
        self.reply = reply
        self.left = parts
        self.disk: Outcome | None = None
        self.slave: Outcome | None = None

    def flushed(self, outcome: Outcome) -> None:
        if outcome.code != ResponseCode.SUCCESS:
            self.disk = outcome
        self._one_done()

    def replicated(self, outcome) -> None:
        if outcome.code != ResponseCode.SUCCESS:
            self.slave = Outcome(outcome.code, outcome.remark)
        self._one_done()

    def _one_done(self) -> None:
        self.left -= 1
        if self.left == 0:
            failure = self.slave or self.disk
            if failure is not None:
                self.response.code, self.response.remark = failure.code, failure.remark
            self.reply(self.response)


class DurabilityWait:
    def __init__(self, cfg, flush_waiters, ha):
        """``ha``: the master's ``HAServer`` (only asked on a SYNC_MASTER)."""
        self.flush_waiters = flush_waiters
        self.ha = ha
        self.sync_flush = cfg.store.flush_mode == SYNC_FLUSH
        self.sync_replication = cfg.broker_role == SYNC_MASTER and not cfg.is_slave
        self.flush_timeout_ms = cfg.store.flush_sync_timeout_ms
        # Whether any write waits at all: a caller may skip building what only a wait needs.
        self.waits = self.sync_flush or self.sync_replication

    def refusal(self) -> str | None:
        """Why a write that waits for the store may not even be stored now, or None: a controller-mode
        SYNC_MASTER's SyncStateSet below minInSyncReplicas (``sync_state.py``)."""
        return self.ha.refusal() if self.sync_replication else None

    def answer(self, response, end_phys_offset: int, reply: Callable):
        """``response`` to a write whose bytes end at ``end_phys_offset``: returned when it may go now,
        else None and handed to ``reply`` once durable, with its code and remark set on a time-out.
        ``response`` is a ``Command`` or an ``Outcome``."""
        if not self.sync_flush:
            return self.ha.await_replica(end_phys_offset, response, reply) if self.sync_replication else response
        timeout_s = self.flush_timeout_ms / 1000
        parked_s = time.monotonic()
        both = _BothDone(response, reply, 2 if self.sync_replication else 1)
        flush_timeout = Outcome(ResponseCode.FLUSH_DISK_TIMEOUT, f"not flushed within {self.flush_timeout_ms} ms")
        self.flush_waiters.park(end_phys_offset, parked_s + timeout_s, lambda: both.flushed(_FLUSHED),
                                lambda: both.flushed(flush_timeout), parked_s)
        if self.sync_replication:
            replica = Outcome()
            if self.ha.await_replica(end_phys_offset, replica, both.replicated) is not None:
                both.replicated(replica)
        return None

    def answer_together(self, answers: list, end_phys_offset: int) -> None:
        """Each ``(response, reply)`` of ``answers``, writes that all end by ``end_phys_offset``, after
        one wait for them all (a read's sends, ``send.py``): a time-out's code and remark on every one."""
        def all_done(outcome: Outcome) -> None:
            for response, reply in answers:
                if outcome.code != ResponseCode.SUCCESS:
                    response.code, response.remark = outcome.code, outcome.remark
                reply(response)
        self.then(end_phys_offset, all_done)

    def then(self, end_phys_offset: int, on_done: Callable[[Outcome], None]) -> None:
        """Call ``on_done(outcome)`` once the bytes up to ``end_phys_offset`` are as durable as a client's
        write would be (at once when nothing waits)."""
        now = self.answer(Outcome(), end_phys_offset, on_done)
        if now is not None:
            on_done(now)
