"""The loop shared by the broker's worker processes (flush, reput, allocate).

Each worker blocks on its wake socket with a time-out, runs one bounded step of its
service, publishes its heartbeat, and pings the broker when its cursor moved.
"""

from __future__ import annotations

import os
import time

import zmq

from rocketbox.cluster.broker import channels
from rocketbox.cluster.shm.control import ControlBlock
from rocketbox.cluster.shm.paths import control_path

# How soon a notify the broker could not take yet is offered again.
UNSENT_RETRY_MS = 1


def run_worker(role: str, argv, *, make_service, step, wake_endpoint=None, interval_s,
               on_exit=None, wakes_after_move=None) -> int:
    """A worker role's whole entry point: its store config from argv, its service, its loop.

    ``make_service(cfg, control)`` builds the service; ``step(service, cfg)`` runs one bounded
    turn and returns the notify for the broker, or None. ``wake_endpoint(cfg)`` and
    ``interval_s(cfg)`` may depend on the config; ``on_exit(service)`` runs at a clean stop.
    ``wakes_after_move(cfg)``: the wake endpoints of workers to wake, besides the broker, whenever
    this one's cursor moved.
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

        def stop():
            if on_exit is not None:
                on_exit(service)
            loop.close()
        return loop, {"role": role}, stop

    return run_role(role, argv, build)


class WorkerLoop:
    """``step()`` returns the notify for the broker (channels.py), or None when nothing moved."""

    def __init__(self, role: str, store_dir: str, wake_endpoint: str | None, interval_s: float, step,
                 wakes_after_move=()):
        self.role = role
        self.stopping = False
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
            timeout_ms = max(0, int((next_due - time.monotonic()) * 1000))
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
            self.control.heartbeat(self.role, int(time.time() * 1000))
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
