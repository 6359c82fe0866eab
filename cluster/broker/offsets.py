"""Consumer offsets per (group, topic, queue), kept by the broker.

An offset is a queue offset (a ConsumeQueue entry number), the next one to consume.

RocketMQ keeps them in memory and writes consumerOffset.json every 5 s, so a broker
crash forgets up to 5 s of commits and the group re-reads what it had acknowledged. Here
every commit also lands in a shared-memory slot (``consumerOffset.slots``, one u64 per
(group, topic, queue)), which outlives a SIGKILL of the broker the way the CommitLog's
mapped pages do: a restarted broker answers the last offset it accepted. The JSON file
is still written every ``consumer_offset_persist_interval_ms`` (with an msync of the
slots) and at shutdown; it is what survives a machine crash.

Which slot holds which queue is itself durable (``consumerOffset.slotmap.json``, written
with fsync when a queue is first committed, which happens once per group and queue).
The slots' bytes: ``shm/offset_slots_format.py``.
"""

from __future__ import annotations

import logging
import mmap
import os

from rocketbox.cluster.json_files import read_json, write_json
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.shm import durable, paths
from rocketbox.cluster.shm.offset_slots_format import SLOT_COUNT, FILE_BYTES, read_slot, write_slot

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)


class ConsumerOffsetManager:
    """``name``: the files' stem; "delayOffset" keeps the schedule service's progress."""

    def __init__(self, store_dir: str, name: str = "consumerOffset"):
        durable.makedirs(paths.config_dir(store_dir))
        self.path = paths.config_path(store_dir, name)
        self.slotmap_path = paths.slotmap_path(store_dir, name)
        raw = read_json(self.path, {"offsetTable": {}})
        # "topic@group" -> {queue id: offset}, RocketMQ's on-disk shape.
        self.table: dict[str, dict[int, int]] = {
            key: {int(q): int(o) for q, o in queues.items()}
            for key, queues in raw.get("offsetTable", {}).items()}
        self.dirty = False
        self._slots_path = paths.slots_path(store_dir, name)
        self._slots_file, self._slots = self._map_slots(self._slots_path)
        self.slot_of: dict[tuple[str, int], int] = {
            (key, int(q)): int(slot) for key, queues in read_json(self.slotmap_path, {}).items()
            for q, slot in queues.items()}
        # Slots freed since the start, then the lowest never used, found as they are needed (listing
        # all 65,536 at every start cost ~10 ms a manager, three a broker boot).
        self._free: list[int] = []
        used = set(self.slot_of.values())
        self._unused = (slot for slot in range(SLOT_COUNT) if slot not in used)
        self._overlay_slots()

    @staticmethod
    def _map_slots(path: str):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        if os.fstat(fd).st_size < FILE_BYTES:
            os.ftruncate(fd, FILE_BYTES)
        return fd, mmap.mmap(fd, FILE_BYTES)

    def _overlay_slots(self) -> None:
        """Commits accepted after the last JSON write, read back from the slots."""
        for (key, queue_id), slot in self.slot_of.items():
            stored = read_slot(self._slots, slot)
            if stored is not None and self.table.get(key, {}).get(queue_id) != stored:
                self.table.setdefault(key, {})[queue_id] = stored
                self.dirty = True

    @staticmethod
    def _key(group: str, topic: str) -> str:
        return f"{topic}@{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        key = self._key(group, topic)
        queues = self.table.setdefault(key, {})
        if queues.get(queue_id) == offset:
            return
        queues[queue_id] = offset
        self.dirty = True
        slot = self.slot_of.get((key, queue_id))
        if slot is None:
            slot = self._assign_slot(key, queue_id)
        if slot is not None:
            write_slot(self._slots, slot, offset)

    def _assign_slot(self, key: str, queue_id: int) -> int | None:
        slot = self._free.pop() if self._free else next(self._unused, None)
        if slot is None:
            _limited.warning("slots-full", "all %d consumer offset slots in use: %s queue %d is kept by the periodic "
                             "JSON write only", SLOT_COUNT, key, queue_id)
            return None
        write_slot(self._slots, slot, None)
        self.slot_of[(key, queue_id)] = slot
        self._write_slotmap()
        return slot

    def _write_slotmap(self) -> None:
        data: dict[str, dict[str, int]] = {}
        for (key, queue_id), slot in self.slot_of.items():
            data.setdefault(key, {})[str(queue_id)] = slot
        write_json(self.slotmap_path, data)

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.table.get(self._key(group, topic), {}).get(queue_id)

    def topics_of(self, group: str) -> list[str]:
        """The topics ``group`` has committed offsets on."""
        return sorted(key.rsplit("@", 1)[0] for key in self.table if key.endswith("@" + group))

    def groups_of(self, topic: str) -> list[str]:
        """The groups with committed offsets on ``topic``."""
        return sorted(key[len(topic) + 1:] for key in self.table if key.startswith(topic + "@"))

    def drop_topic(self, topic: str) -> None:
        self._drop(lambda key: key.startswith(topic + "@"))

    def drop_group(self, group: str) -> None:
        """Forget every offset of ``group`` (mqadmin deleteSubGroup with cleanOffset)."""
        self._drop(lambda key: key.endswith("@" + group))

    def _drop(self, doomed) -> None:
        for key in [k for k in self.table if doomed(k)]:
            del self.table[key]
            self.dirty = True
        freed = [kq for kq in self.slot_of if doomed(kq[0])]
        for kq in freed:
            slot = self.slot_of.pop(kq)
            write_slot(self._slots, slot, None)
            self._free.append(slot)
        if freed:
            self._write_slotmap()
        self.persist(force=True)   # else the last JSON snapshot would bring the dropped offsets back

    def close(self) -> None:
        """Unmap the slots and close their file (a broker run in process, many times over, ran out of
        descriptors without it). Idempotent; the manager is unusable after."""
        if self._slots_file is not None:
            self._slots.close()
            os.close(self._slots_file)
            self._slots_file = None

    def persist(self, force: bool = False) -> None:
        if not (self.dirty or force):
            return
        self._slots.flush()
        durable.synced_range(self._slots_path, 0, FILE_BYTES)
        write_json(self.path, {"offsetTable": {
            key: {str(q): o for q, o in queues.items()} for key, queues in self.table.items()}})
        self.dirty = False
