"""Every setting of the cluster, in frozen dataclasses with unit-suffixed names.

Defaults are RocketMQ's where RocketMQ has one (SPEC §1-§4). Each class has
``validate()`` which raises ``ValueError`` with a readable reason; processes call
it at start so a bad setting stops a boot instead of a restart loop.

Native (ZeroMQ) endpoints have their own default ports, away from RocketMQ's 9876 and 10911
(the remoting doors'): NameServer 9871 (then 9872, ...), broker group 10811 (next group +10), a
master's HA its port + 1, slave n of a group the master's port + 2n.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from rocketbox.cluster.account_keys import account_curve_fields
from rocketbox.cluster.setting_texts import (DELAY_LEVELS_DEFAULT, NAME_LENGTH_MAX, NAME_PATTERN,  # noqa: F401
                                            delete_hours, name_problem, parse_levels)

NAMESRV_PORT_DEFAULT = 9871
BROKER_PORT_DEFAULT = 10811
BROKER_PORT_STEP = 10
CLIENT_TRANSPORTS = ("native", "remoting")
# RocketMQ's tls.server.mode (cluster/tls.py says what each does).
TLS_DISABLED, TLS_PERMISSIVE, TLS_ENFORCING = "disabled", "permissive", "enforcing"
TLS_MODES = (TLS_DISABLED, TLS_PERMISSIVE, TLS_ENFORCING)
# RocketMQ's own ports, where its remoting protocol is served (remoting_transport.py).
NAMESRV_REMOTING_PORT_DEFAULT = 9876
# Prometheus metrics (cluster/metrics/): RocketMQ's metricsPromExporterPort default, which
# rocketmq-exporter uses too. METRICS_EXPORTER_TYPES: RocketMQ's metricsExporterType values we serve.
METRICS_PORT_DEFAULT = 5557
METRICS_PROM = "PROM"
METRICS_EXPORTER_TYPES = ("DISABLE", METRICS_PROM)
BROKER_REMOTING_PORT_DEFAULT = 10911


def namesrv_endpoints(addresses) -> tuple[str, ...]:
    """NameServer addresses as ZeroMQ endpoints: ``host:port;host:port`` (',' also separates) or a
    sequence of them, each ``host``, ``host:port`` or ``tcp://host:port``; a missing port is the
    default NameServer port, as RocketMQ's clients assume 9876."""
    text = addresses if isinstance(addresses, str) else ";".join(addresses)
    parts = text.replace(",", ";").split(";")
    out = []
    for part in parts:
        part = part.strip()
        if not part:
            continue
        if "://" not in part:
            part = f"tcp://{part}"
        if ":" not in part.split("://", 1)[1]:
            part = f"{part}:{NAMESRV_PORT_DEFAULT}"
        out.append(part)
    return tuple(out)

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
FLUSH_MODES = (ASYNC_FLUSH, SYNC_FLUSH)

ASYNC_MASTER = "ASYNC_MASTER"
SYNC_MASTER = "SYNC_MASTER"
SLAVE = "SLAVE"
BROKER_ROLES = (ASYNC_MASTER, SYNC_MASTER, SLAVE)

MIB = 1024 * 1024
GIB = 1024 * MIB


