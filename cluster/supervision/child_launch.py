"""Starting one child process and reading its readiness line: the supervisor's two conversations
with a child that happen through the operating system rather than the loop's state."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from rocketbox.cluster.file_modes import PRIVATE_UMASK, open_private
from rocketbox.cluster.supervision import lifecycle, role_fork
from rocketbox.cluster.supervision.children import _Child


class LaunchFailed(Exception):
    """The command could not be executed (a missing program fails the same way every time)."""


def child_environment(child: _Child, ready_writer: int, supervisor_pid: int) -> dict[str, str]:
    env = dict(os.environ)
    # Evidence first: a crashing child's last words must reach its log.
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(child.spec.env)
    env[lifecycle.READY_FD_ENV] = str(ready_writer)
    env[lifecycle.PARENT_PID_ENV] = str(supervisor_pid)
    env[lifecycle.CHILD_NAME_ENV] = child.name
    env[lifecycle.LOG_FILE_ENV] = child.log_path
    return env


def launch(child: _Child, supervisor_pid: int, fork_roles: bool = False) -> int:
    """Fork and exec the child with its output appended to its log (with ``fork_roles``, a Python
    role is forked from the supervisor without an exec: ``role_fork``); the read end of its
    readiness pipe (the child holds the only write end, so EOF means it is gone)."""
    command = child.spec.command()
    attempt = child.spawn_count + 1
    ready_reader, ready_writer = os.pipe()

    def before_exec() -> None:
        # Runs in the forked child, before exec: one syscall each, nothing that locks.
        os.umask(PRIVATE_UMASK)   # what it writes is the owner's alone (file_modes.py)
        lifecycle.set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != supervisor_pid:
            os._exit(lifecycle.EXIT_PARENT_GONE)

    with open_private(child.log_path, "ab") as log_file:
        child.log_offset_at_spawn = log_file.tell()
        log_file.write(
            f"--- rocketbox supervisor: starting {child.name} (attempt {attempt}) at "
            f"{time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(command)}\n".encode()
        )
        log_file.flush()
        try:
            proc = (_fork(child, supervisor_pid, log_file.fileno(), ready_writer) if fork_roles and child.spec.module
                    else _execute(child, command, supervisor_pid, log_file, ready_writer, before_exec))
        except LaunchFailed:
            os.close(ready_reader)
            os.close(ready_writer)
            raise
    os.close(ready_writer)
    child.spawned(proc, attempt)
    return ready_reader


def _execute(child: _Child, command: list[str], supervisor_pid: int, log_file, ready_writer: int,
             before_exec) -> subprocess.Popen:
    try:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=log_file,
            env=child_environment(child, ready_writer, supervisor_pid),
            cwd=child.spec.cwd,
            pass_fds=(ready_writer,),
            # Own process group: a terminal's Ctrl-C reaches only the
            # supervisor, which then stops children in order; SIGKILL
            # of a straggler also takes any helper it spawned.
            process_group=0,
            preexec_fn=before_exec,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise LaunchFailed(f"cannot execute {command[0]!r}: {exc}") from None


def _fork(child: _Child, supervisor_pid: int, log_fd: int, ready_writer: int) -> role_fork.ForkedRole:
    try:
        return role_fork.fork_role(child.spec.module, list(child.spec.args),
                                   child_environment(child, ready_writer, supervisor_pid), child.spec.cwd,
                                   log_fd, ready_writer, supervisor_pid, child.spec.modules_before_fork)
    except Exception as exc:   # the fork (OSError) or the role's module failing to import
        raise LaunchFailed(f"cannot start {child.spec.module!r}: {exc}") from None


def read_ready_line(child: _Child) -> tuple[bool, dict | None, str | None]:
    """Consume what the child wrote on its readiness pipe (non-blocking): (a whole line came,
    its info, a problem worth a warning). The pipe is closed once a line, EOF or garbage came."""
    while child.ready_reader is not None:
        try:
            data = os.read(child.ready_reader, lifecycle.READY_LINE_BYTES_MAX)
        except BlockingIOError:
            return False, None, None
        if not data:
            # EOF: the child closed the pipe (after notifying, or while dying).
            child.close_ready_reader()
            return False, None, None
        child.ready_buffer += data
        line, newline, _ = child.ready_buffer.partition(b"\n")
        if newline:
            child.close_ready_reader()
            try:
                return True, lifecycle.decode_ready_line(bytes(line)), None
            except ValueError as exc:
                return True, None, f"a malformed readiness line ({exc}); treating it as ready"
        if len(child.ready_buffer) > lifecycle.READY_LINE_BYTES_MAX:
            child.close_ready_reader()
            return False, None, f"readiness line longer than {lifecycle.READY_LINE_BYTES_MAX} bytes; ignoring it"
    return False, None, None
