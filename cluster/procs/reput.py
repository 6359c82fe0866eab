"""Reput (dispatch) worker: builds ConsumeQueue and IndexFile entries from new records.

Woken by the broker after writes; pings the broker with the queues it touched so
long-polling pulls on them are answered at once.
"""

from __future__ import annotations

import logging
import sys
import time

from cluster.broker import channels
from cluster.config import broker_config_from_json
from cluster.procs.runner import run_role
from cluster.procs.workers import WorkerLoop
from cluster.shm.reput import ReputService

DISPATCH_RECORDS_PER_STEP = 4096
PROBLEM_LOG_INTERVAL_S = 10.0
log = logging.getLogger("reput")


def build(config_json: str):
    cfg = broker_config_from_json(config_json).store
    cfg.validate()
    holder = {}

    problem_logged_at = [0.0]

    def step():
        touched = set()
        # Catch up within a bounded number of steps, then report once.
        for _ in range(64):
            report = holder["service"].step(DISPATCH_RECORDS_PER_STEP)
            touched |= report.touched
            if report.problem and time.monotonic() - problem_logged_at[0] >= PROBLEM_LOG_INTERVAL_S:
                # Dispatch is stuck (a full disk for a new ConsumeQueue file, an unreadable record):
                # consumers see nothing new until it clears, so say so, once a while.
                problem_logged_at[0] = time.monotonic()
                log.error("dispatch stopped at %d: %s", report.dispatched_pos, report.problem)
            if report.count < DISPATCH_RECORDS_PER_STEP:
                break
        return [channels.DISPATCHED, channels.encode_touched(touched)] if touched else None

    loop = WorkerLoop("reput", cfg.store_dir, channels.reput_wake(cfg.store_dir), 0.05, step)
    holder["service"] = ReputService(cfg, loop.control)
    return loop, {"role": "reput"}, loop.close


def main(argv=None) -> int:
    return run_role("reput", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())