@dataclass(frozen=True)
class StoreConfig:
    """One broker's store (SPEC §4). Sizes are RocketMQ's defaults; tests shrink them."""

    store_dir: str
    commitlog_file_size_bytes: int = GIB
    consumequeue_entries_per_file: int = 300_000
    index_slot_count: int = 5_000_000
    index_entry_count_max: int = 20_000_000
    flush_mode: str = ASYNC_FLUSH
    flush_interval_ms: int = 500
    # A sync-flush send not flushed within this answers FLUSH_DISK_TIMEOUT.
    flush_sync_timeout_ms: int = 5000
    # The flush worker also flushes ConsumeQueue/IndexFile and writes the checkpoint this often.
    flush_logics_interval_ms: int = 1000
    message_size_bytes_max: int = 4 * MIB
    # RocketMQ's messageDelayLevel: the delay of levels 1..18 (units ms, s, m, h, d).
    message_delay_levels: str = DELAY_LEVELS_DEFAULT
    # Refuse writes (DISK_FULL) when free space under the store falls below this.
    disk_free_bytes_min: int = 64 * MIB
    # Touch every page of a fresh CommitLog segment and advise the kernel to keep it.
    preheat_enabled: bool = True
    # mlock the current CommitLog segment (RocketMQ's warmMapedFileEnable + mlock).
    mlock_enabled: bool = False
    # Every record the broker writes ends with RocketMQ's whole-record CRC property (its
    # enabledAppendPropCRC; "__CRC32#", message/record_format.py), which recovery verifies: a power
    # cut that garbles a record's topic, properties or header is then seen, not only one in its
    # body. On by default here (RocketMQ's default is false): the durability promise needs it.
    record_crc_enabled: bool = True
    # Retention (shm/retention.py, in the allocate worker), RocketMQ's CleanCommitLogService: a
    # CommitLog segment closed longer ago than file_reserved_time_ms (fileReservedTime, 72 h) is
    # deleted during the hours of delete_when ("04", or "04;16"), at once when asked
    # (deleteExpiredCommitLog), and above disk_max_used_space_ratio percent of the disk in use the
    # oldest go even unexpired; never the segment being written. One look every
    # clean_resource_interval_ms, at most delete_file_batch_max files a look, a pause of
    # delete_commitlog_files_interval_ms between two deletions (all RocketMQ's, with its defaults).
    file_reserved_time_ms: int = 72 * 3_600_000
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75
    clean_resource_interval_ms: int = 10_000
    delete_file_batch_max: int = 10
    delete_commitlog_files_interval_ms: int = 100

    def validate(self) -> None:
        parse_levels(self.message_delay_levels)
        if self.flush_mode not in FLUSH_MODES:
            raise ValueError(f"flush_mode must be one of {FLUSH_MODES}, not {self.flush_mode!r}")
        if self.commitlog_file_size_bytes < 4096:
            raise ValueError("commitlog_file_size_bytes must be at least 4096")
        if self.message_size_bytes_max + 4096 > self.commitlog_file_size_bytes:
            # A record never spans two files, so one must always fit in an empty file.
            raise ValueError("commitlog_file_size_bytes must exceed message_size_bytes_max + 4096")
        for name in ("consumequeue_entries_per_file", "index_slot_count", "index_entry_count_max",
                     "flush_interval_ms", "flush_sync_timeout_ms", "flush_logics_interval_ms",
                     "file_reserved_time_ms", "clean_resource_interval_ms", "delete_file_batch_max"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        delete_hours(self.delete_when)
        if not 1 <= self.disk_max_used_space_ratio <= 95:
            # RocketMQ keeps the ratio within [10, 95]; tests need lower to trigger on any disk.
            raise ValueError(f"disk_max_used_space_ratio must be within 1..95 (percent), not "
                             f"{self.disk_max_used_space_ratio}")
        if self.delete_commitlog_files_interval_ms < 0:
            raise ValueError("delete_commitlog_files_interval_ms must not be negative")


@dataclass(frozen=True)
class NamesrvConfig:
    host: str = "127.0.0.1"
    port: int = NAMESRV_PORT_DEFAULT
    # RocketMQ's remoting protocol (RocketMQ clients, mqadmin) on this port; 0 serves none.
    remoting_port: int = 0
    # The remoting door's bounds before a connection proves itself (remoting_admission.py), as the broker's.
    remoting_connections_max: int = 4096
    remoting_unproven_timeout_ms: int = 10_000
    remoting_unproven_bytes_max: int = 64 * 1024 * 1024
    remoting_buffered_bytes_max: int = 256 * 1024 * 1024
    data_dir: str = ""
    # A broker silent for this long is dropped from routes (RocketMQ: 120 s).
    broker_expiry_ms: int = 120_000
    scan_interval_ms: int = 5_000
    # RocketMQ's orderMessageEnable: routes carry the topic's ORDER_TOPIC_CONFIG KV entry as
    # orderTopicConf (mqadmin updateOrderConf writes it; namesrv_kv.py). Off, as RocketMQ's default.
    order_message_enable: bool = False
    # Failover controller (cluster/controller/, RocketMQ 5's Controller embedded in the NameServer):
    # this node's Raft address host:port ("" = no controller), where it binds, and the other nodes'.
    # Nodes prove to each other they hold the cluster's secret, read from controller_secret_file
    # (controller/secret.py; the file, not the secret, travels in the child's command line).
    controller_address: str = ""
    controller_peers: tuple[str, ...] = ()
    controller_secret_file: str = ""
    # A replica silent this long is dead: a dead master is replaced (RocketMQ 5's
    # controllerBrokerHeartbeatTimeout; brokers heartbeat every controller_heartbeat_interval_ms).
    broker_heartbeat_timeout_ms: int = 3_000
    controller_scan_interval_ms: int = 200
    # Access control (cluster/acl/): as the brokers' aclEnable and aclFile below.
    acl_enable: bool = False
    acl_file: str = ""
    # TLS on the remoting door: as the brokers' below.
    tls_server_mode: str = TLS_DISABLED
    tls_server_cert_path: str = ""
    tls_server_key_path: str = ""

    def validate(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"port {self.port} is out of range")
        _check_acl(self.acl_enable, self.acl_file)
        check_tls(self.tls_server_mode, self.tls_server_cert_path, self.tls_server_key_path)
        _check_remoting_port(self.remoting_port, self.port)
        if self.broker_expiry_ms <= 0 or self.broker_heartbeat_timeout_ms <= 0:
            raise ValueError("broker_expiry_ms and broker_heartbeat_timeout_ms must be positive")
        _check_remoting_bounds(self)
        if self.controller_address and not self.controller_secret_file:
            raise ValueError("a controller node needs controller_secret_file: the cluster's controller secret")

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host}:{self.port}"


