"""The process supervisor behind ``cluster up`` (SPEC §1), modelled on gunicorn's arbiter.

What it does:

* **A declarative table** of :class:`ChildSpec`: name, command, role, fate-sharing
  group, start order, ready check, restart policy. Each child is a fresh
  interpreter (``subprocess`` = fork + exec): no ZeroMQ context or mmap ever
  crosses a fork, and this module creates neither.
* **Start in order**: a child is started only once every child before it is
  ready (the readiness line of :mod:`cluster.procs.lifecycle`), each within its
  own deadline. During ``start()`` any failure stops what was started and raises
  :class:`BootError` with the child's exit reason and the tail of its log.
* **Watch**: signal handlers only enqueue (plus ``signal.set_wakeup_fd`` to wake
  the loop); one loop (:meth:`Supervisor.step`) dispatches, reaps with
  ``waitpid(-1, WNOHANG)``, explains deaths ("killed by SIGKILL (perhaps out of
  memory?)"), and restarts with exponential backoff.
* **Fate-sharing groups**: a group (one broker: its main process plus flush,
  reput and allocate workers) has a leader, started first. When the leader dies
  the rest of the group is stopped (SIGTERM, SIGKILL after a deadline) and, once
  all are gone, the group restarts in start order, so the broker recovers its
  store with no worker running. A non-leader's death restarts only it.
* **Role changes restart at once**: a child exiting with ``EXIT_ROLE_CHANGED`` (a broker
  replica the failover controller gave another role) is restarted without back-off.
* **Boot errors halt**: a child exiting with ``EXIT_BOOT_ERROR`` before it is
  ready stops the supervisor with the reason instead of a restart loop.
* **Stop** (SIGTERM, SIGINT, or :meth:`Supervisor.stop`): children are stopped
  one at a time in reverse start order, each SIGTERM then SIGKILL after its
  ``stop_timeout_s``. A second stop signal kills everything left at once.
* **No orphans**: every child gets ``PR_SET_PDEATHSIG=SIGTERM`` between fork and
  exec (it survives exec), so a SIGKILLed supervisor still takes its children
  along; children set it again themselves (``lifecycle.install_parent_death_signal``).
  The death signal follows the *thread* that forked: drive the supervisor from
  the thread that lives as long as it (the main thread).
* **Run-state file** ``<data_dir>/cluster.json`` (see :data:`STATE_FILE_NAME` and
  :meth:`Supervisor.snapshot`), rewritten atomically on every change and every
  heartbeat; ``cluster status`` reads it and ``cluster down`` sends SIGTERM to
  its ``supervisor_pid``. A ``supervisor.lock`` (flock) keeps two supervisors
  off one data directory.
* **Logs**: each child's stdout and stderr are appended to
  ``<data_dir>/logs/<name>.log``, so a crash leaves evidence.

The loop is steppable (:meth:`Supervisor.step`, :meth:`Supervisor.run_until`), so
tests drive it from the test's own thread without sleeping.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import fcntl
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from cluster.procs import lifecycle
from cluster.shm.json_store import write_json
from cluster.procs.lifecycle import EXIT_BOOT_ERROR, EXIT_OK, EXIT_ROLE_CHANGED

STATE_FILE_NAME = "cluster.json"
STATE_FORMAT_VERSION = 1
LOCK_FILE_NAME = "supervisor.lock"
LOGS_DIR_NAME = "logs"
SUPERVISOR_LOG_NAME = "supervisor.log"

CHILD_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

# How much of a child's log a BootError quotes.
LOG_TAIL_LINES = 20
LOG_TAIL_BYTES_MAX = 8192
# After SIGKILL a process can still take a moment to be reaped (or hang in D state).
KILL_REAP_TIMEOUT_S = 5.0
# Loop wake-up ceiling when signals cannot wake us (driven from a non-main thread).
POLL_INTERVAL_NO_SIGNALS_S = 0.05

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT)
_HANDLED_SIGNALS = (*_STOP_SIGNALS, signal.SIGCHLD)
_SIGNAL_QUEUE_LENGTH_MAX = 32

log_default = logging.getLogger("rocketbox.supervisor")


class ReadyCheck(enum.StrEnum):
    NOTIFY = "notify"  # wait for the lifecycle readiness line
    SPAWNED = "spawned"  # ready as soon as exec succeeded (programs that do not speak the protocol)


class RestartPolicy(enum.StrEnum):
    ALWAYS = "always"
    ON_FAILURE = "on-failure"  # not after exit code 0
    NEVER = "never"


class ChildState(enum.StrEnum):
    PENDING = "pending"  # not started yet
    STARTING = "starting"  # spawned, readiness line not seen yet
    RUNNING = "running"  # ready
    STOPPING = "stopping"  # stop signal sent by us
    BACKOFF = "backoff"  # dead, restart scheduled
    EXITED = "exited"  # dead, restart policy says stay down
    STOPPED = "stopped"  # stopped by us
    FAILED = "failed"  # failed to boot during start() or with EXIT_BOOT_ERROR


class SupervisorState(enum.StrEnum):
    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


_ALIVE_STATES = (ChildState.STARTING, ChildState.RUNNING, ChildState.STOPPING)
# States that no longer hold back the children after them in a group.
_TERMINAL_STATES = (ChildState.EXITED, ChildState.STOPPED, ChildState.FAILED)


class SupervisorError(Exception):
    """The supervisor cannot do what was asked (bad table, data dir in use, ...)."""


class BootError(SupervisorError):
    """A child did not become ready during ``start()``; everything started was stopped."""

    def __init__(self, message: str, child_name: str | None = None, reason: str | None = None,
                 exit_code: int | None = None, log_tail: str = ""):
        super().__init__(message)
        self.child_name = child_name
        self.reason = reason
        self.exit_code = exit_code
        self.log_tail = log_tail


class StopRequested(SupervisorError):
    """A stop signal arrived while ``start()`` was still starting children."""


@dataclass(frozen=True)
class ChildSpec:
    """One row of the supervisor's table.

    Give either ``argv`` (the full command) or ``module`` (+ ``args``), which runs
    ``python -P -m module *args`` with the supervisor's own Python (lifecycle.python_module_command).
    ``group`` names a fate-sharing group (default: the child alone); its
    ``leader`` must come first in the group's start order. Children start in
    ``(start_order, position in the table)`` order.
    """

    name: str
    argv: tuple[str, ...] = ()
    module: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    group: str | None = None
    role: str = ""
    leader: bool = False
    start_order: int = 0
    ready: ReadyCheck = ReadyCheck.NOTIFY
    ready_timeout_s: float = 10.0
    restart: RestartPolicy = RestartPolicy.ALWAYS
    stop_signal: int = signal.SIGTERM
    stop_timeout_s: float = 5.0
    backoff_initial_s: float = 0.1
    backoff_max_s: float = 5.0
    # Up this long since spawn: the next restart starts from backoff_initial_s again.
    backoff_reset_after_s: float = 10.0
    cwd: str | None = None
    # Watchdog: a running child must keep the u64 (wall-clock ms, native order) at
    # ``heartbeat_offset`` of ``heartbeat_path`` fresher than ``heartbeat_timeout_s``, or it
    # is killed and restarted as if it had died (a hung process serves nobody). 0 = off.
    heartbeat_path: str | None = None
    heartbeat_offset: int = 0
    heartbeat_timeout_s: float = 0.0

    def __post_init__(self) -> None:
        # Accept lists (JSON, call sites) but keep the frozen record immutable.
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "ready", ReadyCheck(self.ready))
        object.__setattr__(self, "restart", RestartPolicy(self.restart))

    @property
    def group_name(self) -> str:
        return self.group or self.name

    def command(self) -> list[str]:
        if self.module:
            return lifecycle.python_module_command(self.module, *self.args)
        return list(self.argv)

    def validate(self) -> None:
        if not CHILD_NAME_PATTERN.match(self.name):
            raise ValueError(f"child name {self.name!r} must match {CHILD_NAME_PATTERN.pattern}")
        if bool(self.argv) == bool(self.module):
            raise ValueError(f"child {self.name}: give exactly one of argv and module")
        if self.args and not self.module:
            raise ValueError(f"child {self.name}: args go with module; put them in argv")
        for label in ("ready_timeout_s", "stop_timeout_s", "backoff_initial_s", "backoff_max_s"):
            if getattr(self, label) <= 0:
                raise ValueError(f"child {self.name}: {label} must be positive")
        if self.backoff_max_s < self.backoff_initial_s:
            raise ValueError(f"child {self.name}: backoff_max_s is below backoff_initial_s")
        for key, value in self.env.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ValueError(f"child {self.name}: env entries must be str -> str")

    def to_dict(self) -> dict:
        raw = dataclasses.asdict(self)
        raw["argv"], raw["args"] = list(self.argv), list(self.args)
        raw["ready"], raw["restart"] = str(self.ready), str(self.restart)
        return raw

    @classmethod
    def from_dict(cls, raw: Mapping) -> "ChildSpec":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(raw) - known
        if unknown:
            raise ValueError(f"unknown ChildSpec fields: {sorted(unknown)}")
        return cls(**raw)


def validate_table(specs: Sequence[ChildSpec]) -> None:
    """Check the table as a whole: unique names, one leader per group, leader first."""
    if not specs:
        raise ValueError("the supervisor needs at least one child")
    seen: set[str] = set()
    for spec in specs:
        spec.validate()
        if spec.name in seen:
            raise ValueError(f"child name {spec.name!r} appears twice")
        seen.add(spec.name)
    ordered = sorted(enumerate(specs), key=lambda pair: (pair[1].start_order, pair[0]))
    groups: dict[str, list[ChildSpec]] = {}
    for _, spec in ordered:
        groups.setdefault(spec.group_name, []).append(spec)
    for group, members in groups.items():
        leaders = [m.name for m in members if m.leader]
        if len(leaders) > 1:
            raise ValueError(f"group {group!r} has {len(leaders)} leaders: {leaders}")
        if leaders and members[0].name != leaders[0]:
            # The leader recovers shared state; its workers must start after it.
            raise ValueError(
                f"group {group!r}: leader {leaders[0]!r} must start before {members[0].name!r}"
            )


def describe_exit(status: int, kill_sent: bool) -> str:
    """A raw wait status in words, with gunicorn's hint for a SIGKILL nobody here sent."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        text = f"exit code {code}"
        if code == EXIT_BOOT_ERROR:
            text += " (boot error)"
        elif code == lifecycle.EXIT_PARENT_GONE:
            text += " (parent gone)"
        return text
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    text = f"killed by {name}"
    if os.WIFSIGNALED(status) and os.WCOREDUMP(status):
        text += " (core dumped)"
    if -code == signal.SIGKILL and not kill_sent:
        text += " (perhaps out of memory?)"
    return text


