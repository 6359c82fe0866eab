"""``cluster up --detach``: start a supervisor in its own session and return once it is ready."""

from __future__ import annotations

import os
import select
import signal
import time
from typing import Callable, Mapping, Sequence

from rocketbox.cluster.supervision import lifecycle, role_fork
from rocketbox.cluster.supervision.children import describe_exit, read_log_tail
from rocketbox.cluster.supervision.errors import SupervisorError
from rocketbox.cluster.supervision.run_state import LOGS_DIR_NAME, SUPERVISOR_LOG_NAME, SupervisorState, read_state_file


def spawn_detached(argv: Sequence[str], data_dir: str, ready_timeout_s: float = 30.0,
                   env: Mapping[str, str] | None = None, while_booting: Callable[[], None] | None = None,
                   fork_module: str | None = None) -> int:
    """Start a supervisor process in its own session and wait until it is ready.

    ``argv`` runs a supervisor (e.g. ``[sys.executable, "-m",
    "rocketbox.cluster.procs.supervisor", "--data-dir", d, "--specs", f]``; ``argv[0]`` is
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
    --detach`` simply exits and lets init adopt it). ``while_booting`` runs once the
    supervisor is spawned, before the wait: the caller's own preparation overlaps its boot.

    ``fork_module``: ``argv`` is ``python -m fork_module ...`` (``lifecycle.python_module_command``),
    and unless ``ROCKETBOX_FORK_ROLES=0`` it runs in a child forked from this process without an exec
    (``role_fork.fork_role(detached=True)``): it starts with this process's interpreter and imports.
    The caller must be single-threaded.
    """
    data_dir = os.path.abspath(data_dir)
    logs_dir = os.path.join(data_dir, LOGS_DIR_NAME)
    os.makedirs(logs_dir, mode=0o700, exist_ok=True)
    log_path = os.path.join(logs_dir, SUPERVISOR_LOG_NAME)
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    ready_reader, ready_writer = os.pipe()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        log_offset = os.lseek(log_fd, 0, os.SEEK_END)
        forked = fork_module is not None and role_fork.fork_roles_enabled()
        os.write(log_fd, f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} rocketbox: starting the supervisor "
                         f"({'forked from' if forked else 'executed by'} pid {os.getpid()})\n".encode())
        child_env[lifecycle.READY_FD_ENV] = str(ready_writer)
        # posix_spawn rather than Popen: no Popen object left to warn or reap behind
        # the caller's back. Only the ready pipe is made inheritable; every other fd
        # of ours is close-on-exec (PEP 446).
        os.set_inheritable(ready_writer, True)
        if forked:
            import setproctitle
            setproctitle.getproctitle()   # its setup finds argv's memory by sys.argv, which the child replaces
            args = list(argv)[list(argv).index(fork_module) + 1:]
            pid = role_fork.fork_role(fork_module, args, child_env, None, log_fd, ready_writer, None,
                                      detached=True).pid
        else:
            pid = os.posix_spawnp(argv[0], list(argv), child_env, setsid=True, file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log_fd, 1),
                (os.POSIX_SPAWN_DUP2, log_fd, 2),
            ])
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
    if while_booting is not None:
        while_booting()
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
