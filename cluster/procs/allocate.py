"""Allocate worker: creates and warms the next CommitLog segment ahead of need, and deletes
expired ones (retention): the one process that manages the CommitLog's files."""

from __future__ import annotations

import logging
import sys

from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.procs.workers import run_worker
from rocketbox.cluster.shm.allocate import AllocateService
from rocketbox.cluster.shm.retention import RetentionService

ALLOCATE_CHECK_INTERVAL_S = 0.2
# A full disk fails every turn (5 a second): say so a few times a minute, with a count.
warnings = RateLimitedLog(logging.getLogger("allocate"), burst=1, interval_s=20.0)


def make_services(cfg, control) -> tuple[AllocateService, RetentionService]:
    return AllocateService(cfg, control), RetentionService(cfg, control)


def step(services, cfg) -> None:
    allocate, retention = services
    report = allocate.step()
    if report.problem:
        warnings.warning("allocate", "cannot create the next CommitLog segment: %s", report.problem)
    retention.step()
    return None


def close(services) -> None:
    for service in services:
        service.close()


def main(argv=None) -> int:
    return run_worker("allocate", sys.argv[1:] if argv is None else argv, make_service=make_services,
                      step=step, interval_s=ALLOCATE_CHECK_INTERVAL_S, on_exit=close)


if __name__ == "__main__":
    sys.exit(main())
