"""A broker's topic configuration, persisted as JSON (config/topics.json).

Each config carries RocketMQ 5's topic ``attributes`` (``topic_attributes.py``: the message types it
takes); files written before attributes existed load with none."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from rocketbox.cluster.json_files import read_json, write_json
from rocketbox.cluster.message.system_topics import AUTO_CREATE_TOPIC_KEY
from rocketbox.cluster.protocol import PERM_READ_WRITE
from rocketbox.cluster.shm import paths
from rocketbox.cluster.topic_attributes import declared_message_type


@dataclass
class TopicConfig:
    topicName: str
    readQueueNums: int
    writeQueueNums: int
    perm: int = PERM_READ_WRITE
    topicSysFlag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    @property
    def message_type(self) -> str | None:
        """``message.type`` (NORMAL, FIFO, DELAY, TRANSACTION, MIXED, PRIORITY), None when undeclared."""
        return declared_message_type(self.attributes)

    @classmethod
    def from_json(cls, raw: dict) -> "TopicConfig":
        """A config as topics.json or GET_ALL_TOPIC_CONFIG holds it; keys of other versions
        (RocketMQ's topicFilterType, ...) are left out rather than refused."""
        known = {f.name for f in fields(cls)}
        cfg = cls(**{k: v for k, v in raw.items() if k in known})
        attributes = cfg.attributes or {}
        if not isinstance(attributes, dict):
            raise ValueError(f"topic {cfg.topicName}: attributes must be an object, got {attributes!r:.60}")
        cfg.attributes = {str(k): str(v) for k, v in attributes.items()}
        return cfg


class TopicConfigManager:
    def __init__(self, store_dir: str, *, auto_create_enabled: bool, queue_count_default: int):
        self.path = paths.config_path(store_dir, "topics")
        self.auto_create_enabled = auto_create_enabled
        self.queue_count_default = queue_count_default
        raw = read_json(self.path, {"topicConfigTable": {}})
        self.topics: dict[str, TopicConfig] = {
            name: TopicConfig.from_json(cfg) for name, cfg in raw.get("topicConfigTable", {}).items()}
        if auto_create_enabled and AUTO_CREATE_TOPIC_KEY not in self.topics:
            # Clients ask for this route when a topic is unknown (RocketMQ's TBW102 rule).
            self.topics[AUTO_CREATE_TOPIC_KEY] = TopicConfig(
                AUTO_CREATE_TOPIC_KEY, queue_count_default, queue_count_default, 7)
        elif not auto_create_enabled:
            self.topics.pop(AUTO_CREATE_TOPIC_KEY, None)

    def get(self, topic: str) -> TopicConfig | None:
        return self.topics.get(topic)

    def upsert(self, cfg: TopicConfig) -> None:
        self.topics[cfg.topicName] = cfg
        self.persist()

    def create_on_send(self, topic: str, requested_queue_count: int) -> TopicConfig | None:
        """Auto-create an unknown topic on its first send: min(client default, broker default) queues."""
        if not self.auto_create_enabled:
            return None
        count = max(1, min(requested_queue_count, self.queue_count_default))
        cfg = TopicConfig(topic, count, count)
        self.upsert(cfg)
        return cfg

    def adopt(self, queues_by_topic: dict[str, list[int]], skip: set[str]) -> list[str]:
        """Give a config to every topic the store holds queues of but this table lacks (a replica
        elected master before it copied a new topic's config); returns the topics adopted."""
        adopted = [t for t in queues_by_topic if t not in self.topics and t not in skip]
        for topic in adopted:
            count = max(queues_by_topic[topic]) + 1
            self.topics[topic] = TopicConfig(topic, count, count)
        if adopted:
            self.persist()
        return adopted

    def delete(self, topic: str) -> bool:
        if self.topics.pop(topic, None) is None:
            return False
        self.persist()
        return True

    def table(self) -> dict[str, dict]:
        return {name: asdict(cfg) for name, cfg in self.topics.items()}

    def persist(self) -> None:
        write_json(self.path, {"topicConfigTable": self.table()})
