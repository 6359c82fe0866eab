"""Flush worker: makes the CommitLog durable and keeps the checkpoint.

Async flush: every ``flush_interval_ms``. Sync flush: also whenever the broker
wakes it (a send is parked), flushing once up to ``write_pos`` for every waiter
(group commit), then pinging the broker to release them.
"""

from __future__ import annotations

import sys
import time

from cluster.broker import channels
from cluster.config import SYNC_FLUSH, broker_config_from_json
from cluster.procs.runner import run_role
from cluster.procs.workers import WorkerLoop
from cluster.shm.flush import FlushService


def build(config_json: str):
    cfg = broker_config_from_json(config_json).store
    cfg.validate()
    wake = channels.flush_wake(cfg.store_dir) if cfg.flush_mode == SYNC_FLUSH else None
    holder = {}
    logics_due = [0.0]

    def step():
        service = holder["service"]
        before = loop.control.flushed_pos
        flushed = service.step()
        now = time.monotonic()
        if now >= logics_due[0]:
            service.step_logics()
            logics_due[0] = now + cfg.flush_logics_interval_ms / 1000
        return [channels.FLUSHED] if flushed != before else None

    loop = WorkerLoop("flush", cfg.store_dir, wake, cfg.flush_interval_ms / 1000, step)
    holder["service"] = FlushService(cfg, loop.control)

    def on_exit():
        holder["service"].step()
        holder["service"].step_logics()
        loop.close()
    return loop, {"role": "flush"}, on_exit


def main(argv=None) -> int:
    return run_role("flush", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())
