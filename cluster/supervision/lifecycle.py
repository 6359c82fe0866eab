"""The child side of the supervisor protocol: readiness, parent death, exit codes.

Every process the supervisor starts (``cluster/procs/<role>.py``) is a fresh
Python interpreter. The supervisor talks to it through three things only:

* **Environment** (set by the supervisor for each child):

  | variable | meaning |
  | --- | --- |
  | ``ROCKETBOX_READY_FD`` | number of an inherited pipe's write end; write one readiness line to it |
  | ``ROCKETBOX_PARENT_PID`` | the supervisor's pid, to check that it is still our parent |
  | ``ROCKETBOX_CHILD_NAME`` | this child's name in the supervisor's table (log prefixes) |
  | ``ROCKETBOX_DATA_DIR`` | the cluster's data directory |

* **Readiness**: once the child serves (sockets bound, recovery done), it calls
  :func:`notify_ready`, which writes ``b"ready\\n"`` or ``b"ready <json>\\n"``
  (e.g. ``{"endpoint": "tcp://127.0.0.1:10811"}``) and closes the pipe. The
  supervisor starts the next child only after that line, and a child that does
  not send it within its deadline counts as failed to boot.

* **Exit codes** (gunicorn's rule: exit codes are a child-to-parent protocol):
  :data:`EXIT_BOOT_ERROR` before readiness means "restarting me will not help"
  (bad config, port taken by someone else): the supervisor stops the whole
  cluster with a clear message instead of a restart loop. Any other death is
  restarted with backoff.

A role entry point therefore looks like this::

    def main(argv=None) -> int:
        lifecycle.install_parent_death_signal()   # first thing: no orphans
        try:
            config = parse_config(argv)
            config.validate()
        except ValueError as exc:
            lifecycle.fail_boot(f"bad config: {exc}")
        service = build_service(config)            # binds, recovers, ...
        lifecycle.notify_ready({"endpoint": config.endpoint})
        while not stopping:                        # SIGTERM sets `stopping`
            service.step()
            if not lifecycle.parent_alive():       # second line of defence
                break
        return lifecycle.EXIT_OK

The supervisor already sets ``PR_SET_PDEATHSIG`` between fork and exec (it
survives exec for non-setuid programs); :func:`install_parent_death_signal` sets
it again from the child and closes the race where the supervisor died before
the child got that far. ``parent_alive()`` polling covers platforms without
prctl and children that block SIGTERM.

This module imports the standard library only, so a child can import it before
anything heavy.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from typing import NoReturn


READY_FD_ENV = "ROCKETBOX_READY_FD"
PARENT_PID_ENV = "ROCKETBOX_PARENT_PID"
CHILD_NAME_ENV = "ROCKETBOX_CHILD_NAME"
# The child's log file (the supervisor opens it as its stdout and stderr); the child's logging
# rotates it by size (runner.setup_logging).
LOG_FILE_ENV = "ROCKETBOX_LOG_FILE"

EXIT_OK = 0
# Unexpected failure: the supervisor restarts the child with backoff.
EXIT_FAILURE = 1
# Failed before readiness for a reason a restart cannot fix: the supervisor halts.
EXIT_BOOT_ERROR = 3
# The supervisor died before this child finished starting: nobody to serve.
EXIT_PARENT_GONE = 4
# A broker replica whose role the failover controller changed: restart it (it boots in the new role).
EXIT_ROLE_CHANGED = 5

# One readiness line must fit in PIPE_BUF so the write is atomic.
READY_LINE_BYTES_MAX = 4096
READY_WORD = b"ready"

# <linux/prctl.h>
_PR_SET_PDEATHSIG = 1

_libc: ctypes.CDLL | None = None


def python_module_command(module: str, *args: str) -> list[str]:
    """The command that runs ``python -m module`` as one of our processes.

    ``-P`` (Python 3.11) keeps the caller's working directory off the import path: without
    it a folder named ``cluster`` wherever ``cluster up`` was typed (an unbuilt checkout, say)
    would be imported instead of the installed package. PYTHONPATH is still honoured.
    """
    return [sys.executable, "-P", "-m", module, *args]


def preload_libc() -> ctypes.CDLL | None:
    """libc for prctl, loaded once (never inside a freshly forked child)."""
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def release_free_heap() -> None:
    """Give the C heap's free pages back to the kernel (glibc's malloc_trim): before a fork, so that
    the child does not start with (and count in its RSS) the pages of what this process has freed;
    and after a door closed a connection that held megabytes of unfinished frames."""
    libc = preload_libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def set_parent_death_signal(signum: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``signum`` when our parent thread dies (Linux only).

    Returns False where prctl does not exist. Safe to call between fork and exec
    (it is one syscall) as long as :func:`preload_libc` ran in the parent first.
    """
    libc = preload_libc()
    if libc is None:
        return False
    if libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")
    return True


