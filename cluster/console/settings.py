"""What the console process is told: where to listen, which NameServers to ask, where the
supervisor's run state is. Built by the topology; passed as JSON on the command line.

A console can create and delete topics and move offsets. Without access control it serves only
the loopback interface: an address other hosts reach is refused, by the topology (before ``cluster
up`` starts anything) and again by the process itself. With the cluster's ACL file (``acl_file``)
it may listen anywhere, and then asks every request for an admin account's credentials (HTTP Basic,
accessKey and secretKey): ``require_credentials``, which the topology sets for an address that is
not loopback (a loopback console may ask too)."""

from __future__ import annotations

import dataclasses
import ipaddress
import json
from dataclasses import dataclass

# rocketmq-dashboard's port.
CONSOLE_PORT_DEFAULT = 8082
CONSOLE_HOST_DEFAULT = "127.0.0.1"


def loopback_problem(host: str) -> str | None:
    """Why the console may not listen on ``host``, or None for a loopback address."""
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        return f"the console's host {host!r} is not an IP address (use 127.0.0.1)"
    return (f"the console refuses to listen on {host} without access control: it serves only loopback "
            f"(127.0.0.0/8, ::1) unless the cluster has an ACL file (aclEnable, --acl-file); reach it from "
            f"elsewhere through an SSH tunnel")


@dataclass(frozen=True)
class ConsoleSettings:
    host: str = CONSOLE_HOST_DEFAULT
    port: int = CONSOLE_PORT_DEFAULT
    # tcp://host:port of each NameServer's native door (routes, cluster info): the Admin's.
    namesrv_endpoints: tuple[str, ...] = ()
    # The supervisor's cluster.json: every process's role, state and restarts.
    state_path: str = ""
    # One request to a broker or NameServer.
    request_timeout_ms: int = 3_000
    # The throughput sampler asks every broker this often, and keeps this much history for the charts.
    sample_interval_s: float = 2.0
    chart_window_s: int = 600
    # Access control (cluster/acl/): the cluster's plain_acl.yml, and whether every request must carry
    # an admin account's credentials (required, with an ACL file, for a host that is not loopback).
    acl_file: str = ""
    require_credentials: bool = False

    def validate(self) -> None:
        problem = loopback_problem(self.host)
        if problem and not (self.acl_file and self.require_credentials):
            raise ValueError(problem)
        if self.require_credentials and not self.acl_file:
            raise ValueError("the console can ask for credentials only with the cluster's ACL file")
        if not 0 < self.port < 65536:
            raise ValueError(f"console port {self.port} is out of range")
        if not self.namesrv_endpoints:
            raise ValueError("the console needs the NameServers to ask")
        if self.request_timeout_ms <= 0 or self.sample_interval_s <= 0 or self.chart_window_s <= 0:
            raise ValueError("request_timeout_ms, sample_interval_s and chart_window_s must be positive")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ConsoleSettings":
        raw = json.loads(text)
        if "namesrv_endpoints" in raw:
            raw["namesrv_endpoints"] = tuple(raw["namesrv_endpoints"])
        return cls(**raw)
