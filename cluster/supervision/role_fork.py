"""Starting a Python role by forking the supervisor instead of executing a fresh interpreter.

Each role used to pay for its own interpreter and imports (0.2-0.7 CPU-s apiece; nine roles on two
cores made most of a cluster's start-up). The supervisor imports a role's module once, before it
first forks it, and every child of that module starts from those imported pages: copy-on-write, so
they are also shared (PSS) rather than loaded again per process.

What an exec gave a child for free, the forked child sets up itself before running the module as
``__main__``: its own process group, umask and parent-death signal; stdin from /dev/null and
stdout/stderr to its log (new unbuffered streams: the supervisor's buffers are never flushed into
it); no descriptor of the supervisor's but its readiness pipe (the data-directory lock above all:
a child holding it would keep the directory locked after the supervisor died); default signal
dispositions; its own environment, working directory and argv; no logging handler of the
supervisor's. It ends as an interpreter would (non-daemon threads joined, ``atexit`` functions
run: those its modules registered when the supervisor imported them, as they would have at its own
import, and its own; the supervisor registers none of its own) and then ``os._exit``: nothing of
the supervisor's is finalised twice.

Only the supervisor process forks this way (``procs/supervisor.py``): it is single-threaded, so
the fork copies no lock another thread holds. A supervisor driven in-process (tests) executes.
The ``cluster up --detach`` command, single-threaded too, forks the supervisor itself this way
(``detached``: a session of its own instead of a process group, no parent-death signal, since the
command exits once the cluster is ready; detach.py), so the supervisor starts with the command's
interpreter and imports instead of a fresh interpreter's ~0.1-0.15 CPU-s.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import io
import logging
import os
import runpy
import signal
import sys
import threading
import traceback

from rocketbox.cluster.file_modes import PRIVATE_UMASK
from rocketbox.cluster.supervision import lifecycle

# ROCKETBOX_FORK_ROLES=0 makes the supervisor execute every role (a fresh interpreter each).
FORK_ROLES_ENV = "ROCKETBOX_FORK_ROLES"

_SIGNALS_RESET = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGCHLD, signal.SIGHUP,
                  signal.SIGUSR1, signal.SIGUSR2, signal.SIGPIPE)
_FD_LIMIT_FALLBACK = 65536


def fork_roles_enabled() -> bool:
    return os.environ.get(FORK_ROLES_ENV, "1") != "0"


class ForkedRole:
    """What the supervisor keeps of a forked child (a ``Popen``'s ``pid`` and ``returncode``)."""

    def __init__(self, pid: int):
        self.pid = pid
        self.returncode: int | None = None


def imported(module: str) -> bool:
    return module in sys.modules


def preload(module: str) -> None:
    """Import ``module`` in the supervisor (once): its children start with it imported."""
    importlib.import_module(module)


def fork_role(module: str, args: list[str], env: dict[str, str], cwd: str | None, log_fd: int,
              ready_writer: int, supervisor_pid: int | None, before_fork: tuple[str, ...] | None = None,
              detached: bool = False) -> ForkedRole:
    """Fork a child that runs ``python -m module *args`` as a fresh interpreter would, after importing
    ``before_fork`` (default: ``module``) here; what the child imports itself is its own. ``detached``:
    the child outlives this process, in a session of its own (``supervisor_pid`` is not used)."""
    for shared in (module,) if before_fork is None else before_fork:
        preload(shared)
    # What is garbage now is freed before the child counts it; what lives is moved out of the
    # collector's sight, so a child's full collections never write to (and so copy) the pages it
    # shares with this process, and skip their objects (gc.freeze's purpose). ~7 ms the first time.
    gc.collect()
    gc.freeze()
    lifecycle.release_free_heap()
    # Blocked across the fork: a stop signal meant for the child waits for its default handler,
    # never runs the supervisor's.
    previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS_RESET)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
        raise
    if pid == 0:
        code = 1
        try:
            code = _run_as_child(module, args, env, cwd, log_fd, ready_writer, supervisor_pid, previous_mask,
                                 detached)
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)
    return ForkedRole(pid)


def _run_as_child(module, args, env, cwd, log_fd, ready_writer, supervisor_pid, previous_mask, detached) -> int:
    try:
        _become_own_process(env, cwd, log_fd, ready_writer, supervisor_pid, previous_mask, detached)
    except BaseException:
        # Whatever it is, it must reach the log (fd 2 is the log once the streams are swapped).
        traceback.print_exc()
        return 1
    sys.argv = [module, *args]
    # Run afresh as __main__ (its imports stay the preloaded ones): runpy warns of, and would share,
    # the module object the supervisor imported.
    sys.modules.pop(module, None)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:
        traceback.print_exc()
        code = 1
    return _finish(code)


def _become_own_process(env, cwd, log_fd, ready_writer, supervisor_pid, previous_mask, detached=False) -> None:
    if detached:
        os.setsid()
        # As ``python -P``: the directory the command was run from is no import path of a long-lived process.
        if not sys.flags.safe_path and sys.path and sys.path[0] in ("", os.getcwd()):
            del sys.path[0]
    else:
        os.setpgid(0, 0)
        lifecycle.set_parent_death_signal(signal.SIGTERM)
        if os.getppid() != supervisor_pid:
            os._exit(lifecycle.EXIT_PARENT_GONE)
    os.umask(PRIVATE_UMASK)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    _close_inherited_descriptors(keep=ready_writer)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True, line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, line_buffering=True,
                                  errors="backslashreplace")
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    for handler in logging.root.handlers[:]:
        logging.root.removeHandler(handler)
    logging.root.setLevel(logging.WARNING)
    signal.set_wakeup_fd(-1)
    for signum in _SIGNALS_RESET:
        signal.signal(signum, signal.SIG_IGN if signum == signal.SIGPIPE else signal.SIG_DFL)
    os.environ.clear()
    os.environ.update(env)
    # Nor does a fresh interpreter hold process-wide client keys: a role with access control sets its
    # own, one without must connect plainly (the command's keys once reached roles this way).
    curve = sys.modules.get("rocketbox.cluster.acl.curve")
    if curve is not None:
        curve.use_for_process(None)
    if cwd:
        os.chdir(cwd)
    signal.pthread_sigmask(signal.SIG_SETMASK, previous_mask)


def _close_inherited_descriptors(keep: int) -> None:
    # Objects of the supervisor's that wrap these are never finalised here (the child leaves by
    # os._exit), so nothing closes a number the role has since reused.
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        limit = _FD_LIMIT_FALLBACK
    os.closerange(3, keep)
    os.closerange(keep + 1, limit)


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _finish(code: int) -> int:
    """What an interpreter does on its way out, short of finalising the supervisor's objects."""
    try:
        threading._shutdown()   # non-daemon threads are waited for, as at a normal exit
    except BaseException:
        traceback.print_exc()
    try:
        atexit._run_exitfuncs()
    except BaseException:
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code
