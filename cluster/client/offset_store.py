"""A broadcasting consumer's offsets, kept on the client (RocketMQ's LocalFileOffsetStore).

In broadcasting mode every member reads every queue, so the broker's one offset per
(group, queue) cannot say how far each member got: each keeps its own, in
``<local_offset_store_dir>/<store id>/<group>/offsets.json`` (RocketMQ:
``~/.rocketmq_offsets/<clientId>/<group>/offsets.json``, the directory set by
``rocketmq.client.localOffsetStoreDir``). The store id follows RocketMQ's client id: with an
``instance_name`` of its own a client is ``<ip>@<instance_name>`` and finds its offsets
again after a restart; with the DEFAULT one its id names the process (RocketMQ turns
DEFAULT into the pid), so a restarted member starts afresh, as a RocketMQ one does.

The table lives in memory, updated as consumption advances; it is written (atomically:
temp file, fsync, rename) every ``consumer_offset_commit_interval_ms`` when it changed and
at shutdown (RocketMQ's persistConsumerOffsetInterval, 5 s), and read back at start. The
file holds ``{"offsetTable": [{"topic", "brokerName", "queueId", "offset"}]}``, the shape
RocketMQ's C++ client uses for offset tables (Java's has object keys, not plain JSON).
"""

from __future__ import annotations

import logging
import os
import re
import threading

from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.json_files import read_json, write_json
from rocketbox.cluster.protocol import MessageQueue, offset_table_from_rows, offset_table_rows  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

LOCAL_OFFSET_STORE_DIR_DEFAULT = "~/.rocketbox_offsets"
DEFAULT_INSTANCE_NAME = "DEFAULT"
_UNSAFE = re.compile(r"[^A-Za-z0-9@._%|-]")

_open_paths: set[str] = set()
_open_paths_lock = threading.Lock()


def store_id(client_id: str, instance_name: str) -> str:
    """The directory a client's offsets live under (``client_id`` is ``<ip>@<pid>@<instance>@<n>``):
    stable across restarts for a named instance."""
    name = client_id if instance_name == DEFAULT_INSTANCE_NAME else f"{client_id.split('@')[0]}@{instance_name}"
    return _UNSAFE.sub("_", name)


def local_offset_store_path(directory: str, store: str, group: str) -> str:
    return os.path.join(os.path.expanduser(directory or LOCAL_OFFSET_STORE_DIR_DEFAULT), store, group,
                        "offsets.json")


class LocalOffsetStore:
    """One member's offsets of one group. ``open()`` refuses a file another live consumer of
    this process already holds (RocketMQ refuses a group registered twice in one client)."""

    def __init__(self, path: str):
        self.path = path
        self._lock = threading.Lock()
        self._table: dict[MessageQueue, int] = {}
        self._dirty = False
        self._open = False

    def open(self) -> "LocalOffsetStore":
        with _open_paths_lock:
            if self.path in _open_paths:
                raise ClientError(f"another broadcasting consumer of this process keeps its offsets in {self.path}; "
                                  f"give each member of a group its own instance_name")
            _open_paths.add(self.path)
        self._open = True
        raw = read_json(self.path, None)
        if raw is None and os.path.exists(self.path):
            log.warning("local offsets %s are unreadable; starting without them", self.path)
        try:
            self._table = offset_table_from_rows((raw or {}).get("offsetTable"))
        except (KeyError, TypeError, ValueError) as exc:
            log.warning("local offsets %s are malformed (%s); starting without them", self.path, exc)
            self._table = {}
        if self._table:
            log.info("loaded %d local offsets from %s", len(self._table), self.path)
        return self

    def read(self, mq: MessageQueue) -> int | None:
        with self._lock:
            return self._table.get(mq)

    def update(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        with self._lock:
            old = self._table.get(mq)
            if old == offset or (increase_only and old is not None and offset < old):
                return
            self._table[mq] = offset
            self._dirty = True

    def table(self) -> dict[MessageQueue, int]:
        with self._lock:
            return dict(self._table)

    def persist(self) -> None:
        """Write the table if it changed since the last write."""
        with self._lock:
            if not self._dirty:
                return
            rows = offset_table_rows(self._table)
            self._dirty = False
        try:
            write_json(self.path, {"offsetTable": rows})
        except OSError as exc:
            self._dirty = True
            log.warning("writing local offsets %s failed: %s", self.path, exc)

    def close(self) -> None:
        if not self._open:
            return
        self.persist()
        self._open = False
        with _open_paths_lock:
            _open_paths.discard(self.path)
