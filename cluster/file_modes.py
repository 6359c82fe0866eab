"""Who on this machine may read what a cluster writes: its owner only.

A data dir holds every message (CommitLog segments), offsets and logs, so its directories are
0700 and its files 0600: the supervisor (``procs/supervisor.py``), every child it starts
(``supervision/child_launch.py``) and the ``cluster`` command set ``PRIVATE_UMASK`` before they create
anything, the store's writers ask for 0600 themselves, and a data dir made by an older version is
closed to others when a cluster starts on it (``private_dir``). Secrets (the ACL file, key files)
readable or writable by others are accepted, with a warning (``exposure``).
"""

from __future__ import annotations

import os
import stat

PRIVATE_UMASK = 0o077
PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def make_private() -> None:
    """Files and directories this process (and its children) creates are its owner's alone."""
    os.umask(PRIVATE_UMASK)


def private_dir(path: str) -> str:
    """``path`` made (with its parents) if missing, and closed to group and others: 0700."""
    os.makedirs(path, mode=PRIVATE_DIR_MODE, exist_ok=True)
    if stat.S_IMODE(os.stat(path).st_mode) & 0o077:
        os.chmod(path, PRIVATE_DIR_MODE)
    return path


def open_private(path: str, mode: str = "w"):
    """``open(path, mode)`` of a file created 0600 (an existing one keeps its mode)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    return open(os.open(path, flags, PRIVATE_FILE_MODE), mode)


def exposure(path: str, what: str) -> str | None:
    """Why ``path`` (a secret: ``what`` says which) is exposed to other local users, or None when
    only its owner may read or change it (or it does not exist)."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    if not mode & 0o077:
        return None
    who = " and ".join(name for name, bits in (("group", 0o070), ("others", 0o007)) if mode & bits)
    return (f"{what} {path} is open to {who} (mode {mode:04o}): other users of this machine can read "
            f"{'or change ' if mode & 0o022 else ''}it; chmod 600 {path}")
