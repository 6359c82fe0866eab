"""Reput (dispatch) worker: builds IndexFile entries from new records (shm/reput.py); the
allocate worker runs on a thread of this process (procs/allocate.py).

Woken by the broker after writes (under sync flush by the flush worker too). No consumer waits for
it (the broker writes the ConsumeQueue entries itself), so it tells the broker nothing; which is why
the allocate worker shares its process: a step of one that holds the other back delays nobody's answer.
"""

from __future__ import annotations

import logging
import sys
import time

from rocketbox.cluster.broker import channels
from rocketbox.cluster.procs.allocate import ALLOCATE
from rocketbox.cluster.procs.workers import run_worker
from rocketbox.cluster.shm.reput import ReputService


DISPATCH_RECORDS_PER_STEP = 4096
REPUT_INTERVAL_S = 0.05
PROBLEM_LOG_INTERVAL_S = 10.0
log = logging.getLogger("reput")


class ReputStep:
    """Catch up within a bounded number of service steps."""

    def __init__(self):
        self.problem_logged_s = 0.0

    def __call__(self, service: ReputService, cfg) -> None:
        for _ in range(64):
            report = service.step(DISPATCH_RECORDS_PER_STEP)
            if report.problem and time.monotonic() - self.problem_logged_s >= PROBLEM_LOG_INTERVAL_S:
                # Indexing is stuck (a full disk for a new IndexFile, an unreadable record): queries
                # by key miss what follows, and the checkpoint cannot move past it; say so, once a while.
                self.problem_logged_s = time.monotonic()
                log.error("dispatch stopped at %d: %s", report.dispatched_pos, report.problem)
            if report.count < DISPATCH_RECORDS_PER_STEP:
                break
        return None


def main(argv=None) -> int:
    return run_worker("reput", sys.argv[1:] if argv is None else argv, make_service=ReputService, step=ReputStep(),
                      wake_endpoint=lambda cfg: channels.reput_wake(cfg.store_dir), interval_s=REPUT_INTERVAL_S,
                      beside=(ALLOCATE,))


if __name__ == "__main__":
    sys.exit(main())
