"""The supervisor's loop: :class:`Supervisor` starts, watches, restarts and stops the children of
one cluster, deciding with :mod:`.start_gate` and :mod:`.exit_policy` and acting through
:mod:`.child_launch` and :mod:`.child_signals` (the package's docstring has the whole story).

The loop is steppable (:meth:`Supervisor.step`, :meth:`Supervisor.run_until`), so tests drive it
from the test's own thread without sleeping.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import time
from typing import Callable, Sequence

from rocketbox.cluster.supervision import lifecycle, role_fork
from rocketbox.cluster.supervision.child_launch import LaunchFailed, launch, read_ready_line
from rocketbox.cluster.supervision.child_signals import kill, send_stop
from rocketbox.cluster.supervision.child_table import ChildSpec, ReadyCheck, validate_table
from rocketbox.cluster.supervision.children import (ChildState, ChildStatistics, _Child, _TERMINAL_STATES, describe_exit,
                                                    read_log_tail)
from rocketbox.cluster.supervision.errors import BootError, StopRequested, SupervisorError
from rocketbox.cluster.supervision.event_wait import POLL_INTERVAL_NO_SIGNALS_S, wait_budget_s, wait_for_events
from rocketbox.cluster.supervision.exit_policy import ExitAction, exit_action
from rocketbox.cluster.supervision.lifecycle import EXIT_BOOT_ERROR, EXIT_OK
from rocketbox.cluster.supervision.run_state import (LOGS_DIR_NAME, STATE_FILE_NAME, STATE_FORMAT_VERSION, SupervisorState,
                                                     acquire_data_dir_lock, write_state_file)
from rocketbox.cluster.supervision.role_fork import ForkedRole
from rocketbox.cluster.supervision.signal_inbox import STOP_SIGNALS, SignalInbox
from rocketbox.cluster.supervision.start_gate import may_start, next_in_line

# After SIGKILL a process can still take a moment to be reaped (or hang in D state).
KILL_REAP_TIMEOUT_S = 5.0


log_default = logging.getLogger("rocketbox.supervisor")


class Supervisor:
    """Starts, watches, restarts and stops the children of one cluster.

    Single-threaded: all methods run on the thread that called :meth:`start`
    (normally the main thread, which is also the only one that can install
    signal handlers).
    """

    def __init__(self, specs: Sequence[ChildSpec], data_dir: str,
                 log: logging.Logger | None = None, heartbeat_interval_s: float = 1.0, fork_roles: bool = False):
        specs = list(specs)
        validate_table(specs)
        self.data_dir = os.path.abspath(data_dir)
        self.logs_dir = os.path.join(self.data_dir, LOGS_DIR_NAME)
        self.state_path = os.path.join(self.data_dir, STATE_FILE_NAME)
        self.log = log or log_default
        self.heartbeat_interval_s = heartbeat_interval_s
        # Python roles forked from this process (role_fork.py): only when it is single-threaded.
        self.fork_roles = fork_roles
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
        self._signals = SignalInbox()
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
        os.makedirs(self.logs_dir, mode=0o700, exist_ok=True)
        self._lock_fd = acquire_data_dir_lock(self.data_dir)
        lifecycle.preload_libc()  # before any fork: the child must not dlopen between fork and exec
        if not self._signals.install():
            self.log.warning("supervisor driven from a non-main thread: no signal handlers, "
                             "polling every %.2f s", POLL_INTERVAL_NO_SIGNALS_S)
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
                    raise self._boot_failure.boot_error()
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
        if self.fork_roles and self.state == SupervisorState.STARTING:
            self._preload_a_pending_role()
        budget_s = wait_budget_s(self._children, timeout_s, self._next_heartbeat, self._signals.installed, time.monotonic())
        readable = wait_for_events(self._children, self._signals, budget_s)
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
                child.close_ready_reader()
            self._signals.restore()
            self.state = SupervisorState.FAILED if self.halt_reason else SupervisorState.STOPPED
            self._mark_changed()
            self._write_state()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
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
            if child.state in (ChildState.PENDING, ChildState.BACKOFF) and may_start(
                    child, self._children, self._groups[child.spec.group_name],
                    first_boot=self.state == SupervisorState.STARTING, now=now):
                self._spawn(child)

    def _preload_a_pending_role(self) -> None:
        """While a wave boots, import what a child of the next wave is forked with (one module a
        turn, so the loop keeps answering): its fork then starts at once."""
        for child in self._children:
            if child.state != ChildState.PENDING or not child.spec.module or not next_in_line(child, self._children):
                continue
            for module in child.spec.modules_before_fork:
                if not role_fork.imported(module):
                    try:
                        role_fork.preload(module)
                    except Exception as exc:   # its fork will fail with the reason and be reported there
                        self.log.debug("preloading %s: %s", module, exc)
                    return

    def _spawn(self, child: _Child) -> None:
        try:
            ready_reader = launch(child, self._own_pid, self.fork_roles)
        except LaunchFailed as exc:
            self._on_spawn_failure(child, str(exc))
            return
        self._by_pid[child.pid] = child
        if child.spec.ready == ReadyCheck.SPAWNED:
            os.close(ready_reader)
            self._set_state(child, ChildState.STARTING)
            self._mark_ready(child, None)
        else:
            os.set_blocking(ready_reader, False)
            child.ready_reader = ready_reader
            child.ready_deadline = child.spawned_at_monotonic + child.spec.ready_timeout_s
            self._set_state(child, ChildState.STARTING)
        self.log.info("started %s (pid %d%s%s)", child.name, child.pid,
                      ", forked" if isinstance(child.proc, ForkedRole) else "",
                      f", restart {child.spawn_count - 1}" if child.spawn_count > 1 else "")

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
        complete, info, problem = read_ready_line(child)
        if problem:
            self.log.warning("%s: %s", child.name, problem)
        if complete and child.state == ChildState.STARTING:
            self._mark_ready(child, info)

    def _mark_ready(self, child: _Child, info: dict | None) -> None:
        child.ready_info = info
        child.ready_at = time.time()
        self._set_state(child, ChildState.RUNNING)
        self.log.info("%s ready (pid %s)%s", child.name, child.pid,
                      f" {json.dumps(info, sort_keys=True)}" if info else "")

    # ------------------------------------------------------------- signals

    def _dispatch_signals(self) -> None:
        while self._signals.queue:
            signum = self._signals.queue.popleft()
            if signum in STOP_SIGNALS:
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
                    kill(child)

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
        child.close_ready_reader()
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
        action = exit_action(child_state=child.state, cluster_state=self.state, code=code,
                             stopped_with_group=child.restart_with_group is not None, policy=child.spec.restart)
        if action == ExitAction.REJOIN_GROUP:
            child.last_exit = reason = f"stopped with its group, {child.restart_with_group} died ({reason})"
        self._log_exit(child, pid, action, reason, died_booting)
        if action == ExitAction.REJOIN_GROUP:
            self._set_state(child, ChildState.BACKOFF)  # restart_due set by the leader's death
        elif action == ExitAction.STOPPED:
            self._set_state(child, ChildState.STOPPED)
        elif action == ExitAction.RESTART_AT_ONCE:
            self._schedule_restart(child, backoff=False)
        elif action == ExitAction.BOOT_FAILURE:
            self._set_state(child, ChildState.FAILED)
            if self._boot_failure is None:
                self._boot_failure = child
        elif action == ExitAction.HALT:
            self._set_state(child, ChildState.FAILED)
            tail = read_log_tail(child.log_path, child.log_offset_at_spawn)
            self._halt(f"{child.name} failed to boot ({reason}); see {child.log_path}"
                       + (f"; last output: {tail.splitlines()[-1]}" if tail else ""))
        elif action == ExitAction.STAY_DOWN:
            self._set_state(child, ChildState.EXITED)
        else:
            self._schedule_restart(child)

    def _log_exit(self, child: _Child, pid: int, action: ExitAction, reason: str, died_booting: bool) -> None:
        if action in (ExitAction.REJOIN_GROUP, ExitAction.STOPPED):
            self.log.info("%s (pid %d) stopped: %s", child.name, pid, reason)
        elif action == ExitAction.RESTART_AT_ONCE:
            self.log.info("%s (pid %d) restarts in a new role", child.name, pid)
        else:
            self.log.warning("%s (pid %d) %s: %s", child.name, pid,
                             "died while starting" if died_booting else "died", reason)

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
        send_stop(child, time.monotonic())

    def _check_heartbeats(self) -> None:
        """Kill a running child whose heartbeat went stale; the reaper then restarts it.

        Reads the heartbeat with pread, never mmap: the supervisor maps nothing."""
        now = time.time()
        for child in self._children:
            silent_s = child.heartbeat_silence_s(now)
            if silent_s is not None and silent_s > child.spec.heartbeat_timeout_s:
                self.log.error("%s (pid %s) has not beaten its heartbeat for %.1f s (limit %.1f s): "
                               "killing it to restart it", child.name, child.pid, silent_s,
                               child.spec.heartbeat_timeout_s)
                kill(child)

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
                child.close_ready_reader()
                kill(child)
            elif child.kill_deadline is not None and now >= child.kill_deadline and not child.kill_sent:
                self.log.warning("%s (pid %d) still running %g s after the stop signal: SIGKILL",
                                 child.name, child.pid, child.spec.stop_timeout_s)
                kill(child)

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
            write_state_file(self.data_dir, self.snapshot())
        except OSError as exc:
            self.log.error("cannot write %s: %s", self.state_path, exc)
        self._state_dirty = False
        self._next_heartbeat = time.monotonic() + self.heartbeat_interval_s
