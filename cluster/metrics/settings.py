"""What the metrics exporter process is told: where to listen, which brokers to ask, where the
supervisor's run state is, which NameServers to ask for their refusals. Built by the topology from
the brokers' RocketMQ settings (metricsPromExporterHost / metricsPromExporterPort); passed as JSON
on the command line."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import NamedTuple


class BrokerTarget(NamedTuple):
    """A broker the exporter asks; its name and id label it even when it does not answer."""
    address: str   # host:port of its native door
    name: str
    broker_id: int


class NamesrvTarget(NamedTuple):
    """A NameServer the exporter asks (GET_NAMESRV_METRICS): its access control's refusals."""
    address: str   # host:port of its native door
    name: str      # the supervisor's name for it (namesrv-0, ...)


@dataclass(frozen=True)
class ExporterSettings:
    host: str
    port: int
    cluster_name: str
    # Every broker (masters and slaves) whose numbers this endpoint serves.
    brokers: tuple[BrokerTarget, ...]
    # The supervisor's cluster.json: each child's restarts and pid.
    state_path: str
    # A broker that has not answered within this is reported down for that scrape (the others still are).
    request_timeout_ms: int = 2_000
    # Access control (cluster/acl/): the cluster's plain_acl.yml, and whether a scrape must carry an
    # account's credentials (HTTP Basic, accessKey and secretKey; the topology requires them on an
    # address that is not loopback).
    acl_file: str = ""
    require_credentials: bool = False
    # This host's NameServers (none on a host that runs brokers only).
    namesrvs: tuple[NamesrvTarget, ...] = ()

    def validate(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"metrics port {self.port} is out of range")
        if self.request_timeout_ms <= 0:
            raise ValueError("request_timeout_ms must be positive")
        if self.require_credentials and not self.acl_file:
            raise ValueError("the metrics endpoint can ask for credentials only with the cluster's ACL file")

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ExporterSettings":
        raw = json.loads(text)
        raw["brokers"] = tuple(BrokerTarget(*broker) for broker in raw.get("brokers", ()))
        raw["namesrvs"] = tuple(NamesrvTarget(*namesrv) for namesrv in raw.get("namesrvs", ()))
        return cls(**raw)
