"""Consumer offsets per (group, topic, queue), kept by the broker, persisted as JSON.

An offset is a queue offset (a ConsumeQueue entry number), the next one to consume.
Writes land in memory and reach config/consumerOffset.json every
``consumer_offset_persist_interval_ms`` and at shutdown (RocketMQ: 5 s).
"""

from __future__ import annotations

import os

from cluster.shm.json_store import read_json, write_json


class ConsumerOffsetManager:
    def __init__(self, store_dir: str):
        self.path = os.path.join(store_dir, "config", "consumerOffset.json")
        raw = read_json(self.path, {"offsetTable": {}})
        # "topic@group" -> {queue id: offset}, RocketMQ's on-disk shape.
        self.table: dict[str, dict[int, int]] = {
            key: {int(q): int(o) for q, o in queues.items()}
            for key, queues in raw.get("offsetTable", {}).items()}
        self.dirty = False

    @staticmethod
    def _key(group: str, topic: str) -> str:
        return f"{topic}@{group}"

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self.table.setdefault(self._key(group, topic), {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.dirty = True

    def query(self, group: str, topic: str, queue_id: int) -> int | None:
        return self.table.get(self._key(group, topic), {}).get(queue_id)

    def drop_topic(self, topic: str) -> None:
        for key in [k for k in self.table if k.startswith(topic + "@")]:
            del self.table[key]
            self.dirty = True

    def persist(self, force: bool = False) -> None:
        if not (self.dirty or force):
            return
        write_json(self.path, {"offsetTable": {
            key: {str(q): o for q, o in queues.items()} for key, queues in self.table.items()}})
        self.dirty = False
