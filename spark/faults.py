"""Faults during the load: SIGKILL of a broker's main process or of its flush or reput
worker, SIGSTOP/SIGCONT of the broker main, and a power cut of the broker's host (``power``:
its processes frozen and killed, its store rewritten as the disk holds it), at random times.

With ``namesrv`` given (a failover cluster: NameServers with controllers, replicas whose role
the controller decides) every fault aims at the group's master of the moment (resolved from
the controller at each fault, and the replicas' configs in the data directory's
``children.json``), one more kind stops the master until the controller elects another
(``failover-master``), and between faults the injector waits until the group is healthy
again: a master serving in the controller's epoch with both replicas in its sync set, every
child running. Each event records the epoch and master before and after, and when the new
epoch appeared.

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

import psutil

from rocketbox.cluster.shm import power_cut
from rocketbox.cluster.supervision.run_state import read_state_file
from rocketbox.cluster.testing import child_record, replica_configs, serving_master, wait_until

log = logging.getLogger(__name__)

KILL_MASTER, KILL_FLUSH, KILL_REPUT, PAUSE_MASTER = "kill-master", "kill-flush", "kill-reput", "pause-master"
FAILOVER_MASTER = "failover-master"
# The broker's host loses power: its processes frozen, then killed, its store rewritten as the disk
# holds it (cluster/shm/power_cut.py; the cluster must run under a durable image of that store).
POWER = "power"
KINDS = (KILL_MASTER, KILL_FLUSH, KILL_REPUT, PAUSE_MASTER, FAILOVER_MASTER, POWER)
DEFAULT_KINDS = (KILL_MASTER, KILL_FLUSH, KILL_REPUT, PAUSE_MASTER)
FAILOVER_DEFAULT_KINDS = (KILL_MASTER, FAILOVER_MASTER)
RESTART_TIMEOUT_S = 60.0
FAILOVER_TIMEOUT_S = 30.0    # a stopped master is resumed after this even if nobody was elected
HEALTHY_TIMEOUT_S = 90.0     # between faults (failover mode)


@dataclass
class FaultEvent:
    start_ns: int
    end_ns: int
    kind: str
    target: str
    pid: int
    # Failover mode only: the controller's view around the fault.
    epoch_before: int | None = None
    epoch_after: int | None = None
    master_before: str | None = None
    master_after: str | None = None
    elected_ns: int | None = None    # first seen a new epoch with a master (None: no failover)
    healthy_ns: int | None = None    # the group healthy again (a serving master, sync set of 2)

    @property
    def failover(self) -> bool:
        return self.epoch_before is not None and (self.epoch_after or 0) > self.epoch_before


class FaultInjector:
    """Injects ``kinds`` on ``broker`` every ``interval_s`` (a random span) until stopped."""

    def __init__(self, data_dir: str, broker: str = "broker-a", kinds=DEFAULT_KINDS,
                 interval_s: tuple[float, float] = (2.0, 5.0), pause_s: tuple[float, float] = (0.5, 2.0),
                 seed: int | None = None, namesrv: str | None = None):
        unknown = set(kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(KINDS)}")
        if FAILOVER_MASTER in kinds and not namesrv:
            raise ValueError(f"{FAILOVER_MASTER} needs a failover cluster (its NameServer address)")
        if POWER in kinds and (namesrv or not power_cut.image_root()):
            raise ValueError(f"{POWER} needs a cluster without failover started under a durable image "
                             f"({power_cut.IMAGE_ENV})")
        self.namesrv = namesrv
        self._admin = None
        self._replicas = replica_configs(data_dir, broker) if namesrv else {}
        self._elected_ns: int | None = None   # an election seen while awaiting a restart
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
            self._thread.join(RESTART_TIMEOUT_S + FAILOVER_TIMEOUT_S + HEALTHY_TIMEOUT_S + 10)
        if self._admin is not None:
            self._admin.shutdown()
            self._admin = None
        return self.events

    def _target(self, kind: str, master: str) -> str:
        return {KILL_FLUSH: f"{master}-flush", KILL_REPUT: f"{master}-reput"}.get(kind, master)

    # ---- failover mode: the controller's view ----

    def _controller(self) -> dict:
        if self._admin is None:
            from rocketbox.cluster.client.admin import Admin
            self._admin = Admin(self.namesrv)
        return self._admin.controller_group(self.broker)

    def healthy(self) -> tuple[str, dict] | None:
        """(master child, controller view) when the group is healthy (``serving_master``), else None."""
        try:
            view = self._controller()
        except Exception:   # no controller leader yet
            return None
        master = serving_master(self.data_dir, self._replicas, view)
        return (master, view) if master else None

    def await_healthy(self, timeout_s: float = HEALTHY_TIMEOUT_S) -> tuple[str, dict]:
        return wait_until(self.healthy, timeout_s, interval_s=0.1, what=f"{self.broker} healthy (master and slave in sync)")

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.rng.uniform(*self.interval_s)):
                self.inject(self.rng.choice(self.kinds))
        except BaseException as exc:   # reported by the job, not lost in a thread
            log.exception("fault injection stopped")
            self.error = exc

    def inject(self, kind: str) -> FaultEvent:
        master, view = self.await_healthy() if self.namesrv else (self.broker, {})
        target = self._target(kind, master)
        child = child_record(self.data_dir, target)
        pid = child["pid"]
        epoch = view.get("epoch")
        elected_ns = self._elected_ns = None
        start_ns = time.time_ns()
        if kind == PAUSE_MASTER:
            os.kill(pid, signal.SIGSTOP)
            try:
                self._stop.wait(self.rng.uniform(*self.pause_s))
            finally:
                os.kill(pid, signal.SIGCONT)
        elif kind == FAILOVER_MASTER:
            os.kill(pid, signal.SIGSTOP)
            try:   # not cut short by stop(): a fault under way ends as it began
                elected_ns = self._await_new_epoch(epoch, FAILOVER_TIMEOUT_S)
            finally:
                os.kill(pid, signal.SIGCONT)
        elif kind == POWER:
            self._power_cut()
            self._await_restart(target, pid)
        else:
            os.kill(pid, signal.SIGKILL)
            self._await_restart(target, pid)
        event = FaultEvent(start_ns, time.time_ns(), kind, target, pid)
        if self.namesrv:
            new_master, new_view = self.await_healthy()
            event.epoch_before, event.master_before = epoch, master
            event.epoch_after, event.master_after = new_view["epoch"], new_master
            event.healthy_ns = time.time_ns()
            if event.failover:
                # A kill may be followed by an election too (seen by now, not timed as closely).
                event.elected_ns = elected_ns or self._elected_ns or event.healthy_ns
        log.info("fault: %s", event)
        self.events.append(event)
        return event

    def _power_cut(self) -> None:
        """Freeze the broker group's processes, kill them, rewrite their store as the disk holds it;
        the supervisor, stopped meanwhile so it restarts nothing early, then restarts the group."""
        state = read_state_file(self.data_dir) or {}
        group = [c["pid"] for c in state.get("children", []) if c.get("pid") and
                 (c["name"] == self.broker or c["name"].startswith(self.broker + "-"))]
        supervisor = state["supervisor_pid"]
        os.kill(supervisor, signal.SIGSTOP)
        try:
            for sig in (signal.SIGSTOP, signal.SIGKILL):
                for pid in group:
                    try:
                        os.kill(pid, sig)
                    except ProcessLookupError:
                        pass
            # Dead (zombies of the stopped supervisor hold no file open): wait until each is.
            wait_until(lambda: all(_gone(pid) for pid in group), 10, interval_s=0.01, what="the group dead")
            report = power_cut.cut(power_cut.image_root(), os.environ[power_cut.IMAGE_ENV], self.rng)
            log.info("power cut of %s: %s", self.broker, dict(report))
        finally:
            os.kill(supervisor, signal.SIGCONT)

    def _await_new_epoch(self, epoch: int, timeout_s: float) -> int | None:
        """Until the controller names a master in an epoch above ``epoch``; when (None: not in time)."""
        def elected():
            try:
                view = self._controller()
            except Exception:
                return None
            return view.get("epoch", 0) > epoch and view.get("masterAddress") and time.time_ns()
        try:
            return wait_until(elected, timeout_s, interval_s=0.05, what="a new epoch")
        except TimeoutError:
            log.warning("no new master of %s within %.0f s of stopping the master", self.broker, timeout_s)
            return None

    def _await_restart(self, target: str, old_pid: int) -> None:
        """Until ``target`` runs again under a new pid and so does the rest of the cluster
        (the broker main's death restarts its whole group)."""
        epoch = self._controller().get("epoch", 0) if self.namesrv else None
        self._elected_ns = None

        def running_again():
            if epoch is not None and self._elected_ns is None:   # watch for an election meanwhile
                try:
                    view = self._controller()
                    if view.get("epoch", 0) > epoch and view.get("masterAddress"):
                        self._elected_ns = time.time_ns()
                except Exception:
                    pass
            children = (read_state_file(self.data_dir) or {}).get("children", [])
            renewed = any(c["name"] == target and c["pid"] not in (None, old_pid) for c in children)
            return renewed and all(c["state"] == "running" for c in children)
        wait_until(running_again, RESTART_TIMEOUT_S, interval_s=0.05, what=f"{target} restarted")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def events_as_dicts(events: list[FaultEvent]) -> list[dict]:
    out = []
    for e in events:
        row = asdict(e)
        if e.epoch_before is not None:
            row["failover"] = e.failover
            row["to_new_master_s"] = (e.elected_ns - e.start_ns) / 1e9 if e.elected_ns else None
            row["to_healthy_s"] = (e.healthy_ns - e.start_ns) / 1e9 if e.healthy_ns else None
        out.append(row)
    return out
