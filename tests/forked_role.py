"""A role for the role_fork tests, run as ``python -m tests.forked_role REPORT``: it writes what it
finds about its own process to REPORT (JSON), prints a line, notifies ready, and on SIGTERM leaves
through an ``atexit`` function that appends to REPORT + ".exit"."""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys

from rocketbox.cluster.supervision import lifecycle


def descriptors() -> dict[str, str]:
    found = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass   # the listing's own descriptor, gone by now
    return found


def main(report_path: str) -> int:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    atexit.register(lambda: open(report_path + ".exit", "a").write("atexit ran\n"))
    report = {"pid": os.getpid(), "ppid": os.getppid(), "pgid": os.getpgid(0), "umask": os.umask(0o077),
              "env": {k: v for k, v in os.environ.items() if k.startswith(("ROCKETBOX_", "FORKED_ROLE_"))},
              "cwd": os.getcwd(), "argv": sys.argv[1:], "fds": descriptors(), "main": __name__}
    with open(report_path, "w") as f:
        json.dump(report, f)
    print("forked role says hello")
    lifecycle.notify_ready()
    while not stop:
        signal.pause()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
