"""The supervisor's running record of each child: its state, process, ready pipe, restart back-off
and statistics, and how a death is told (exit reason, the tail of its log)."""

from __future__ import annotations

import enum
import os
import signal
import subprocess
import time
from dataclasses import dataclass

from rocketbox.cluster.shm.control_format import SLOT_BYTES, decode_slot
from rocketbox.cluster.supervision import lifecycle
from rocketbox.cluster.supervision.child_table import ChildSpec
from rocketbox.cluster.supervision.errors import BootError
from rocketbox.cluster.supervision.lifecycle import EXIT_BOOT_ERROR

# How much of a child's log a BootError quotes.
LOG_TAIL_LINES = 20
LOG_TAIL_BYTES_MAX = 8192

class ChildState(enum.StrEnum):
    PENDING = "pending"  # not started yet
    STARTING = "starting"  # spawned, readiness line not seen yet
    RUNNING = "running"  # ready
    STOPPING = "stopping"  # stop signal sent by us
    BACKOFF = "backoff"  # dead, restart scheduled
    EXITED = "exited"  # dead, restart policy says stay down
    STOPPED = "stopped"  # stopped by us
    FAILED = "failed"  # failed to boot during start() or with EXIT_BOOT_ERROR


_ALIVE_STATES = (ChildState.STARTING, ChildState.RUNNING, ChildState.STOPPING)
# States that no longer hold back the children after them in a group.
_TERMINAL_STATES = (ChildState.EXITED, ChildState.STOPPED, ChildState.FAILED)


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
        self.proc: subprocess.Popen | None = None   # or a role_fork.ForkedRole: pid and returncode
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

    def spawned(self, proc: subprocess.Popen, attempt: int) -> None:
        """A fresh process runs for this child: forget everything about the previous one."""
        self.proc = proc
        self.pid = proc.pid
        self.spawn_count = attempt
        self.spawned_at_monotonic = time.monotonic()
        self.started_at = time.time()
        self.ready_at = None
        self.ready_info = None
        self.ready_buffer.clear()
        self.kill_sent = False
        self.kill_deadline = None
        self.boot_timed_out = False
        self.restart_with_group = None
        self.restart_due = None

    def heartbeat_silence_s(self, now: float) -> float | None:
        """Seconds since this running child last beat its heartbeat; None when it is not watched,
        not yet due, or its heartbeat cannot be read (pread, never mmap: the supervisor maps nothing)."""
        spec = self.spec
        if (spec.heartbeat_timeout_s <= 0 or not spec.heartbeat_path or self.state != ChildState.RUNNING
                or self.kill_sent or self.ready_at is None or now - self.ready_at < spec.heartbeat_timeout_s):
            return None
        try:
            with open(spec.heartbeat_path, "rb") as f:
                raw = os.pread(f.fileno(), SLOT_BYTES, spec.heartbeat_offset)
        except OSError:
            return None  # not created yet, or being recreated: nothing to judge
        if len(raw) != SLOT_BYTES:
            return None
        return now - decode_slot(raw) / 1000

    def close_ready_reader(self) -> None:
        if self.ready_reader is not None:
            os.close(self.ready_reader)
            self.ready_reader = None

    def boot_error(self) -> BootError:
        """Why this child did not boot, with the tail of its log."""
        tail = read_log_tail(self.log_path, self.log_offset_at_spawn)
        label = f"{self.name} ({self.spec.role})" if self.spec.role else self.name
        message = f"{label} failed to start: {self.last_exit}"
        if tail:
            message += f"\n--- last lines of {self.log_path} ---\n{tail}"
        return BootError(message, child_name=self.name, reason=self.last_exit,
                         exit_code=self.last_exit_code, log_tail=tail)

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