def read_log_tail(path: str, start_offset: int = 0, lines_max: int = LOG_TAIL_LINES) -> str:
    """The last lines of a log written since ``start_offset`` (bounded read)."""
    try:
        with open(path, "rb") as f:
            end = f.seek(0, os.SEEK_END)
            begin = max(start_offset, end - LOG_TAIL_BYTES_MAX)
            f.seek(begin)
            data = f.read(end - begin)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines_max:])


def read_state_file(data_dir: str) -> dict | None:
    """cluster.json as a dict, or None when absent or unreadable."""
    try:
        with open(os.path.join(data_dir, STATE_FILE_NAME), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class ChildStatistics:
    """What ``cluster status`` shows per child (also the cluster.json child record)."""

    name: str
    role: str
    group: str
    leader: bool
    pid: int | None
    state: str
    restarts: int
    last_exit: str | None
    last_exit_code: int | None
    endpoint: str | None
    ready_info: dict | None
    started_at: float | None  # wall clock, seconds since the epoch
    ready_at: float | None
    backoff_s: float  # delay before the next restart if it died now
    log_path: str


class _Child:
    """Mutable run state of one child; only the supervisor loop touches it."""

    def __init__(self, spec: ChildSpec, position: int, log_path: str):
        self.spec = spec
        self.position = position
        self.log_path = log_path
        self.state = ChildState.PENDING
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.ready_reader: int | None = None
        self.ready_buffer = bytearray()
        self.ready_info: dict | None = None
        self.spawn_count = 0
        self.spawned_at_monotonic = 0.0
        self.started_at: float | None = None
        self.ready_at: float | None = None
        self.ready_deadline = 0.0
        self.kill_deadline: float | None = None
        self.kill_sent = False
        self.boot_timed_out = False
        # Name of the group leader whose death is taking this child down, if any.
        self.restart_with_group: str | None = None
        self.restart_due: float | None = None
        self.backoff_s = spec.backoff_initial_s
        self.last_exit: str | None = None
        self.last_exit_code: int | None = None
        self.log_offset_at_spawn = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def alive(self) -> bool:
        return self.pid is not None

    def take_backoff(self, now: float) -> float:
        """Delay for this restart; doubles the next one, unless the child had been stable."""
        if now - self.spawned_at_monotonic >= self.spec.backoff_reset_after_s:
            self.backoff_s = self.spec.backoff_initial_s
        delay = self.backoff_s
        self.backoff_s = min(self.backoff_s * 2, self.spec.backoff_max_s)
        return delay

    def statistics(self) -> ChildStatistics:
        endpoint = (self.ready_info or {}).get("endpoint")
        return ChildStatistics(
            name=self.name,
            role=self.spec.role,
            group=self.spec.group_name,
            leader=self.spec.leader,
            pid=self.pid,
            state=str(self.state),
            restarts=max(0, self.spawn_count - 1),
            last_exit=self.last_exit,
            last_exit_code=self.last_exit_code,
            endpoint=endpoint if isinstance(endpoint, str) else None,
            ready_info=self.ready_info,
            started_at=self.started_at,
            ready_at=self.ready_at,
            backoff_s=self.backoff_s,
            log_path=self.log_path,
        )


class Supervisor:
    """Starts, watches, restarts and stops the children of one cluster.

    Single-threaded: all methods run on the thread that called :meth:`start`
    (normally the main thread, which is also the only one that can install
    signal handlers).
    """

    def __init__(self, specs: Sequence[ChildSpec], data_dir: str,
                 log: logging.Logger | None = None, heartbeat_interval_s: float = 1.0):
        specs = list(specs)
        validate_table(specs)
        self.data_dir = os.path.abspath(data_dir)
        self.logs_dir = os.path.join(self.data_dir, LOGS_DIR_NAME)
        self.state_path = os.path.join(self.data_dir, STATE_FILE_NAME)
        self.log = log or log_default
        self.heartbeat_interval_s = heartbeat_interval_s
        children = [
            _Child(spec, position, os.path.join(self.logs_dir, f"{spec.name}.log"))
            for position, spec in enumerate(specs)
        ]
        # Everything iterates in start order; stop walks it backwards.
        self._children = sorted(children, key=lambda c: (c.spec.start_order, c.position))
        self._by_name = {c.name: c for c in self._children}
        self._groups: dict[str, list[_Child]] = {}
        for child in self._children:
            self._groups.setdefault(child.spec.group_name, []).append(child)
        self._by_pid: dict[int, _Child] = {}

        self.state = SupervisorState.NEW
        self.halt_reason: str | None = None
        self._boot_failure: _Child | None = None
        self._stop_requested = False
        self._stop_signal_count = 0
        self._signal_queue: deque[int] = deque()
        self._wake_reader: int | None = None
        self._wake_writer: int | None = None
        self._previous_handlers: dict[int, object] = {}
        self._previous_wakeup_fd: int | None = None
        self._signals_installed = False
        self._lock_fd: int | None = None
        self._started_at: float | None = None
        self._last_change = time.time()
        self._state_dirty = True
        self._next_heartbeat = 0.0
        self._own_pid = os.getpid()

    # ----------------------------------------------------------------- public

    def start(self) -> None:
        """Start every child in order; return once all are ready.

        Raises :class:`BootError` (everything already started is stopped first),
        :class:`StopRequested` if a stop signal arrived meanwhile, or
        :class:`SupervisorError` if another supervisor holds the data directory.
        When this process was itself started with ``ROCKETBOX_READY_FD`` (by
        :func:`spawn_detached`), it reports ready on that pipe at the end.
        """
        if self.state != SupervisorState.NEW:
            raise SupervisorError(f"start() called in state {self.state}")
        os.makedirs(self.logs_dir, exist_ok=True)
        self._acquire_lock()
        lifecycle.preload_libc()  # before any fork: the child must not dlopen between fork and exec
        self._install_signal_handlers()
        self.state = SupervisorState.STARTING
        self._started_at = time.time()
        now = time.monotonic()
        for child in self._children:
            child.restart_due = now
        self._mark_changed()
        self.log.info("supervisor %d starting %d children in %s", os.getpid(),
                      len(self._children), self.data_dir)
        # Each child has its own ready deadline; this only bounds a logic error.
        deadline = now + sum(c.spec.ready_timeout_s for c in self._children) + 10.0
        try:
            while not all(c.state == ChildState.RUNNING for c in self._children):
                if self._boot_failure is not None:
                    raise self._boot_error(self._boot_failure)
                if self._stop_requested:
                    raise StopRequested("stop requested while starting")
                remaining_s = deadline - time.monotonic()
                if remaining_s <= 0:
                    raise BootError("children did not all become ready in time")
                self.step(min(remaining_s, self.heartbeat_interval_s))
        except StopRequested:
            self.stop()
            raise
        except BaseException as exc:
            # cluster.json then says "failed" with the first line of the reason.
            self.halt_reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            self.stop()
            raise
        self.state = SupervisorState.READY
        self._mark_changed()
        self._write_state()
        self.log.info("all %d children ready", len(self._children))
        lifecycle.notify_ready({"pid": os.getpid(), "state_file": self.state_path})

    def step(self, timeout_s: float = 1.0) -> None:
        """One bounded turn of the loop: wait for an event or timer, then dispatch.

        Waits at most ``timeout_s`` (less if a deadline or restart falls due).
        Once running, a stop signal, :meth:`request_stop` or a halt makes this
        step call :meth:`stop`, so a caller's own loop can simply run
        ``while sup.state not in ("stopped", "failed"): sup.step(0.5)``.
        """
        if self.state in (SupervisorState.NEW, SupervisorState.STOPPED, SupervisorState.FAILED):
            raise SupervisorError(f"step() called in state {self.state}")
        self._start_due_children()
        readable = self._wait_for_events(self._wait_budget_s(timeout_s))
        self._dispatch_signals()
        for child in self._children:
            if child.ready_reader is not None and child.ready_reader in readable:
                self._read_ready_pipe(child)
        self._reap_children()
        self._enforce_deadlines()
        self._check_heartbeats()
        self._start_due_children()
        self._write_state_if_due()
        if self._stop_requested and self.state == SupervisorState.READY:
            self.stop()

    def run_until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Step until ``condition()`` holds (True) or ``timeout_s`` passes (False)."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                return False
            self.step(min(remaining_s, self.heartbeat_interval_s))
        return True

    def run_forever(self) -> int:
        """Watch until a stop signal, :meth:`request_stop` or a halt; then stop.

        Returns the supervisor's exit code: ``EXIT_OK``, or ``EXIT_BOOT_ERROR``
        when a child's boot error halted it (see :attr:`halt_reason`).
        """
        if self.state not in (SupervisorState.READY, SupervisorState.STOPPED, SupervisorState.FAILED):
            raise SupervisorError(f"run_forever() called in state {self.state}; call start() first")
        while self.state == SupervisorState.READY:
            self.step(self.heartbeat_interval_s)  # stops the cluster itself once asked to
        return EXIT_BOOT_ERROR if self.halt_reason else EXIT_OK

    def request_stop(self) -> None:
        """Stop at the loop's next turn (what SIGTERM does); :meth:`stop` stops now."""
        self._stop_requested = True

    def stop(self) -> None:
        """Stop all children in reverse start order; idempotent; bounded by the stop deadlines."""
        if self.state in (SupervisorState.STOPPED, SupervisorState.FAILED):
            return
        if self.state == SupervisorState.NEW:
            self.state = SupervisorState.STOPPED
            return
        self.state = SupervisorState.STOPPING
        self._stop_requested = True
        self._mark_changed()
        self._write_state()
        self.log.info("stopping children in reverse start order")
        try:
            for child in reversed(self._children):
                child.restart_due = None
                if child.alive:
                    self._stop_one_and_wait(child)
                elif child.state not in _TERMINAL_STATES:
                    self._set_state(child, ChildState.STOPPED)
        finally:
            for child in self._children:
                self._close_ready_reader(child)
            self._restore_signal_handlers()
            self.state = SupervisorState.FAILED if self.halt_reason else SupervisorState.STOPPED
            self._mark_changed()
            self._write_state()
            self._release_lock()
            self.log.info("supervisor stopped%s",
                          f" ({self.halt_reason})" if self.halt_reason else "")

    def statistics(self) -> dict[str, ChildStatistics]:
        """One typed record per child, keyed by name, in start order."""
        return {c.name: c.statistics() for c in self._children}

    def snapshot(self) -> dict:
        """The cluster.json document.

        ``{"format_version": 1, "supervisor_pid", "state" (new|starting|ready|
        stopping|stopped|failed), "reason" (why it failed, or null), "data_dir",
        "started_at", "last_change", "heartbeat" (wall-clock seconds),
        "heartbeat_interval_s", "children": [ChildStatistics as dicts, start order]}``.
        A reader that finds ``state`` ready but ``heartbeat`` older than a few
        intervals (or a dead pid) is looking at a supervisor that was SIGKILLed.
        """
        return {
            "format_version": STATE_FORMAT_VERSION,
            "supervisor_pid": self._own_pid,
            "state": str(self.state),
            "reason": self.halt_reason,
            "data_dir": self.data_dir,
            "started_at": self._started_at,
            "last_change": self._last_change,
            "heartbeat": time.time(),
            "heartbeat_interval_s": self.heartbeat_interval_s,
            "children": [dataclasses.asdict(c.statistics()) for c in self._children],
        }

    def child_pid(self, name: str) -> int | None:
        return self._by_name[name].pid

    def __enter__(self) -> "Supervisor":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    # ------------------------------------------------------------- spawning

    def _start_due_children(self) -> None:
        """Spawn every child whose restart is due and whose predecessors allow it."""
        now = time.monotonic()
        for child in self._children:
            if self._stop_requested:
                return
            if child.state in (ChildState.PENDING, ChildState.BACKOFF) and self._may_start(child, now):
                self._spawn(child)

    def _may_start(self, child: _Child, now: float) -> bool:
        if child.restart_due is None or now < child.restart_due:
            return False
        if self.state == SupervisorState.STARTING:
            # First boot: strictly one after another across the whole table.
            for other in self._children:
                if other is child:
                    return True
                if other.state != ChildState.RUNNING:
                    return False
        members = self._groups[child.spec.group_name]
        if child.spec.leader:
            # Recovery needs the group's shared state to itself: no worker may run.
            return all(not m.alive for m in members if m is not child)
        for member in members:
            if member is child:
                return True
            if member.state != ChildState.RUNNING and member.state not in _TERMINAL_STATES:
                return False
        return True

    def _child_env(self, child: _Child, ready_writer: int) -> dict[str, str]:
        env = dict(os.environ)
        # Evidence first: a crashing child's last words must reach its log.
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(child.spec.env)
        env[lifecycle.READY_FD_ENV] = str(ready_writer)
        env[lifecycle.PARENT_PID_ENV] = str(self._own_pid)
        env[lifecycle.CHILD_NAME_ENV] = child.name
        return env

    def _spawn(self, child: _Child) -> None:
        command = child.spec.command()
        attempt = child.spawn_count + 1
        ready_reader, ready_writer = os.pipe()
        supervisor_pid = self._own_pid

        def before_exec() -> None:
            # Runs in the forked child, before exec: one syscall each, nothing that locks.
            lifecycle.set_parent_death_signal(signal.SIGTERM)
            if os.getppid() != supervisor_pid:
                os._exit(lifecycle.EXIT_PARENT_GONE)

        with open(child.log_path, "ab") as log_file:
            child.log_offset_at_spawn = log_file.tell()
            log_file.write(
                f"--- rocketbox supervisor: starting {child.name} (attempt {attempt}) at "
                f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(command)}\n".encode()
            )
            log_file.flush()
            try:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=log_file,
                    env=self._child_env(child, ready_writer),
                    cwd=child.spec.cwd,
                    pass_fds=(ready_writer,),
                    # Own process group: a terminal's Ctrl-C reaches only the
                    # supervisor, which then stops children in order; SIGKILL
                    # of a straggler also takes any helper it spawned.
                    process_group=0,
                    preexec_fn=before_exec,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                os.close(ready_reader)
                os.close(ready_writer)
                self._on_spawn_failure(child, f"cannot execute {command[0]!r}: {exc}")
                return
        os.close(ready_writer)  # the child holds the only write end: EOF means it is gone

        now = time.monotonic()
        child.proc = proc
        child.pid = proc.pid
        self._by_pid[proc.pid] = child
        child.spawn_count = attempt
        child.spawned_at_monotonic = now
        child.started_at = time.time()
        child.ready_at = None
        child.ready_info = None
        child.ready_buffer.clear()
        child.kill_sent = False
        child.kill_deadline = None
        child.boot_timed_out = False
        child.restart_with_group = None
        child.restart_due = None
        if child.spec.ready == ReadyCheck.SPAWNED:
            os.close(ready_reader)
            self._set_state(child, ChildState.STARTING)
            self._mark_ready(child, None)
        else:
            os.set_blocking(ready_reader, False)
            child.ready_reader = ready_reader
            child.ready_deadline = now + child.spec.ready_timeout_s
            self._set_state(child, ChildState.STARTING)
        self.log.info("started %s (pid %d%s)", child.name, proc.pid,
                      f", restart {attempt - 1}" if attempt > 1 else "")

    def _on_spawn_failure(self, child: _Child, reason: str) -> None:
        # An exec failure repeats on every retry: treat it like a boot error.
        child.last_exit, child.last_exit_code = reason, None
        self.log.error("%s: %s", child.name, reason)
        self._set_state(child, ChildState.FAILED)
        if self.state == SupervisorState.STARTING:
            self._boot_failure = child
        else:
            self._halt(f"{child.name} failed to start: {reason}")

    # ------------------------------------------------------------- readiness

    def _read_ready_pipe(self, child: _Child) -> None:
        """Consume what the child wrote on its readiness pipe (non-blocking)."""
        while child.ready_reader is not None:
            try:
                data = os.read(child.ready_reader, lifecycle.READY_LINE_BYTES_MAX)
            except BlockingIOError:
                return
            if not data:
                # EOF: the child closed the pipe (after notifying, or while dying).
                self._close_ready_reader(child)
                return
            child.ready_buffer += data
            line, newline, _ = child.ready_buffer.partition(b"\n")
            if newline:
                self._close_ready_reader(child)
                try:
                    info = lifecycle.decode_ready_line(bytes(line))
                except ValueError as exc:
                    self.log.warning("%s sent a malformed readiness line (%s); treating it as ready",
                                     child.name, exc)
                    info = None
                if child.state == ChildState.STARTING:
                    self._mark_ready(child, info)
                return
            if len(child.ready_buffer) > lifecycle.READY_LINE_BYTES_MAX:
                self.log.warning("%s: readiness line longer than %d bytes; ignoring it",
                                 child.name, lifecycle.READY_LINE_BYTES_MAX)
                self._close_ready_reader(child)
                return

    def _mark_ready(self, child: _Child, info: dict | None) -> None:
        child.ready_info = info
        child.ready_at = time.time()
        self._set_state(child, ChildState.RUNNING)
        self.log.info("%s ready (pid %s)%s", child.name, child.pid,
                      f" {json.dumps(info, sort_keys=True)}" if info else "")

    def _close_ready_reader(self, child: _Child) -> None:
        if child.ready_reader is not None:
            os.close(child.ready_reader)
            child.ready_reader = None

    # ------------------------------------------------------------- waiting

    def _wait_budget_s(self, timeout_s: float) -> float:
        """``timeout_s``, shortened to the next deadline or restart that falls due."""
        now = time.monotonic()
        wake_at = now + max(0.0, timeout_s)
        for child in self._children:
            if child.state == ChildState.STARTING and not child.kill_sent:
                wake_at = min(wake_at, child.ready_deadline)
            if child.kill_deadline is not None and not child.kill_sent:
                wake_at = min(wake_at, child.kill_deadline)
            if child.restart_due is not None and child.state in (ChildState.BACKOFF, ChildState.PENDING):
                wake_at = min(wake_at, child.restart_due)
        wake_at = min(wake_at, self._next_heartbeat)
        budget_s = max(0.0, wake_at - now)
        if not self._signals_installed:
            budget_s = min(budget_s, POLL_INTERVAL_NO_SIGNALS_S)
        return budget_s

    def _wait_for_events(self, timeout_s: float) -> set[int]:
        fds = [c.ready_reader for c in self._children if c.ready_reader is not None]
        if self._wake_reader is not None:
            fds.append(self._wake_reader)
        if not fds:
            # Only without signal handlers (non-main thread); the budget is then short.
            if timeout_s > 0:
                time.sleep(timeout_s)
            return set()
        readable, _, _ = select.select(fds, [], [], timeout_s)
        if self._wake_reader is not None and self._wake_reader in readable:
            self._drain_wake_pipe()
        return set(readable)

    def _drain_wake_pipe(self) -> None:
        while True:
            try:
                if not os.read(self._wake_reader, 512):
                    return
            except BlockingIOError:
                return

    # ------------------------------------------------------------- signals

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            self.log.warning("supervisor driven from a non-main thread: no signal handlers, "
                             "polling every %.2f s", POLL_INTERVAL_NO_SIGNALS_S)
            return
        self._wake_reader, self._wake_writer = os.pipe()
        os.set_blocking(self._wake_reader, False)
        os.set_blocking(self._wake_writer, False)
        self._previous_wakeup_fd = signal.set_wakeup_fd(self._wake_writer, warn_on_full_buffer=False)
        for signum in _HANDLED_SIGNALS:
            self._previous_handlers[signum] = signal.signal(signum, self._enqueue_signal)
        self._signals_installed = True

    def _enqueue_signal(self, signum: int, frame) -> None:
        # Handler: enqueue only; the loop does the work (gunicorn's SIG_QUEUE).
        if signum != signal.SIGCHLD and len(self._signal_queue) < _SIGNAL_QUEUE_LENGTH_MAX:
            self._signal_queue.append(signum)

    def _restore_signal_handlers(self) -> None:
        if not self._signals_installed:
            return
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._previous_wakeup_fd if self._previous_wakeup_fd is not None else -1)
        self._previous_handlers.clear()
        for fd in (self._wake_reader, self._wake_writer):
            if fd is not None:
                os.close(fd)
        self._wake_reader = self._wake_writer = None
        self._signals_installed = False

    def _dispatch_signals(self) -> None:
        while self._signal_queue:
            signum = self._signal_queue.popleft()
            if signum in _STOP_SIGNALS:
                self._handle_stop_signal(signum)

    def _handle_stop_signal(self, signum: int) -> None:
        self._stop_signal_count += 1
        name = signal.Signals(signum).name
        if self._stop_signal_count == 1:
            self.log.info("%s received: stopping the cluster", name)
            self._stop_requested = True
        else:
            # The operator insists: do not wait for graceful exits any longer.
            self.log.warning("%s received again: killing all children now", name)
            for child in self._children:
                if child.alive:
                    self._kill(child)

    # ------------------------------------------------------------- reaping

    def _reap_children(self) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self._by_pid.pop(pid, None)
            if child is None:
                self.log.debug("reaped pid %d, not one of ours (status %d)", pid, status)
                continue
            self._on_child_exit(child, status)

    def _on_child_exit(self, child: _Child, status: int) -> None:
        if child.state == ChildState.STARTING and child.ready_reader is not None:
            # It may have written its readiness line just before dying.
            self._read_ready_pipe(child)
        self._close_ready_reader(child)
        code = os.waitstatus_to_exitcode(status)
        reason = describe_exit(status, child.kill_sent)
        if child.boot_timed_out:
            reason = f"not ready within {child.spec.ready_timeout_s:g} s, then {reason}"
        if child.proc is not None:
            child.proc.returncode = code  # we reaped it; keep Popen from waiting on a reused pid
        pid, child.pid, child.proc = child.pid, None, None
        child.kill_deadline = None
        child.last_exit, child.last_exit_code = reason, code
        died_booting = child.state == ChildState.STARTING

        if child.state == ChildState.STOPPING or self.state == SupervisorState.STOPPING:
            if child.restart_with_group and self.state != SupervisorState.STOPPING:
                child.last_exit = reason = f"stopped with its group, {child.restart_with_group} died ({reason})"
                self._set_state(child, ChildState.BACKOFF)  # restart_due set by the leader's death
            else:
                self._set_state(child, ChildState.STOPPED)
            self.log.info("%s (pid %d) stopped: %s", child.name, pid, reason)
            return

        if code == EXIT_ROLE_CHANGED and not died_booting and self.state != SupervisorState.STARTING:
            # Not a crash: a broker replica the failover controller gave another role. A back-off here
            # could outlast the controller's time-out and make it look dead in its new role.
            self.log.info("%s (pid %d) restarts in a new role", child.name, pid)
            self._schedule_restart(child, backoff=False)
            return
        self.log.warning("%s (pid %d) %s: %s", child.name, pid,
                         "died while starting" if died_booting else "died", reason)
        if self.state == SupervisorState.STARTING:
            self._set_state(child, ChildState.FAILED)
            if self._boot_failure is None:
                self._boot_failure = child
            return
        if died_booting and code == EXIT_BOOT_ERROR:
            self._set_state(child, ChildState.FAILED)
            tail = read_log_tail(child.log_path, child.log_offset_at_spawn)
            self._halt(f"{child.name} failed to boot ({reason}); see {child.log_path}"
                       + (f"; last output: {tail.splitlines()[-1]}" if tail else ""))
            return
        policy = child.spec.restart
        if policy == RestartPolicy.NEVER or (policy == RestartPolicy.ON_FAILURE and code == 0):
            self._set_state(child, ChildState.EXITED)
            return
        self._schedule_restart(child)

    def _schedule_restart(self, child: _Child, backoff: bool = True) -> None:
        now = time.monotonic()
        delay_s = child.take_backoff(now) if backoff else 0.0
        child.restart_due = now + delay_s
        self._set_state(child, ChildState.BACKOFF)
        members = [m for m in self._groups[child.spec.group_name] if m is not child]
        if not child.spec.leader or not members:
            self.log.info("restarting %s in %.2f s", child.name, delay_s)
            return
        self.log.warning("%s led group %s: stopping %d member(s), restarting the group in %.2f s",
                         child.name, child.spec.group_name, len(members), delay_s)
        for member in reversed(members):
            if member.state in (ChildState.EXITED, ChildState.FAILED):
                continue  # its own policy keeps it down
            member.restart_due = now + delay_s
            if member.alive:
                member.restart_with_group = child.name
                if member.state != ChildState.STOPPING:
                    self._send_stop(member)
            else:
                self._set_state(member, ChildState.BACKOFF)

    def _halt(self, reason: str) -> None:
        """A restart cannot help: stop everything and report ``reason``."""
        self.log.error("halting: %s", reason)
        if self.halt_reason is None:
            self.halt_reason = reason
        self._stop_requested = True
        self._mark_changed()

    # ------------------------------------------------------------- stopping

    def _send_stop(self, child: _Child) -> None:
        self._set_state(child, ChildState.STOPPING)
        child.kill_deadline = time.monotonic() + child.spec.stop_timeout_s
        try:
            os.kill(child.pid, child.spec.stop_signal)
        except ProcessLookupError:
            pass  # already dead, not reaped yet: the reaper will see it

    def _check_heartbeats(self) -> None:
        """Kill a running child whose heartbeat went stale; the reaper then restarts it.

        Reads the heartbeat with pread, never mmap: the supervisor maps nothing."""
        now = time.time()
        for child in self._children:
            spec = child.spec
            if (spec.heartbeat_timeout_s <= 0 or not spec.heartbeat_path or child.state != ChildState.RUNNING
                    or child.kill_sent or child.ready_at is None or now - child.ready_at < spec.heartbeat_timeout_s):
                continue
            try:
                with open(spec.heartbeat_path, "rb") as f:
                    raw = os.pread(f.fileno(), 8, spec.heartbeat_offset)
            except OSError:
                continue  # not created yet, or being recreated: nothing to judge
            if len(raw) != 8:
                continue
            beat_ms = int.from_bytes(raw, sys.byteorder)
            silent_s = now - beat_ms / 1000
            if silent_s > spec.heartbeat_timeout_s:
                self.log.error("%s (pid %s) has not beaten its heartbeat for %.1f s (limit %.1f s): "
                               "killing it to restart it", child.name, child.pid, silent_s,
                               spec.heartbeat_timeout_s)
                self._kill(child)

    def _kill(self, child: _Child) -> None:
        child.kill_sent = True
        try:
            # Not reaped yet, so its pid (= its process group id) cannot have been reused.
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(child.pid, signal.SIGKILL)

    def _enforce_deadlines(self) -> None:
        now = time.monotonic()
        for child in self._children:
            if not child.alive:
                continue
            # Also when it closed its ready pipe without a line: it is still not ready.
            if child.state == ChildState.STARTING and now >= child.ready_deadline \
                    and not child.kill_sent:
                self.log.warning("%s (pid %d) not ready within %g s: killing it",
                                 child.name, child.pid, child.spec.ready_timeout_s)
                child.boot_timed_out = True
                self._close_ready_reader(child)
                self._kill(child)
            elif child.kill_deadline is not None and now >= child.kill_deadline and not child.kill_sent:
                self.log.warning("%s (pid %d) still running %g s after the stop signal: SIGKILL",
                                 child.name, child.pid, child.spec.stop_timeout_s)
                self._kill(child)

    def _stop_one_and_wait(self, child: _Child) -> None:
        if child.state != ChildState.STOPPING:
            self._send_stop(child)
        child.restart_with_group = None
        deadline = (child.kill_deadline or time.monotonic()) + KILL_REAP_TIMEOUT_S
        while child.alive:
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                self.log.error("%s (pid %d) survived SIGKILL for %g s; giving up on it",
                               child.name, child.pid, KILL_REAP_TIMEOUT_S)
                return
            self.step(min(remaining_s, self.heartbeat_interval_s))

    # ------------------------------------------------------------- state file

    def _set_state(self, child: _Child, state: ChildState) -> None:
        if child.state != state:
            child.state = state
            self._mark_changed()

    def _mark_changed(self) -> None:
        self._last_change = time.time()
        self._state_dirty = True

    def _write_state_if_due(self) -> None:
        if self._state_dirty or time.monotonic() >= self._next_heartbeat:
            self._write_state()

    def _write_state(self) -> None:
        try:
            write_json(self.state_path, self.snapshot(), durable=False)  # run state, not data
        except OSError as exc:
            self.log.error("cannot write %s: %s", self.state_path, exc)
        self._state_dirty = False
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval_s

    def _acquire_lock(self) -> None:
        path = os.path.join(self.data_dir, LOCK_FILE_NAME)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = (read_state_file(self.data_dir) or {}).get("supervisor_pid")
            raise SupervisorError(f"another supervisor (pid {holder}) runs on {self.data_dir}")
        self._lock_fd = fd

    def _release_lock(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _boot_error(self, child: _Child) -> BootError:
        tail = read_log_tail(child.log_path, child.log_offset_at_spawn)
        label = f"{child.name} ({child.spec.role})" if child.spec.role else child.name
        message = f"{label} failed to start: {child.last_exit}"
        if tail:
            message += f"\n--- last lines of {child.log_path} ---\n{tail}"
        return BootError(message, child_name=child.name, reason=child.last_exit,
                         exit_code=child.last_exit_code, log_tail=tail)


# ----------------------------------------------------------------- detached start


def spawn_detached(argv: Sequence[str], data_dir: str, ready_timeout_s: float = 30.0,
                   env: Mapping[str, str] | None = None) -> int:
    """Start a supervisor process in its own session and wait until it is ready.

    ``argv`` runs a supervisor (e.g. ``[sys.executable, "-m",
    "cluster.procs.supervisor", "--data-dir", d, "--specs", f]``; ``argv[0]`` is
    looked up on PATH). It gets a new session (setsid: no controlling terminal,
    no terminal signals), stdin from /dev/null, and stdout and stderr appended
    to ``<data_dir>/logs/supervisor.log``. Readiness is the lifecycle line on
    ``ROCKETBOX_READY_FD`` (sent by :meth:`Supervisor.start` after it wrote
    cluster.json) or, for a supervisor that sends none, cluster.json reporting
    ``ready`` with the new pid. Returns that pid.

    On failure raises :class:`SupervisorError` with the exit reason and the log
    tail; a supervisor still running at the deadline is sent SIGTERM first (it
    then stops whatever it started). The caller is the new process's parent; a
    caller that lives on should ``os.waitpid`` it after it exits (``cluster up
    --detach`` simply exits and lets init adopt it).
    """
    data_dir = os.path.abspath(data_dir)
    logs_dir = os.path.join(data_dir, LOGS_DIR_NAME)
    os.makedirs(logs_dir, exist_ok=True)
    log_path = os.path.join(logs_dir, SUPERVISOR_LOG_NAME)
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    ready_reader, ready_writer = os.pipe()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        log_offset = os.lseek(log_fd, 0, os.SEEK_END)
        child_env[lifecycle.READY_FD_ENV] = str(ready_writer)
        # posix_spawn rather than Popen: no Popen object left to warn or reap behind
        # the caller's back. Only the ready pipe is made inheritable; every other fd
        # of ours is close-on-exec (PEP 446).
        os.set_inheritable(ready_writer, True)
        pid = os.posix_spawnp(
            argv[0], list(argv), child_env, setsid=True,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log_fd, 1),
                (os.POSIX_SPAWN_DUP2, log_fd, 2),
            ],
        )
    except OSError:
        os.close(ready_reader)
        raise
    finally:
        os.close(ready_writer)
        os.close(log_fd)

    def failure(what: str) -> SupervisorError:
        tail = read_log_tail(log_path, log_offset)
        return SupervisorError(f"supervisor {what}" + (f"\n--- last lines of {log_path} ---\n{tail}"
                                                         if tail else f"; {log_path} is empty"))

    def state_file_says_ready() -> bool:
        state = read_state_file(data_dir) or {}
        return state.get("supervisor_pid") == pid and state.get("state") == SupervisorState.READY

    deadline = time.monotonic() + ready_timeout_s
    line = bytearray()
    pipe_open = True
    try:
        while True:
            if state_file_says_ready():
                return pid
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                raise failure(f"exited before it was ready ({describe_exit(status, kill_sent=False)})")
            remaining_s = deadline - time.monotonic()
            if remaining_s <= 0:
                break
            # Short turns so that a supervisor without the pipe protocol, which only
            # writes cluster.json, is noticed as well.
            turn_s = min(remaining_s, 0.1)
            if not pipe_open:
                time.sleep(turn_s)
                continue
            readable, _, _ = select.select([ready_reader], [], [], turn_s)
            if not readable:
                continue
            data = os.read(ready_reader, lifecycle.READY_LINE_BYTES_MAX)
            if not data:
                pipe_open = False  # closed without a line, or died: waitpid tells next turn
                continue
            line += data
            if b"\n" in line:
                if line.startswith(lifecycle.READY_WORD):
                    return pid  # Supervisor.start() wrote cluster.json just before
                os.kill(pid, signal.SIGTERM)
                raise failure(f"sent an unexpected line on its ready pipe: {bytes(line[:80])!r}")
        os.kill(pid, signal.SIGTERM)
        raise failure(f"(pid {pid}) not ready within {ready_timeout_s:g} s; sent it SIGTERM")
    finally:
        os.close(ready_reader)