def supervisor_pid_from_env() -> int | None:
    """The supervisor's pid as it told us, or None when run by hand."""
    text = os.environ.get(PARENT_PID_ENV)
    return int(text) if text else None


def install_parent_death_signal(
    expected_parent_pid: int | None = None, signum: int = signal.SIGTERM
) -> None:
    """Die with ``signum`` when the supervisor dies; exit now if it already has.

    Call it first thing in a role's ``main``. ``expected_parent_pid`` defaults to
    ``ROCKETBOX_PARENT_PID``; without either (a child started by hand) only the
    death signal is set. The getppid check after prctl closes the race: if the
    parent died before prctl, we were already re-parented and no signal will come.
    """
    parent_pid = expected_parent_pid if expected_parent_pid is not None else supervisor_pid_from_env()
    set_parent_death_signal(signum)
    if parent_pid is not None and os.getppid() != parent_pid:
        print(
            f"rocketbox: parent {parent_pid} is gone (ppid is now {os.getppid()}); exiting",
            file=sys.stderr,
        )
        sys.exit(EXIT_PARENT_GONE)


def parent_alive(expected_parent_pid: int | None = None) -> bool:
    """False once the supervisor is gone (we were re-parented). Cheap: one syscall.

    The second line of defence after the death signal: a child's loop polls this
    every iteration or so and returns when it turns False.
    """
    parent_pid = expected_parent_pid if expected_parent_pid is not None else supervisor_pid_from_env()
    if parent_pid is None:
        return True
    return os.getppid() == parent_pid


def encode_ready_line(info: dict | None = None) -> bytes:
    """The readiness line: ``ready`` or ``ready <json object>``, newline-terminated."""
    if info is None:
        line = READY_WORD + b"\n"
    else:
        if not isinstance(info, dict):
            raise TypeError(f"ready info must be a dict, not {type(info).__name__}")
        line = READY_WORD + b" " + json.dumps(info, sort_keys=True).encode() + b"\n"
    if len(line) > READY_LINE_BYTES_MAX:
        raise ValueError(f"ready line is {len(line)} bytes, more than {READY_LINE_BYTES_MAX}")
    return line


def decode_ready_line(line: bytes) -> dict | None:
    """Parse one readiness line (without or with its newline); raise ValueError if malformed."""
    line = line.rstrip(b"\n")
    if line == READY_WORD:
        return None
    word, sep, payload = line.partition(b" ")
    if word != READY_WORD or not sep:
        raise ValueError(f"not a readiness line: {line[:80]!r}")
    info = json.loads(payload)
    if not isinstance(info, dict):
        raise ValueError(f"ready info is not a JSON object: {payload[:80]!r}")
    return info


def notify_ready(info: dict | None = None) -> bool:
    """Tell the supervisor we serve. Returns False when not started by one.

    Writes one line to ``ROCKETBOX_READY_FD`` and closes it; calling it again is
    a no-op. ``info`` (a small JSON object, e.g. the bound endpoint) lands in
    cluster.json for ``cluster status``.
    """
    line = encode_ready_line(info)
    fd_text = os.environ.pop(READY_FD_ENV, None)
    if not fd_text:
        return False
    fd = int(fd_text)
    try:
        os.write(fd, line)
    except BrokenPipeError:
        # The waiter already saw "ready" in cluster.json and left (spawn_detached returns on
        # either): fine. Raising here killed a freshly started detached supervisor, and its cluster.
        pass
    finally:
        os.close(fd)
    return True


def fail_boot(message: str) -> NoReturn:
    """Report a boot error on stderr (it lands in the child's log) and exit EXIT_BOOT_ERROR."""
    name = os.environ.get(CHILD_NAME_ENV, os.path.basename(sys.argv[0]) or "child")
    print(f"rocketbox: {name} cannot start: {message}", file=sys.stderr, flush=True)
    sys.exit(EXIT_BOOT_ERROR)
