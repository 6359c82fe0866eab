"""``cluster logs NAME [-n N] [-f]``: a process's log (``<data dir>/logs/NAME.log``), its last lines,
and with ``-f`` what it writes next, across rotations (the file is reopened when it is replaced)."""

from __future__ import annotations

import os
import sys
import time
from collections import deque

FOLLOW_POLL_S = 0.2


def _known(logs_dir: str) -> list[str]:
    try:
        return sorted(n[:-len(".log")] for n in os.listdir(logs_dir) if n.endswith(".log"))
    except FileNotFoundError:
        return []


def _print_last(path: str, lines: int) -> int:
    """Print the last ``lines`` lines (all for a negative count); the byte offset reached."""
    with open(path, "rb") as f:
        last = deque(f, maxlen=lines if lines >= 0 else None)
        offset = f.tell()
    for line in last:
        sys.stdout.write(line.decode("utf-8", "replace"))
    sys.stdout.flush()
    return offset


def _follow(path: str, offset: int, for_s: float) -> None:
    inode = os.stat(path).st_ino
    deadline = time.monotonic() + for_s
    while time.monotonic() < deadline:
        try:
            st = os.stat(path)
        except FileNotFoundError:   # between a rotation's rename and the new file
            time.sleep(FOLLOW_POLL_S)
            continue
        if st.st_ino != inode or st.st_size < offset:   # rotated: the new file from its start
            inode, offset = st.st_ino, 0
        if st.st_size > offset:
            with open(path, "rb") as f:
                f.seek(offset)
                chunk = f.read(st.st_size - offset)
            offset += len(chunk)
            sys.stdout.write(chunk.decode("utf-8", "replace"))
            sys.stdout.flush()
        else:
            time.sleep(FOLLOW_POLL_S)


def cmd_logs(args) -> int:
    logs_dir = os.path.join(args.data_dir, "logs")
    path = os.path.join(logs_dir, f"{args.name}.log")
    if not os.path.isfile(path):
        known = _known(logs_dir)
        print(f"no log of {args.name!r} in {logs_dir}; there are: {', '.join(known) or 'none'}", file=sys.stderr)
        return 1
    offset = _print_last(path, args.lines)
    if args.follow:
        _follow(path, offset, args.follow_s)
    return 0


def add_parsers(sub) -> None:
    logs = sub.add_parser("logs", help="a process's log (namesrv-0, broker-a, broker-a-reput, ...), -f to follow")
    logs.add_argument("name", help="the process, as cluster status names it")
    logs.add_argument("-n", "--lines", type=int, default=50, help="the last N lines (-1: all), default 50")
    logs.add_argument("-f", "--follow", action="store_true", help="then print what it writes, across rotations")
    logs.add_argument("--follow-s", type=float, default=24 * 3600.0, help="stop following after this long")
    logs.set_defaults(func=cmd_logs)