# ----------------------------------------------------------------- entry point


def load_specs(path: str) -> list[ChildSpec]:
    """A JSON list of ChildSpec objects (field names as in the dataclass)."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a JSON list of child specs")
    return [ChildSpec.from_dict(item) for item in raw]


def main(argv: Iterable[str] | None = None) -> int:
    """``python -m cluster.procs.supervisor --data-dir D --specs children.json``."""
    parser = argparse.ArgumentParser(prog="cluster.procs.supervisor", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--specs", required=True, help="JSON list of ChildSpec objects")
    parser.add_argument("--log-level", default="INFO")
    options = parser.parse_args(None if argv is None else list(argv))
    logging.basicConfig(level=options.log_level.upper(),
                        format="%(asctime)s supervisor[%(process)d] %(levelname)s %(message)s")
    try:
        supervisor = Supervisor(load_specs(options.specs), options.data_dir)
    except (OSError, ValueError) as exc:
        log_default.error("bad child table: %s", exc)
        return EXIT_BOOT_ERROR
    try:
        supervisor.start()
    except StopRequested:
        return EXIT_OK
    except SupervisorError as exc:
        log_default.error("%s", exc)
        return EXIT_BOOT_ERROR
    return supervisor.run_forever()


if __name__ == "__main__":
    sys.exit(main())
