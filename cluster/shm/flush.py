"""The flush service: makes the CommitLog, then the logic files, durable.

Runs in the flush worker process, the only writer of ``control.flushed_pos`` and of
the checkpoint (besides recovery, before any worker starts). ``step`` msyncs the
CommitLog bytes between flushed_pos and write_pos (async flush: on an interval;
sync flush: as soon as write_pos moves, so a waiting send is released when
flushed_pos passes its end). ``step_logics`` msyncs ConsumeQueue and IndexFile
files and records both positions in the checkpoint.
"""

from __future__ import annotations

import time

from rocketbox.cluster.config import StoreConfig
from rocketbox.cluster.shm import checkpoint
from rocketbox.cluster.shm.commitlog import CommitLog
from rocketbox.cluster.shm.consumequeue import ConsumeQueueSet
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.indexfile import IndexService
from rocketbox.cluster.shm.store_files import FloorWatch, open_store_files


class FlushService:
    def __init__(self, cfg: StoreConfig, control: ControlBlock, *, commitlog: CommitLog | None = None,
                 cqs: ConsumeQueueSet | None = None, index: IndexService | None = None):
        self.cfg = cfg
        self.control = control
        self.commitlog, self.cqs, self.index = open_store_files(cfg, commitlog, cqs, index)
        self.commitlog_flushed_ms = 0
        self._floor = FloorWatch(control, self.commitlog, self.cqs)

    def step(self) -> int:
        """msync [flushed_pos, write_pos), publish and return the new flushed_pos.

        Compare the result with flushed_pos read before the call to know whether it moved.
        """
        now_ms = int(time.time() * 1000)
        self.control.heartbeat_flush_ms = now_ms
        flushed = self.control.flushed_pos
        target = self.control.write_pos
        if target <= flushed:
            return flushed
        self.commitlog.flush(flushed, target)
        self.control.flushed_pos = target
        self.commitlog_flushed_ms = now_ms
        # Segments behind the flushed position are never written again: unmap them.
        self.commitlog.unmap_before(self.commitlog.segment_start(target))
        return target

    def step_logics(self) -> checkpoint.Checkpoint:
        """msync ConsumeQueue/IndexFile files and write the checkpoint."""
        # Read the cursor first: every entry below it is written now, so once the files
        # are flushed the checkpoint may claim it. Entries the reput adds meanwhile are
        # flushed too, harmlessly.
        dispatched = self.control.dispatched_pos
        self.cqs.discover()
        self.cqs.drop_vanished()
        self.cqs.flush_all()
        self.index.flush()
        self._floor.floor()  # after flush_all: its first turn maps every file, old ones too
        cp = checkpoint.Checkpoint(
            commitlog_flushed_pos=self.control.flushed_pos,
            dispatched_flushed_pos=dispatched,
            commitlog_flushed_ms=self.commitlog_flushed_ms,
            logics_flushed_ms=int(time.time() * 1000),
        )
        checkpoint.write(self.cfg.store_dir, cp)
        return cp

    def close(self) -> None:
        self.commitlog.close()
        self.cqs.close()
        self.index.close()