@dataclass(frozen=True)
class BrokerConfig:
    store: StoreConfig
    cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0
    broker_role: str = ASYNC_MASTER
    host: str = "127.0.0.1"
    port: int = BROKER_PORT_DEFAULT
    # RocketMQ's remoting protocol (RocketMQ clients, mqadmin) on this port; 0 serves none. With
    # one, the stored STOREHOST (and so every offset message id) names this door, as on a RocketMQ
    # broker: the C++ client sends a message back for retry to the address in it.
    remoting_port: int = 0
    # The remoting door's bounds: open connections; a connection silent this long is closed
    # (RocketMQ's serverChannelMaxIdleTimeSeconds, 120 s), and one holding half a frame this long.
    remoting_connections_max: int = 4096
    remoting_idle_timeout_ms: int = 120_000
    remoting_partial_frame_timeout_ms: int = 30_000
    # Before a connection proved itself with a request (remoting_admission.py): its time to do so,
    # and the bytes of unfinished frames all such connections may hold; then every connection's.
    remoting_unproven_timeout_ms: int = 10_000
    remoting_unproven_bytes_max: int = 64 * 1024 * 1024
    remoting_buffered_bytes_max: int = 256 * 1024 * 1024
    namesrv_endpoints: tuple[str, ...] = ()
    # Broker -> NameServer registration heartbeat (RocketMQ: 30 s).
    register_interval_ms: int = 30_000
    auto_create_topic_enabled: bool = True
    # A consumer group gets a default subscription group config when first seen (RocketMQ's
    # autoCreateSubscriptionGroup); off, only groups made by updateSubGroup may consume.
    auto_create_subscription_group: bool = True
    # Queues of an auto-created topic: min(client default 4, broker default 8) (SPEC §2).
    topic_queue_count_default: int = 8
    client_topic_queue_count_default: int = 4
    # Long polling: longest hold of a pull with nothing new (RocketMQ client: 15 s).
    pull_suspend_ms_max: int = 30_000
    pull_batch_count_max: int = 1024
    # Long-polling pulls held at once; past this a pull is answered SYSTEM_BUSY.
    parked_pulls_max: int = 10_000
    # Overload (cluster/fast_failure.py, RocketMQ's BrokerFastFailure and its keys): a request that
    # waited in front of the broker's loop longer than its kind's bound is answered SYSTEM_BUSY
    # "[TIMEOUT_CLEAN_QUEUE]broker busy, ..." instead of served.
    broker_fast_failure_enabled: bool = True
    wait_time_ms_in_send_queue: int = 200
    wait_time_ms_in_pull_queue: int = 5_000
    wait_time_ms_in_ack_queue: int = 3_000
    wait_time_ms_in_heartbeat_queue: int = 31_000
    wait_time_ms_in_transaction_queue: int = 3_000
    wait_time_ms_in_admin_queue: int = 5_000
    # A send is refused SYSTEM_BUSY "[PC_SYNCHRONIZED]broker busy, ..." while the oldest send waiting
    # for the disk (sync flush) has waited longer than this (RocketMQ's osPageCacheBusyTimeOutMills:
    # the store is behind), or "[OVERLOAD]system busy, ..." while send_queue_capacity sends wait
    # for it (RocketMQ's sendThreadPoolQueueCapacity).
    os_page_cache_busy_timeout_ms: int = 1_000
    send_queue_capacity: int = 10_000
    # After serving, the broker's loop polls without sleeping this long before it sleeps
    # (event_loop.py): the next request of a client finds it running, with warm caches. CPU spent
    # only in the gaps of up to this length between requests; 0: sleep at once.
    busy_poll_us: int = 300
    # Requests the native door holds unread per connection (its ZeroMQ RCVHWM): past it ZeroMQ stops
    # reading that connection, and TCP holds the client back.
    native_connection_backlog_max: int = 10_000
    pull_batch_bytes_max: int = 4 * MIB
    # A client not heard from for this long leaves its consumer groups (RocketMQ: 120 s).
    client_expiry_ms: int = 120_000
    # How often silent clients are looked for (RocketMQ's ClientHousekeepingService: 10 s).
    client_scan_interval_ms: int = 10_000
    # An orderly consumer's queue lock not renewed for this long is free (RocketMQ's
    # rocketmq.broker.rebalance.lockMaxLiveTime, 60 s).
    rebalance_lock_max_live_ms: int = 60_000
    consumer_offset_persist_interval_ms: int = 5_000
    # Transactions: half messages left open are checked back this often (RocketMQ's
    # transactionCheckInterval; 30 s here), once older than transaction_timeout_ms (6 s),
    # at most transaction_check_max times (15), then discarded.
    transaction_check_interval_ms: int = 30_000
    transaction_timeout_ms: int = 6_000
    transaction_check_max: int = 15
    # Serve SQL92 subscriptions (RocketMQ's enablePropertyFilter, off by default there too):
    # filtering reads each candidate's properties from the CommitLog.
    enable_property_filter: bool = False
    # Serve RECALL_MESSAGE and the proxy's RecallMessage (RocketMQ 5.3.2's recallMessageEnable, off by
    # default there too): a timed message recalled before it is due is never delivered (broker/recall.py).
    recall_message_enabled: bool = False
    # High availability (broker/ha.py). A master's HA endpoint (0: port + 1), where slaves connect.
    ha_port: int = 0
    # A slave's master HA endpoint, host:port.
    ha_master_address: str = ""
    # A slave's master broker host:port (its request endpoint): where it fetches topic configs
    # and consumer offsets every slave_sync_interval_ms (RocketMQ's SlaveSynchronize, 10 s).
    master_address: str = ""
    slave_sync_interval_ms: int = 10_000
    # Read from slave (broker/pull.py): a master answers a pull whose first message lies more than
    # slave_read_distance_bytes behind its CommitLog end with suggestWhichBrokerId 1 (read from the
    # slave) while a slave is in sync; a slave answers 0 (back to the master) once the pull is within
    # that distance of its own end or it has nothing new. RocketMQ: slaveReadEnable and
    # accessMessageInMemoryMaxRatio (40 % of physical memory, which 0 means here too).
    slave_read_enabled: bool = True
    slave_read_distance_bytes: int = 0
    # SYNC_MASTER: a send no slave confirmed within this answers FLUSH_SLAVE_TIMEOUT (RocketMQ's slaveTimeout).
    sync_replication_timeout_ms: int = 5_000
    # A slave further behind than this is not in sync (RocketMQ's haSlaveFallbehindMax, 256 MiB).
    ha_slave_fall_behind_max_bytes: int = 256 * MIB
    # A slave not heard from for this long is dropped (RocketMQ's haHousekeepingInterval, 20 s).
    ha_slave_expiry_ms: int = 20_000
    # A controller-mode SYNC_MASTER (broker/sync_state.py; RocketMQ 5's keys and defaults but one: ours
    # waits for all of the SyncStateSet, so SEND_OK means on every replica that may be elected).
    min_in_sync_replicas: int = 1
    all_ack_in_sync_state_set: bool = True
    in_sync_replicas: int = 1
    ha_max_time_slave_not_catchup_ms: int = 15_000
    # The master streams CommitLog bytes in chunks of up to this many bytes, with at most
    # ha_window_bytes sent and not yet acknowledged per slave.
    ha_chunk_bytes: int = 1 * MIB
    ha_window_bytes: int = 8 * MIB
    # Controller mode (automatic failover, cluster/broker/controller_client.py): the role comes from
    # the controller in the NameServers, not from broker_role/broker_id. broker_id is then the
    # replica's place in its group (replica id broker_id + 1) and broker_role the kind of master it
    # is when elected (ASYNC_MASTER or SYNC_MASTER). It heartbeats every interval; as master it
    # accepts writes only within controller_lease_ms of a heartbeat the controller's leader
    # answered naming it master (less than the NameServer's broker_heartbeat_timeout_ms, so a
    # master cut off stops writing before another is elected).
    controller_mode: bool = False
    controller_heartbeat_interval_ms: int = 500
    controller_lease_ms: int = 2_000
    # Boot waits this long for the controller to name a master.
    controller_register_timeout_ms: int = 60_000
    # Prometheus metrics: one exporter process per cluster (cluster/metrics/) serves every broker's
    # numbers on http://metrics_prom_exporter_host:metrics_prom_exporter_port/metrics; the broker
    # times its requests only when on. RocketMQ's keys; its default is DISABLE, ours PROM (loopback).
    metrics_exporter_type: str = METRICS_PROM
    metrics_prom_exporter_host: str = "127.0.0.1"
    metrics_prom_exporter_port: int = METRICS_PORT_DEFAULT
    # Access control (cluster/acl/): every door checks callers against acl_file (reread on change; CURVE keys
    # in curve/ beside it). ACL 1.0 (aclEnable): a plain_acl.yml; ACL 2.0 (RocketMQ 5.3's keys below, both
    # enabled): users and ACLs in auth_config_path/auth.json, which topology.py makes the acl_file.
    acl_enable: bool = False
    acl_file: str = ""
    authentication_enabled: bool = False
    authorization_enabled: bool = False
    auth_config_path: str = ""   # default: <data dir>/auth
    init_authentication_user: str = ""                  # {"username": .., "password": ..}: a Super user
    inner_client_authentication_credentials: str = ""   # {"accessKey": .., "secretKey": ..}: a Super user
    migrate_auth_from_v1_enabled: bool = False          # plain_acl.yml's accounts as users and ACLs
    # TLS on the remoting door (cluster/tls.py; RocketMQ's tls.server.mode, certPath, keyPath): a
    # remoting signature does not cover the request code, so only TLS keeps a captured request from
    # being replayed as another.
    tls_server_mode: str = TLS_DISABLED
    tls_server_cert_path: str = ""
    tls_server_key_path: str = ""

    def validate(self) -> None:
        self.store.validate()
        _check_acl(self.acl_enable, self.acl_file)
        check_tls(self.tls_server_mode, self.tls_server_cert_path, self.tls_server_key_path)
        if self.metrics_exporter_type not in METRICS_EXPORTER_TYPES or not 0 < self.metrics_prom_exporter_port < 65536:
            raise ValueError(f"metrics: exporter type must be one of {METRICS_EXPORTER_TYPES} (got "
                             f"{self.metrics_exporter_type!r}), port within 1..65535 (got {self.metrics_prom_exporter_port})")
        if self.broker_role not in BROKER_ROLES:
            raise ValueError(f"broker_role must be one of {BROKER_ROLES}")
        if not self.controller_mode and (self.broker_role == SLAVE) != (self.broker_id >= 1):
            raise ValueError("a slave has broker_id >= 1, a master broker_id 0")
        if self.broker_role == SLAVE and not self.ha_master_address:
            raise ValueError("a slave needs ha_master_address (its master's HA host:port)")
        if not 0 <= self.ha_port < 65536 or self.port + 1 >= 65536:
            raise ValueError(f"ha_port {self.ha_port} is out of range")
        for name in ("wait_time_ms_in_send_queue", "wait_time_ms_in_pull_queue", "wait_time_ms_in_ack_queue",
                     "wait_time_ms_in_heartbeat_queue", "wait_time_ms_in_transaction_queue",
                     "wait_time_ms_in_admin_queue", "os_page_cache_busy_timeout_ms", "send_queue_capacity",
                     "native_connection_backlog_max",
                     "sync_replication_timeout_ms", "ha_slave_expiry_ms", "ha_chunk_bytes", "ha_window_bytes",
                     "min_in_sync_replicas", "in_sync_replicas", "ha_max_time_slave_not_catchup_ms",
                     "remoting_idle_timeout_ms", "remoting_partial_frame_timeout_ms",
                     "slave_sync_interval_ms", "controller_heartbeat_interval_ms", "controller_lease_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.busy_poll_us < 0:
            raise ValueError("busy_poll_us must be >= 0")
        problem = name_problem("broker", self.broker_name) or name_problem("cluster", self.cluster_name)
        if problem:
            raise ValueError(problem)
        if not 0 < self.port < 65536:
            raise ValueError(f"port {self.port} is out of range")
        _check_remoting_port(self.remoting_port, self.port, self.ha_port or self.port + 1)
        _check_remoting_bounds(self)
        if self.broker_id < 0:
            raise ValueError("broker_id must be >= 0")

    @property
    def endpoint(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """host:port as routes carry it (RocketMQ's brokerAddrs values)."""
        return f"{self.host}:{self.port}"

    @property
    def remoting_address(self) -> str:
        """host:port of the remoting door, "" without one."""
        return f"{self.host}:{self.remoting_port}" if self.remoting_port else ""

    @property
    def store_host_port(self) -> int:
        """The port the stored STOREHOST carries: the remoting door's when there is one."""
        return self.remoting_port or self.port

    @property
    def ha_address(self) -> str:
        """A master's HA host:port (haServerAddr in its registration)."""
        return f"{self.host}:{self.ha_port or self.port + 1}"

    @property
    def is_slave(self) -> bool:
        return self.broker_role == SLAVE


def _check_acl(enabled: bool, path: str) -> None:
    if enabled and not path:
        raise ValueError("aclEnable needs aclFile, the path of a plain_acl.yml")


def check_tls(mode: str, cert_path: str, key_path: str) -> None:
    if mode not in TLS_MODES:
        raise ValueError(f"tls.server.mode={mode!r}: one of {', '.join(TLS_MODES)}")
    if mode != TLS_DISABLED and not (cert_path and key_path):
        raise ValueError(f"tls.server.mode={mode} needs tls.server.certPath and tls.server.keyPath (PEM files; "
                         f"`cluster tls` makes a self-signed pair)")


def _check_remoting_port(remoting_port: int, *taken: int) -> None:
    if not 0 <= remoting_port < 65536:
        raise ValueError(f"remoting_port {remoting_port} is out of range")
    if remoting_port and remoting_port in taken:
        raise ValueError(f"remoting_port {remoting_port} is already this process's native or HA port")


def _check_remoting_bounds(cfg) -> None:
    for name in ("remoting_connections_max", "remoting_unproven_timeout_ms", "remoting_unproven_bytes_max",
                 "remoting_buffered_bytes_max"):
        if getattr(cfg, name) <= 0:
            raise ValueError(f"{name} must be positive")


def latency_table_problem(latency_max_ms, durations_ms, isolation_latency_ms) -> str | None:
    """Why these make no latency fault table (ClientConfig.send_latency_*), or None."""
    if len(latency_max_ms) != len(durations_ms) or not latency_max_ms:
        return "send_latency_max_ms and send_not_available_duration_ms need the same, non-zero, number of entries"
    if list(latency_max_ms) != sorted(latency_max_ms):
        return "send_latency_max_ms must be in increasing order"
    if min(*latency_max_ms, *durations_ms, isolation_latency_ms) < 0:
        return "send latencies and durations must not be negative"
    return None


@dataclass(frozen=True)
class ClientConfig:
    namesrv_endpoints: tuple[str, ...] = (f"tcp://127.0.0.1:{NAMESRV_PORT_DEFAULT}",)
    route_refresh_interval_ms: int = 30_000
    # One RPC's time-out; a send's attempt waits at most this long for its broker.
    request_timeout_ms: int = 3_000
    # One send, retries included (RocketMQ's sendMsgTimeout, 3000); None: request_timeout_ms.
    send_timeout_ms: int | None = None
    send_retry_count: int = 2
    # SYSTEM_BUSY (an overloaded broker asks for "flow control for a while"): every attempt to that
    # broker waits a random hold of half to all of send_busy_backoff_ms * 2^(busy answers in a row - 1),
    # at most send_busy_backoff_max_ms (a stored send ends the streak); a send whose time-out ends
    # during the hold fails with the broker's reason.
    send_busy_backoff_ms: int = 20
    send_busy_backoff_max_ms: int = 1_000
    # send_async calls waiting for their answer at once; one more waits for a free place, at most
    # the send's time-out (RocketMQ's backPressureForAsyncSendNum).
    async_sends_max: int = 10_000
    # A sync call (send, pull, admin) polls for its answer up to twice as long as answers have been
    # taking, at most this long, before it sleeps for it (cluster/spin_wait.py): waking a sleeping
    # thread costs more than a local broker's answer on a small VM. 0: always sleep.
    sync_call_spin_us: int = 1_000
    # Native door without CURVE keys: the client speaks ZeroMQ's wire protocol (ZMTP) on its own TCP
    # sockets (zmtp_calls.py) instead of through libzmq, whose I/O thread costs a thread wake-up each
    # way (perf/RESULTS.md, "The native door as a user meets it"). False: through libzmq.
    native_direct: bool = True
    # Latency fault tolerance (SPEC §2; RocketMQ's sendLatencyFaultEnable, off by default): a broker
    # whose send took >= send_latency_max_ms[i] is avoided for send_not_available_duration_ms[i]; a
    # failed send counts as send_isolation_latency_ms (client/fault_tolerance.py).
    send_latency_fault_enabled: bool = False
    send_latency_max_ms: tuple[int, ...] = (50, 100, 550, 1_000, 2_000, 3_000, 15_000)
    send_not_available_duration_ms: tuple[int, ...] = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
    send_isolation_latency_ms: int = 30_000
    compress_body_threshold_bytes: int = 4 * 1024
    message_size_bytes_max: int = 4 * MIB
    client_heartbeat_interval_ms: int = 30_000
    pull_batch_count: int = 32
    pull_suspend_ms: int = 15_000
    # Read from slave: after a pull from a master fails (time-out, lost connection), that broker
    # name's queues are pulled from a slave, and commits go there, for this long (then the master
    # is tried again). A pull answer's suggestWhichBrokerId picks the broker of the next pull.
    slave_fallback_ms: int = 10_000
    # Push consumers' flow control per queue (RocketMQ's pullThresholdForQueue, 1000 messages, and
    # pullThresholdSizeForQueue, 100 MiB of bodies): over either, the queue's pulls wait until
    # consumption drains it.
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_bytes: int = 100 * MIB
    # Where broadcasting consumers keep their offsets (RocketMQ's rocketmq.client.localOffsetStoreDir,
    # ~/.rocketmq_offsets): <dir>/<client>/<group>/offsets.json (client/offset_store.py).
    local_offset_store_dir: str = "~/.rocketbox_offsets"
    consumer_offset_commit_interval_ms: int = 5_000
    rebalance_interval_ms: int = 20_000
    # Orderly consumers renew their queue locks this often, and stop consuming a queue whose
    # lock was last confirmed longer ago than the max live time (RocketMQ's ProcessQueue
    # rocketmq.client.rebalance.lockInterval 20 s and lockMaxLiveTime 30 s).
    rebalance_lock_interval_ms: int = 20_000
    rebalance_lock_max_live_ms: int = 30_000
    instance_name: str = "DEFAULT"
    # Which door: "native" (ZeroMQ) or "remoting" (RocketMQ's; namesrv_endpoints are then e.g. 127.0.0.1:9876).
    transport: str = "native"
    # Access control: the native door's CURVE keys (acl/curve.py; z85 text; empty: the process's, if
    # any; for_account), the remoting door's account, which signs every request (AclClientRPCHook).
    curve_server_key: str = ""
    curve_public_key: str = ""
    curve_secret_key: str = ""
    access_key: str = ""
    secret_key: str = ""
    # TLS to remoting doors (RocketMQ's tls.enable): the server's certificate is checked against
    # tls_trust_cert_path (a CA or the certificate itself; empty: the system's), or not (tls_verify_server).
    tls_enable: bool = False
    tls_trust_cert_path: str = ""
    tls_verify_server: bool = True

    @classmethod
    def for_account(cls, account: str, acl_file: str | None = None, **fields) -> "ClientConfig":
        """A native client acting as ``account`` (its CURVE keys: account_keys.py), ``fields`` set too."""
        return cls(**account_curve_fields(account, acl_file), **fields)

    def validate(self) -> None:
        if self.transport not in CLIENT_TRANSPORTS:
            raise ValueError(f"transport must be one of {CLIENT_TRANSPORTS}, not {self.transport!r}")
        if not self.namesrv_endpoints:
            raise ValueError("at least one NameServer endpoint is needed")
        curve = (self.curve_server_key, self.curve_public_key, self.curve_secret_key)
        if any(curve) and not all(len(key) == 40 for key in curve):
            raise ValueError("curve_server_key, curve_public_key and curve_secret_key go together: 40 z85 "
                             "characters each")
        if self.request_timeout_ms <= 0 or (self.send_timeout_ms is not None and self.send_timeout_ms <= 0):
            raise ValueError("request_timeout_ms and send_timeout_ms must be positive")
        if self.sync_call_spin_us < 0:
            raise ValueError("sync_call_spin_us must be >= 0")
        if self.send_busy_backoff_ms < 0 or self.send_busy_backoff_max_ms < 0 or self.async_sends_max <= 0:
            raise ValueError("send_busy_backoff_ms and send_busy_backoff_max_ms must be >= 0, "
                             "async_sends_max positive")
        if self.pull_threshold_for_queue <= 0 or self.pull_threshold_size_for_queue_bytes <= 0:
            raise ValueError("pull_threshold_for_queue and pull_threshold_size_for_queue_bytes must be positive")
        problem = latency_table_problem(self.send_latency_max_ms, self.send_not_available_duration_ms,
                                        self.send_isolation_latency_ms)
        if problem:
            raise ValueError(problem)


def to_json(cfg) -> str:
    """Config as JSON, the form the supervisor hands to a child process."""
    return json.dumps(dataclasses.asdict(cfg), sort_keys=True)


def broker_config_from_json(text: str) -> BrokerConfig:
    raw = json.loads(text)
    raw["store"] = StoreConfig(**raw["store"])
    raw["namesrv_endpoints"] = tuple(raw.get("namesrv_endpoints", ()))
    return BrokerConfig(**raw)


def namesrv_config_from_json(text: str) -> NamesrvConfig:
    raw = json.loads(text)
    raw["controller_peers"] = tuple(raw.get("controller_peers", ()))
    return NamesrvConfig(**raw)
