"""Flush worker: makes the CommitLog durable and keeps the checkpoint.

Async flush: every ``flush_interval_ms``. Sync flush: also whenever the broker
wakes it (a send is parked), flushing once up to ``write_pos`` for every waiter
(group commit), then pinging the broker to release them, and, under sync flush, waking the
reput worker: there it dispatches only flushed records (``shm/reput.py``).
"""

from __future__ import annotations

import sys
import time

from rocketbox.cluster.broker import channels
from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.procs.workers import run_worker
from rocketbox.cluster.shm.flush import FlushService


class FlushStep:
    """One turn: flush the CommitLog, and the logic files and checkpoint when they are due."""

    def __init__(self):
        self.logics_due_s = 0.0

    def __call__(self, service: FlushService, cfg):
        before = service.control.flushed_pos
        flushed = service.step()
        now = time.monotonic()
        if now >= self.logics_due_s:
            service.step_logics()
            self.logics_due_s = now + cfg.flush_logics_interval_ms / 1000
        return channels.FLUSHED if flushed != before else None


def flush_everything(service: FlushService) -> None:
    service.step()
    service.step_logics()


def main(argv=None) -> int:
    return run_worker("flush", sys.argv[1:] if argv is None else argv, make_service=FlushService, step=FlushStep(),
                      wake_endpoint=lambda cfg: channels.flush_wake(cfg.store_dir) if cfg.flush_mode == SYNC_FLUSH
                      else None,
                      interval_s=lambda cfg: cfg.flush_interval_ms / 1000, on_exit=flush_everything,
                      wakes_after_move=lambda cfg: [channels.reput_wake(cfg.store_dir)] if cfg.flush_mode == SYNC_FLUSH
                      else [])


if __name__ == "__main__":
    sys.exit(main())
