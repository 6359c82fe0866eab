"""The loop shared by the broker's workers (flush, reput, allocate).

Each worker blocks on its wake socket with a time-out, runs one bounded step of its
service, publishes its heartbeat, and pings the broker when its cursor moved. A worker may run
on a thread of another worker's process (``BesideWorker``: allocate in the reput process), with its
own loop, services, heartbeat slot and nice: one interpreter less (~20 MB RSS, perf/RESULTS.md
"One web process, the allocate worker on a thread").
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

import zmq

from rocketbox.cluster.broker import channels
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.paths import control_path

# How soon a notify the broker could not take yet is offered again.
UNSENT_RETRY_MS = 1
# A worker on a thread beside another is given this long to finish its step at a stop (within the
# supervisor's stop_timeout_s, 5 s, after which it kills the process).
BESIDE_JOIN_S = 3.0
# The process's exit code when a worker on a thread beside the main one failed: the supervisor
# restarts the process, both workers with it.
EXIT_BESIDE_FAILED = 1
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BesideWorker:
    """A worker run on a thread of another worker's process: ``make_service(cfg, control)``,
    ``step(service, cfg)``, ``on_exit(service)`` as ``run_worker``'s; ``nice``: the thread's own
    (Linux sets niceness per thread), so work ahead of need yields the cores as its process did."""
    role: str
    make_service: Callable
    step: Callable
    interval_s: float
    on_exit: Callable | None = None
    nice: int | None = None


def run_worker(role: str, argv, *, make_service, step, wake_endpoint=None, interval_s,
               on_exit=None, wakes_after_move=None, beside: tuple[BesideWorker, ...] = ()) -> int:
    """A worker role's whole entry point: its store config from argv, its service, its loop.

    ``make_service(cfg, control)`` builds the service; ``step(service, cfg)`` runs one bounded
    turn and returns the notify for the broker, or None. ``wake_endpoint(cfg)`` and
    ``interval_s(cfg)`` may depend on the config; ``on_exit(service)`` runs at a clean stop.
    ``wakes_after_move(cfg)``: the wake endpoints of workers to wake, besides the broker, whenever
    this one's cursor moved. ``beside``: workers run on threads of this process; the process's
    heartbeat (this role's slot, which the supervisor watches) is its most silent loop's, so a
    hung thread gets the process restarted as its own process would have been; a thread that
    fails ends the process (``EXIT_BESIDE_FAILED``).
    """
    from rocketbox.cluster.config import broker_config_from_json
    from rocketbox.cluster.procs.runner import run_role

    def build(config_json: str):
        cfg = broker_config_from_json(config_json).store
        cfg.validate()
        loop = WorkerLoop(role, cfg.store_dir, wake_endpoint(cfg) if wake_endpoint else None,
                          interval_s(cfg) if callable(interval_s) else interval_s, None,
                          wakes_after_move(cfg) if wakes_after_move else ())
        service = make_service(cfg, loop.control)
        loop.step = lambda: step(service, cfg)
        threads = [BesideThread(spec, cfg, loop) for spec in beside]

        def stop():
            for side in threads:
                side.stop(BESIDE_JOIN_S)
            if on_exit is not None:
                on_exit(service)
            loop.close()
        return loop, {"role": role}, stop

    return run_role(role, argv, build)


class BesideThread:
    """A ``BesideWorker``'s loop on its thread. Its loop sleeps on a pipe of its own (a loop with
    nothing to poll would not wait), which ``stop`` writes to."""

    def __init__(self, spec: BesideWorker, cfg, main_loop: "WorkerLoop"):
        self.spec = spec
        self.loop = WorkerLoop(spec.role, cfg.store_dir, None, spec.interval_s, None)
        self.service = spec.make_service(cfg, self.loop.control)
        self.loop.step = lambda: spec.step(self.service, cfg)
        self._stop_read, self._stop_write = os.pipe()
        os.set_blocking(self._stop_read, False)
        self.loop.watch_stop_fd(self._stop_read)
        main_loop.watched.append(self.loop)
        self._main_loop = main_loop
        self.thread = threading.Thread(target=self._run, name=spec.role, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            if self.spec.nice is not None:   # this thread only; raising one's own niceness needs no privilege
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.spec.nice)
            self.loop.run()
        except BaseException:
            log.exception("the %s worker failed: the process exits for the supervisor to restart it", self.spec.role)
            self._main_loop.exit_code = EXIT_BESIDE_FAILED
            self._main_loop.stopping = True

    def stop(self, join_s: float) -> None:
        self.loop.stopping = True
        os.write(self._stop_write, b"\0")
        self.thread.join(join_s)
        if self.thread.is_alive():
            return   # still in its step: the process's exit ends it
        if self.spec.on_exit is not None:
            self.spec.on_exit(self.service)
        self.loop.close()
        os.close(self._stop_read)
        os.close(self._stop_write)


class WorkerLoop:
    """``step()`` returns the notify for the broker (channels.py), or None when nothing moved."""

    def __init__(self, role: str, store_dir: str, wake_endpoint: str | None, interval_s: float, step,
                 wakes_after_move=()):
        self.role = role
        self.stopping = False
        self.exit_code = 0
        # Loops on threads beside this one: this role's heartbeat is the oldest of their last turns and its own.
        self.watched: list[WorkerLoop] = []
        self.last_turn_ms = int(time.time() * 1000)
        self.interval_s = interval_s
        self.step = step
        self.control = ControlBlock(control_path(store_dir))
        self.wake = channels.Receiver(wake_endpoint) if wake_endpoint else None
        self.notify = channels.Sender(channels.broker_notify(store_dir))
        self._unsent: bytes | None = None   # a notify the broker's full queue refused: sent with the next
        self.wakes_after_move = [channels.Sender(address) for address in wakes_after_move]
        self.poller = zmq.Poller()
        if self.wake is not None:
            self.poller.register(self.wake.fileno(), zmq.POLLIN)
        self._stop_fd: int | None = None

    def watch_stop_fd(self, fd: int) -> None:
        self._stop_fd = fd
        self.poller.register(fd, zmq.POLLIN)

    def run(self) -> None:
        next_due = 0.0
        while not self.stopping:
            # Rounded up: rounded down, the last millisecond before a step was spent in polls of 0 ms.
            timeout_ms = max(0, math.ceil((next_due - time.monotonic()) * 1000))
            if self._unsent is not None:
                timeout_ms = min(timeout_ms, UNSENT_RETRY_MS)
            woken = False
            ready = dict(self.poller.poll(timeout_ms))
            if self._stop_fd is not None and self._stop_fd in ready:
                try:
                    os.read(self._stop_fd, 4096)
                except (BlockingIOError, InterruptedError):
                    pass
                if self.stopping:
                    break
            if self.wake is not None and self.wake.fileno() in ready:
                woken = bool(self.wake.drain())   # one step serves every wake queued so far
            if not woken and time.monotonic() < next_due:
                if self._unsent is not None:
                    self._send_notify(None)
                continue
            payload = self.step()
            self.last_turn_ms = int(time.time() * 1000)
            self.control.heartbeat(self.role, min([self.last_turn_ms] + [w.last_turn_ms for w in self.watched]))
            if payload is not None or self._unsent is not None:
                self._send_notify(payload)
            if payload is not None:
                for sender in self.wakes_after_move:
                    sender.send()
            if not woken:
                next_due = time.monotonic() + self.interval_s

    def _send_notify(self, payload: bytes | None) -> None:
        """Tell the broker; what its full queue refuses is offered again, so a send or a pull waiting
        for the flush is never left waiting for a move it was not told of."""
        payload = payload or self._unsent
        self._unsent = None if self.notify.send(payload) else payload

    def close(self) -> None:
        if self.wake is not None:
            self.wake.close()
        self.notify.close()
        for sender in self.wakes_after_move:
            sender.close()
