"""What the proxy process is told (RocketMQ 5's ProxyConfig, the part a cluster-mode proxy uses):
where to listen, which NameServers to ask, and the limits it holds clients to. Built by the
topology and passed as JSON on the command line; nothing here imports the gRPC modules.

Defaults are Apache's proxy's, except two minimums that are lower so tests can stay quick (a
client may still ask for Apache's values): ``long_polling_min_ms`` (Apache: 5 s) and
``invisible_min_ms`` (Apache: 10 s for a receive).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from rocketbox.cluster.config import TLS_DISABLED, check_tls

PROXY_PORT_DEFAULT = 8081
MIB = 1024 * 1024
GRPC_FRONTS = ("grpcio", "native")
# RocketMQ's messageDelayLevel: the consumers' retry back-off (a group's CustomizedRetryPolicy).
RETRY_DELAYS_MS_DEFAULT = (1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000,
                           420_000, 480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000)


@dataclass(frozen=True)
class ProxySettings:
    host: str = "127.0.0.1"
    port: int = PROXY_PORT_DEFAULT
    # tcp://host:port of each NameServer's native door: routes, cluster info.
    namesrv_endpoints: tuple[str, ...] = ()
    # One request to a broker or NameServer (a long poll adds its own wait to it).
    request_timeout_ms: int = 3_000
    # Publishing.max_body_size as answered to producers, and the SendMessage check (the brokers'
    # message_size_bytes_max: a larger body would be refused by the store anyway).
    max_body_size: int = 4 * MIB
    max_user_properties: int = 128
    max_user_property_bytes: int = 16 * 1024
    max_message_group_bytes: int = 64
    max_delay_ms: int = 24 * 3600 * 1000
    # ReceiveMessage: long polling is clamped to [min, max]; invisible times must lie in [min, max].
    long_polling_min_ms: int = 0
    long_polling_max_ms: int = 20_000
    invisible_min_ms: int = 1_000
    invisible_max_ms: int = 12 * 3600 * 1000
    # What a PushConsumer's receive (auto_renew, no invisible duration) holds its messages for.
    default_invisible_ms: int = 60_000
    receive_batch_max: int = 32
    retry_delays_ms: tuple[int, ...] = RETRY_DELAYS_MS_DEFAULT
    # Caches of the brokers' answers: topic routes, topic configs (message types), group configs.
    route_ttl_ms: int = 30_000
    metadata_ttl_ms: int = 5_000
    # Producer groups (topics) of live gRPC producers are heartbeated to every master this often,
    # so a broker's transaction check finds this proxy (RocketMQ's proxy uses the topic as group).
    broker_heartbeat_interval_ms: int = 10_000
    # A gRPC client that neither heartbeats nor holds a Telemetry stream this long is forgotten.
    client_expiry_ms: int = 120_000
    # Bounds: clients remembered, RPCs in flight (every open stream counts), one request's size.
    max_clients: int = 10_000
    max_concurrent_rpcs: int = 4_096
    max_request_bytes: int = 16 * MIB
    # Which gRPC server runs the door: "grpcio" (grpc.aio) or "native" (HTTP/2 in the C helper,
    # proxy/native_door.py; plaintext only: with TLS the proxy serves on grpc.aio whatever this says),
    # and the native door's bound on connections open at once.
    grpc_front: str = "native"
    # The native door hands a read's SendMessage and AckMessage calls to the proxy as one batch (one broker
    # request a queue, producer_batch.py, ack_batches.py) and writes a receive's messages as one run of
    # bytes (server.stream_handlers); off: one call and one response at a time, as grpc.aio does
    # (perf/grpc_front_ab.py's A/B).
    grpc_batch_calls: bool = True
    # The proxy's requests to NameServers and brokers on its loop's own ZMTP connections (loop_calls.py),
    # without the RpcClient's I/O thread; off (or with access control's CURVE keys): through the RpcClient.
    broker_calls_on_loop: bool = True
    max_connections: int = 1_024
    # A native-door connection that has not sent HTTP/2's preface this long is closed (grpc's own
    # server waits 120 s for a handshake; a held slot of max_connections should not last that long).
    handshake_timeout_ms: int = 10_000
    telemetry_outbox: int = 64
    # The cluster's plain_acl.yml when access control is on ("" = off): every RPC's authorization
    # header is checked against it (proxy/access.py), and the brokers are asked with the cluster's key.
    acl_file: str = ""
    # TLS (the brokers' tls.server.* settings, cluster/tls.py): "enforcing" serves TLS only with this
    # certificate and key; "permissive" serves TLS and plaintext on the one port.
    tls_server_mode: str = TLS_DISABLED
    tls_server_cert_path: str = ""
    tls_server_key_path: str = ""
    # A signed request's x-mq-date-time must lie this close to the proxy's clock (proxy/access.py).
    signed_time_skew_s: float = 900.0
    # Lite topics (RocketMQ 5.5; proxy/lite_*.py): a lite topic's name at most this many bytes (Apache's
    # maxLiteTopicSize), lite topics one client subscribes (answered as lite_subscription_quota), lite
    # subscriptions in all (Apache's broker maxLiteSubscriptionCount), lite topics alive at once, and
    # popped messages held for another member of their group.
    max_lite_topic_size: int = 64
    lite_subscription_quota: int = 1_200
    max_lite_subscriptions: int = 100_000
    max_lite_topics: int = 100_000
    lite_held_max: int = 10_000

    def validate(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"proxy port {self.port} is out of range")
        check_tls(self.tls_server_mode, self.tls_server_cert_path, self.tls_server_key_path)
        if not self.namesrv_endpoints:
            raise ValueError("the proxy needs the NameServers to ask for routes")
        positive = ("request_timeout_ms", "handshake_timeout_ms", "max_body_size", "long_polling_max_ms",
                    "invisible_max_ms", "default_invisible_ms", "receive_batch_max", "route_ttl_ms", "metadata_ttl_ms",
                    "broker_heartbeat_interval_ms", "client_expiry_ms", "max_clients", "max_concurrent_rpcs",
                    "max_request_bytes", "max_connections", "telemetry_outbox", "signed_time_skew_s",
                    "max_lite_topic_size", "lite_subscription_quota", "max_lite_subscriptions", "max_lite_topics",
                    "lite_held_max")
        for name in positive:
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.grpc_front not in GRPC_FRONTS:
            raise ValueError(f"grpc_front must be one of {', '.join(GRPC_FRONTS)}, not {self.grpc_front!r}")
        if not 0 <= self.long_polling_min_ms <= self.long_polling_max_ms:
            raise ValueError("long_polling_min_ms must lie in [0, long_polling_max_ms]")
        if not 0 <= self.invisible_min_ms <= self.invisible_max_ms:
            raise ValueError("invisible_min_ms must lie in [0, invisible_max_ms]")
        if self.max_request_bytes <= self.max_body_size:
            raise ValueError("max_request_bytes must exceed max_body_size, or a body just over the limit "
                             "is cut off by gRPC before the proxy can say why")

    @property
    def address(self) -> str:
        """host:port, what a RocketMQ 5 client takes as its endpoints."""
        return f"{self.host}:{self.port}"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ProxySettings":
        raw = json.loads(text)
        for name in ("namesrv_endpoints", "retry_delays_ms"):
            if name in raw:
                raw[name] = tuple(raw[name])
        return cls(**raw)
