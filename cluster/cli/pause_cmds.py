"""``cluster pause NAME`` / ``cluster resume NAME``: stop (SIGSTOP) and continue (SIGCONT) one
process of the cluster running in ``--data-dir``, by the name ``cluster status`` gives it: the way to
watch a failover (README, "High availability").

Why a pause and not a kill: the supervisor restarts a process that exits within about a second, and
a master back that soon is still master of the same epoch (the controller waits 3 s of silence), so
a killed master never shows a failover. A paused one is alive to its supervisor and silent to
everyone else, as a hung host is: its lease lapses (2 s), the controller elects another replica of
the SyncStateSet (3 s), and once resumed, or killed and restarted by the supervisor's watchdog
(30 s without a heartbeat), it rejoins as a slave. Only the pids of this data dir's cluster, read
from its run-state file, are ever signalled.
"""

from __future__ import annotations

import os
import signal
import sys

from rocketbox.cluster.supervision.run_state import STATE_FILE_NAME, read_state_file


def _signal_child(args, sig: int, done: str) -> int:
    state = read_state_file(args.data_dir)
    if state is None:
        print(f"error: no cluster state in {os.path.join(args.data_dir, STATE_FILE_NAME)}", file=sys.stderr)
        return 1
    children = {child["name"]: child for child in state.get("children", [])}
    child = children.get(args.name)
    if child is None:
        print(f"error: no process {args.name!r} in this cluster; its processes: {', '.join(sorted(children))}",
              file=sys.stderr)
        return 2
    pid = child.get("pid")
    if child.get("state") != "running" or not pid:
        print(f"error: {args.name} is not running (state {child.get('state')})", file=sys.stderr)
        return 1
    try:
        os.kill(int(pid), sig)
    except ProcessLookupError:
        print(f"error: {args.name} (pid {pid}) has just exited", file=sys.stderr)
        return 1
    print(f"{args.name} (pid {pid}) {done}")
    return 0


def cmd_pause(args) -> int:
    return _signal_child(args, signal.SIGSTOP, "paused (SIGSTOP): `cluster resume` continues it; the supervisor's "
                                               "watchdog restarts it after 30 s without a heartbeat")


def cmd_resume(args) -> int:
    return _signal_child(args, signal.SIGCONT, "resumed (SIGCONT)")


def add_parsers(sub) -> None:
    pause = sub.add_parser("pause", help="stop one process (SIGSTOP), e.g. a master to watch a failover")
    pause.add_argument("name", help="the process, as cluster status names it (broker-a, broker-a-s1, namesrv-0, ...)")
    pause.set_defaults(func=cmd_pause)
    resume = sub.add_parser("resume", help="continue a paused process (SIGCONT)")
    resume.add_argument("name", help="the process, as cluster status names it")
    resume.set_defaults(func=cmd_resume)
