"""Faults during the load: SIGKILL of a broker's main process or of its flush or reput
worker, and SIGSTOP/SIGCONT of the broker main, at random times.

Works on any cluster whose supervisor state (cluster.json) is readable here:
``LocalCluster``, or a ``cluster up`` data directory. The supervisor restarts what was
killed; the injector waits for that before the next fault, so faults never pile up.
Each fault is an event (time, kind, target, pid) for the report and the plot.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
import time
from dataclasses import asdict, dataclass

from cluster.procs.supervisor import read_state_file
from cluster.testing import child_record, wait_until

log = logging.getLogger(__name__)

KILL_MASTER, KILL_FLUSH, KILL_REPUT, PAUSE_MASTER = "kill-master", "kill-flush", "kill-reput", "pause-master"
KINDS = (KILL_MASTER, KILL_FLUSH, KILL_REPUT, PAUSE_MASTER)
RESTART_TIMEOUT_S = 60.0


@dataclass
class FaultEvent:
    start_ns: int
    end_ns: int
    kind: str
    target: str
    pid: int


class FaultInjector:
    """Injects ``kinds`` on ``broker`` every ``interval_s`` (a random span) until stopped."""

    def __init__(self, data_dir: str, broker: str = "broker-a", kinds=KINDS,
                 interval_s: tuple[float, float] = (2.0, 5.0), pause_s: tuple[float, float] = (0.5, 2.0),
                 seed: int | None = None):
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
        self.data_dir = data_dir
        self.broker = broker
        self.kinds = tuple(kinds)
        self.interval_s = interval_s
        self.pause_s = pause_s
        self.rng = random.Random(seed)
        self.events: list[FaultEvent] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-injector", daemon=True)
        self.error: BaseException | None = None

    def start(self) -> "FaultInjector":
        self._thread.start()
        return self

    def stop(self) -> list[FaultEvent]:
        """Stop injecting; a paused broker is resumed before this returns."""
        self._stop.set()
        if self._thread.ident is not None:   # never started when the load stored nothing
            self._thread.join(RESTART_TIMEOUT_S + 10)
        return self.events

    def _target(self, kind: str) -> str:
        return {KILL_FLUSH: f"{self.broker}-flush", KILL_REPUT: f"{self.broker}-reput"}.get(kind, self.broker)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.rng.uniform(*self.interval_s)):
                self.inject(self.rng.choice(self.kinds))
        except BaseException as exc:   # reported by the job, not lost in a thread
            log.exception("fault injection stopped")
            self.error = exc

    def inject(self, kind: str) -> FaultEvent:
        target = self._target(kind)
        child = child_record(self.data_dir, target)
        pid = child["pid"]
        start_ns = time.time_ns()
        if kind == PAUSE_MASTER:
            os.kill(pid, signal.SIGSTOP)
            try:
                self._stop.wait(self.rng.uniform(*self.pause_s))
            finally:
                os.kill(pid, signal.SIGCONT)
        else:
            os.kill(pid, signal.SIGKILL)
            self._await_restart(target, pid)
        event = FaultEvent(start_ns, time.time_ns(), kind, target, pid)
        log.info("fault: %s", event)
        self.events.append(event)
        return event

    def _await_restart(self, target: str, old_pid: int) -> None:
        """Until ``target`` runs again under a new pid and so does the rest of the cluster
        (the broker main's death restarts its whole group)."""
        def running_again():
            children = (read_state_file(self.data_dir) or {}).get("children", [])
            renewed = any(c["name"] == target and c["pid"] not in (None, old_pid) for c in children)
            return renewed and all(c["state"] == "running" for c in children)
        wait_until(running_again, RESTART_TIMEOUT_S, interval_s=0.05, what=f"{target} restarted")


def events_as_dicts(events: list[FaultEvent]) -> list[dict]:
    return [asdict(e) for e in events]
