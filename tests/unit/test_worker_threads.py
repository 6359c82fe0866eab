"""A worker run on a thread of another worker's process (``workers.BesideWorker``: allocate in the
reput process): the process's heartbeat is its most silent loop's, and a failing thread ends the
process with a code the supervisor restarts."""

from __future__ import annotations

import threading
import time

import pytest

from rocketbox.cluster.procs.workers import EXIT_BESIDE_FAILED, BesideWorker, WorkerLoop, start_beside
from rocketbox.cluster.testing import wait_until
from tests.store_harness import tiny_config

pytestmark = pytest.mark.timeout(60)


class Steps:
    """The main loop's step: counts its turns; stops the loop once ``until()`` holds."""

    def __init__(self):
        self.turns = 0
        self.loop: WorkerLoop | None = None
        self.until = lambda: False

    def __call__(self):
        self.turns += 1
        if self.until():
            self.loop.stopping = True
        return None


def _main_loop(store_dir: str) -> tuple[WorkerLoop, Steps]:
    steps = Steps()
    loop = WorkerLoop("reput", store_dir, None, 0.01, steps)
    steps.loop = loop
    return loop, steps


def test_a_hung_thread_holds_the_process_heartbeat_back_and_a_released_one_lets_it_go(tmp_path):
    cfg = tiny_config(str(tmp_path))
    loop, steps = _main_loop(cfg.store_dir)
    hang, hung = threading.Event(), threading.Event()

    def side_step(service, cfg):
        if hang.is_set():
            hung.set()
            while hang.is_set():   # the step does not return: a hung disk
                time.sleep(0.01)
        return None
    side_loop, thread, _, _ = start_beside(BesideWorker("allocate", make_service=lambda cfg, control: None,
                                                        step=side_step, interval_s=0.01), cfg, loop)
    hang.set()
    steps.until = lambda: hung.is_set() and steps.turns >= 50
    loop.run()   # the main loop turns on while the side thread hangs
    stalled_at = side_loop.last_turn_ms
    assert loop.control.heartbeat_ms("reput") <= stalled_at < loop.last_turn_ms
    hang.clear()
    loop.stopping, steps.until = False, lambda: side_loop.last_turn_ms > stalled_at and steps.turns >= 100
    loop.run()
    assert loop.control.heartbeat_ms("reput") > stalled_at
    side_loop.stopping = True
    thread.join(10)
    assert not thread.is_alive()
    side_loop.close()
    loop.close()


def test_a_failing_thread_ends_the_process_loop_with_a_restart_code(tmp_path):
    cfg = tiny_config(str(tmp_path))
    loop, steps = _main_loop(cfg.store_dir)

    def side_step(service, cfg):
        raise OSError("the disk went away")
    _, thread, _, _ = start_beside(BesideWorker("allocate", make_service=lambda cfg, control: None,
                                                step=side_step, interval_s=0.01), cfg, loop)
    loop.run()   # returns only when stopped: by the failed thread
    assert loop.exit_code == EXIT_BESIDE_FAILED
    wait_until(lambda: not thread.is_alive(), 10, what="the failed thread ended")
    loop.close()
