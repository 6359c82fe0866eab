"""A worker run on a thread of another worker's process (``workers.BesideWorker``: allocate in the
reput process): it sleeps between its steps, the process's heartbeat is its most silent loop's, and
a failing thread ends the process with a code the supervisor restarts."""

from __future__ import annotations

import threading
import time

import pytest

from rocketbox.cluster.procs.workers import EXIT_BESIDE_FAILED, BesideThread, BesideWorker, WorkerLoop
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


def _beside(step, cfg, loop: WorkerLoop, interval_s: float = 0.01) -> BesideThread:
    return BesideThread(BesideWorker("allocate", make_service=lambda cfg, control: None, step=step,
                                     interval_s=interval_s), cfg, loop)


def _stop(side: BesideThread, loop: WorkerLoop) -> None:
    side.stop(10)
    assert not side.thread.is_alive()
    loop.close()


def test_the_thread_sleeps_between_its_steps_and_stops_when_told(tmp_path):
    """Its loop has no wake socket: without a descriptor to wait on, a poll returned at once and the
    thread spun (a third of a core per reput process, seen in a benchmark)."""
    cfg = tiny_config(str(tmp_path))
    loop, _ = _main_loop(cfg.store_dir)
    steps = []
    side = _beside(lambda service, cfg: steps.append(time.monotonic()), cfg, loop, interval_s=0.2)
    polls = []
    real_poll = side.loop.poller.poll
    side.loop.poller.poll = lambda timeout_ms: polls.append(timeout_ms) or real_poll(timeout_ms)
    wait_until(lambda: len(steps) >= 4, 30, interval_s=0.05, what="four steps of the thread")
    assert len(polls) <= 2 * len(steps) + 2, (len(polls), len(steps))
    _stop(side, loop)


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
    side = _beside(side_step, cfg, loop)
    hang.set()
    steps.until = lambda: hung.is_set() and steps.turns >= 50
    loop.run()   # the main loop turns on while the side thread hangs
    stalled_at = side.loop.last_turn_ms
    assert loop.control.heartbeat_ms("reput") <= stalled_at < loop.last_turn_ms
    hang.clear()
    loop.stopping, steps.until = False, lambda: side.loop.last_turn_ms > stalled_at and steps.turns >= 100
    loop.run()
    assert loop.control.heartbeat_ms("reput") > stalled_at
    _stop(side, loop)


def test_a_failing_thread_ends_the_process_loop_with_a_restart_code(tmp_path):
    cfg = tiny_config(str(tmp_path))
    loop, _ = _main_loop(cfg.store_dir)

    def side_step(service, cfg):
        raise OSError("the disk went away")
    side = _beside(side_step, cfg, loop)
    loop.run()   # returns only when stopped: by the failed thread
    assert loop.exit_code == EXIT_BESIDE_FAILED
    wait_until(lambda: not side.thread.is_alive(), 10, what="the failed thread ended")
    loop.close()
