"""Allocate worker: creates and warms the next CommitLog segment ahead of need, and deletes
expired ones (retention): the one worker that manages the CommitLog's files. It runs on a thread
of the reput process (``ALLOCATE``, ``workers.BesideWorker``; procs/reput.py), at nice 19."""

from __future__ import annotations

import logging

from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.procs.workers import BesideWorker
from rocketbox.cluster.shm.allocate import AllocateService
from rocketbox.cluster.shm.retention import RetentionService

ALLOCATE_CHECK_INTERVAL_S = 0.2
# Creating, preheating and deleting segments is work ahead of need: it yields the cores to the
# broker and its other workers. Measured while a 1 GiB segment was preheated under sync flush +
# sync replication (perf/batch_tail.py, one thread x 128): p99 3.95-4.40 ms against 4.99-5.62 at
# nice 0, three interleaved rounds (then a process of its own; now its thread's nice). At nice 19 it
# still gets ~1.5% of a busy core, a step (heartbeat included) every ~2 s when both cores are saturated.
ALLOCATE_NICE = 19
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


ALLOCATE = BesideWorker("allocate", make_service=make_services, step=step, interval_s=ALLOCATE_CHECK_INTERVAL_S,
                        on_exit=close, nice=ALLOCATE_NICE)
