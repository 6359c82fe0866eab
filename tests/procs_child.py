"""A child program for the supervisor tests: a role entry point with knobs.

It behaves like ``cluster/procs/<role>.py`` should (parent death signal first,
readiness line once it "serves", clean exit on SIGTERM) and records what happens
to it as JSON lines appended to ``--events`` (one ``os.write`` of an O_APPEND
file per line, so lines from several children never interleave):

    {"event": "start" | "ready" | "stop", "name": ..., "pid": ..., "ppid": ..., "t": wall seconds}

Knobs: ``--ready-delay-s`` (serve late), ``--exit-code N`` (exit with N before
ready, after printing a line to stderr), ``--boot-error-if-exists PATH`` (exit
EXIT_BOOT_ERROR before ready when PATH exists: a config that went bad between
restarts), ``--ignore-sigterm`` (a hung child), ``--no-ready`` (never notify),
``--close-ready-fd`` (close the ready pipe without a line),
``--endpoint`` (put in the ready info), ``--exit-on-usr1 N`` (once serving, SIGUSR1 makes it exit
with N: a broker leaving to restart in another role).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import sys
import time

# Run as a script path, so make the repository importable without installing it.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocketbox.cluster.supervision import lifecycle  # noqa: E402

PARENT_POLL_INTERVAL_S = 0.2


def record(events_path: str, event: str, name: str) -> None:
    line = json.dumps({"event": event, "name": name, "pid": os.getpid(),
                       "ppid": os.getppid(), "t": time.time()}) + "\n"
    fd = os.open(events_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


class Stopping:
    """Set by the signal handlers: a flag, and the wake-up fd that ends a wait at once. Never a
    lock: a handler that takes a lock the code it interrupted holds waits forever (a
    threading.Event's did, under load: the child ignored SIGUSR1 and SIGTERM alike)."""

    def __init__(self):
        self.flag = False
        self._reader, writer = os.pipe()
        os.set_blocking(self._reader, False)
        os.set_blocking(writer, False)
        signal.set_wakeup_fd(writer, warn_on_full_buffer=False)

    def set(self) -> None:
        self.flag = True

    def is_set(self) -> bool:
        return self.flag

    def wait(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not self.flag:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            select.select([self._reader], [], [], left)
            try:
                os.read(self._reader, 512)
            except BlockingIOError:
                pass
        return self.flag


def main(argv: list[str] | None = None) -> int:
    lifecycle.install_parent_death_signal()
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--ready-delay-s", type=float, default=0.0)
    parser.add_argument("--exit-code", type=int, default=None)
    parser.add_argument("--boot-error-if-exists", default=None)
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--no-ready", action="store_true")
    parser.add_argument("--close-ready-fd", action="store_true", help="close the ready pipe unused")
    parser.add_argument("--endpoint", default=None)
    parser.add_argument("--exit-on-usr1", type=int, default=None)
    options = parser.parse_args(argv)

    stopping = Stopping()
    exit_code = [lifecycle.EXIT_OK]
    if options.exit_on_usr1 is not None:
        def on_usr1(signum, frame):
            exit_code[0] = options.exit_on_usr1
            stopping.set()
        signal.signal(signal.SIGUSR1, on_usr1)

    def on_sigterm(signum, frame):
        record(options.events, "stop", options.name)
        stopping.set()

    signal.signal(signal.SIGTERM, signal.SIG_IGN if options.ignore_sigterm else on_sigterm)
    record(options.events, "start", options.name)

    if options.boot_error_if_exists and os.path.exists(options.boot_error_if_exists):
        lifecycle.fail_boot(f"bad config: {options.boot_error_if_exists} exists")
    if options.exit_code is not None:
        print(f"{options.name}: exiting with {options.exit_code} as asked", file=sys.stderr, flush=True)
        return options.exit_code
    if options.close_ready_fd:
        os.close(int(os.environ.pop(lifecycle.READY_FD_ENV)))
    if options.ready_delay_s:
        stopping.wait(options.ready_delay_s)
    if not options.no_ready and not stopping.is_set():
        record(options.events, "ready", options.name)
        info = {"endpoint": options.endpoint} if options.endpoint else None
        lifecycle.notify_ready(info)

    # Serve until SIGTERM; polling the parent is the second line of defence.
    while not stopping.wait(PARENT_POLL_INTERVAL_S):
        if not lifecycle.parent_alive():
            record(options.events, "parent-gone", options.name)
            return lifecycle.EXIT_PARENT_GONE
    return exit_code[0]


if __name__ == "__main__":
    sys.exit(main())
