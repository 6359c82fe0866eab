"""The run-state file ``<data_dir>/cluster.json`` (what ``cluster status`` reads; rewritten
atomically on every change and heartbeat) and the ``supervisor.lock`` that keeps two
supervisors off one data directory."""

from __future__ import annotations

import enum
import fcntl
import json
import os

from rocketbox.cluster.json_files import write_json
from rocketbox.cluster.supervision.errors import SupervisorError


STATE_FILE_NAME = "cluster.json"
STATE_FORMAT_VERSION = 1
LOCK_FILE_NAME = "supervisor.lock"
# Under the data dir: each child's log, and the detached supervisor's own.
LOGS_DIR_NAME = "logs"
SUPERVISOR_LOG_NAME = "supervisor.log"


class SupervisorState(enum.StrEnum):
    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


def read_state_file(data_dir: str) -> dict | None:
    """cluster.json as a dict, or None when absent or unreadable."""
    try:
        with open(os.path.join(data_dir, STATE_FILE_NAME), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_state_file(data_dir: str, snapshot: dict) -> None:
    """Replace cluster.json atomically (not fsynced: it is run state, not data)."""
    write_json(os.path.join(data_dir, STATE_FILE_NAME), snapshot, durable=False)


def acquire_data_dir_lock(data_dir: str) -> int:
    """The lock's fd, held while the supervisor lives; SupervisorError when another holds it."""
    path = os.path.join(data_dir, LOCK_FILE_NAME)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        holder = (read_state_file(data_dir) or {}).get("supervisor_pid")
        raise SupervisorError(f"another supervisor (pid {holder}) runs on {data_dir}") from None
    return fd
