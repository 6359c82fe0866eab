"""A broker's subscription groups (RocketMQ's SubscriptionGroupConfig), in config/subscriptionGroup.json.

A group gets a config when it is first seen (a heartbeat or a pull: RocketMQ's
``autoCreateSubscriptionGroup``) or when mqadmin updateSubGroup writes one. What the
broker enforces from it: ``consumeEnable`` (false: pulls are refused NO_PERMISSION), and
``retryMaxTimes`` (the send-back limit when a client does not send its own
``maxReconsumeTimes``, as Java clients before 3.4.9 did not). The other fields are kept and
shown as RocketMQ keeps them; with ``autoCreateSubscriptionGroup`` off, a group without a
config may not pull (SUBSCRIPTION_GROUP_NOT_EXIST).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from rocketbox.cluster.json_files import read_json, write_json
from rocketbox.cluster.shm import paths

RETRY_MAX_TIMES_DEFAULT = 16


@dataclass
class SubscriptionGroupConfig:
    groupName: str
    consumeEnable: bool = True
    consumeFromMinEnable: bool = True
    consumeBroadcastEnable: bool = True
    consumeMessageOrderly: bool = False
    retryQueueNums: int = 1
    retryMaxTimes: int = RETRY_MAX_TIMES_DEFAULT
    brokerId: int = 0
    whichBrokerWhenConsumeSlowly: int = 1
    notifyConsumerIdsChangedEnable: bool = True
    groupSysFlag: int = 0
    consumeTimeoutMinute: int = 15

    @classmethod
    def from_json(cls, raw: dict) -> "SubscriptionGroupConfig":
        """From a JSON object with RocketMQ's field names; unknown fields (5.x additions such as
        ``attributes`` or ``groupRetryPolicy``) are ignored, wrong types refused with ValueError."""
        if not isinstance(raw, dict) or not isinstance(raw.get("groupName"), str):
            raise ValueError("a SubscriptionGroupConfig needs a groupName string")
        values = {}
        for spec in fields(cls):
            if spec.name not in raw or spec.name == "groupName":
                continue
            value = raw[spec.name]
            if spec.type == "bool":
                if not isinstance(value, bool) and value not in ("true", "false"):
                    raise ValueError(f"{spec.name} must be true or false, got {value!r}")
                value = value is True or value == "true"
            else:
                if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).lstrip("-").isdigit():
                    raise ValueError(f"{spec.name} must be an integer, got {value!r}")
                value = int(value)
            values[spec.name] = value
        return cls(raw["groupName"], **values)


class SubscriptionGroupManager:
    def __init__(self, store_dir: str, *, auto_create: bool = True):
        self.path = paths.config_path(store_dir, "subscriptionGroup")
        self.auto_create = auto_create
        raw = read_json(self.path, {}) or {}
        self.groups: dict[str, SubscriptionGroupConfig] = {
            name: SubscriptionGroupConfig.from_json(cfg)
            for name, cfg in (raw.get("subscriptionGroupTable") or {}).items()}
        self.version = int((raw.get("dataVersion") or {}).get("counter", 0))

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self.groups.get(group)

    def ensure(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, made with the defaults on first sight when auto-create is on."""
        cfg = self.groups.get(group)
        if cfg is None and self.auto_create:
            cfg = self.upsert(SubscriptionGroupConfig(group))
        return cfg

    def upsert(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        self.groups[cfg.groupName] = cfg
        self.persist()
        return cfg

    def delete(self, group: str) -> bool:
        if self.groups.pop(group, None) is None:
            return False
        self.persist()
        return True

    def retry_max_times(self, group: str) -> int:
        cfg = self.groups.get(group)
        return cfg.retryMaxTimes if cfg is not None else RETRY_MAX_TIMES_DEFAULT

    def table(self) -> dict[str, dict]:
        return {name: asdict(cfg) for name, cfg in self.groups.items()}

    def replace(self, table: dict) -> None:
        """A slave takes its master's table as it is (slave_sync.py)."""
        fresh = {name: SubscriptionGroupConfig.from_json(cfg) for name, cfg in table.items()}
        if fresh != self.groups:
            self.groups = fresh
            self.persist()

    def persist(self) -> None:
        self.version += 1
        write_json(self.path, self.to_json())

    def to_json(self) -> dict:
        return {"subscriptionGroupTable": self.table(), "dataVersion": {"counter": self.version}}
