"""Allocate/preheat worker: creates and warms the next CommitLog segment ahead of need."""

from __future__ import annotations

import sys

from rocketbox.cluster.procs.workers import run_worker
from rocketbox.cluster.shm.allocate import AllocateService


ALLOCATE_CHECK_INTERVAL_S = 0.2


def step(service: AllocateService, cfg) -> None:
    service.step()
    return None


def main(argv=None) -> int:
    return run_worker("allocate", sys.argv[1:] if argv is None else argv, make_service=AllocateService,
                      step=step, interval_s=ALLOCATE_CHECK_INTERVAL_S)


if __name__ == "__main__":
    sys.exit(main())
