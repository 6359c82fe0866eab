"""Allocate/preheat worker: creates and warms the next CommitLog segment ahead of need."""

from __future__ import annotations

import sys

from cluster.config import broker_config_from_json
from cluster.procs.runner import run_role
from cluster.procs.workers import WorkerLoop
from cluster.shm.allocate import AllocateService

ALLOCATE_CHECK_INTERVAL_S = 0.2


def build(config_json: str):
    cfg = broker_config_from_json(config_json).store
    cfg.validate()
    holder = {}

    def step():
        holder["service"].step()
        return None

    loop = WorkerLoop("allocate", cfg.store_dir, None, ALLOCATE_CHECK_INTERVAL_S, step)
    holder["service"] = AllocateService(cfg, loop.control)
    return loop, {"role": "allocate"}, loop.close


def main(argv=None) -> int:
    return run_role("allocate", sys.argv[1:] if argv is None else argv, build)


if __name__ == "__main__":
    sys.exit(main())
