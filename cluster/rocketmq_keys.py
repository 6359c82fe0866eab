"""RocketMQ's names for RocketBox's broker settings (its broker.conf keys, what mqadmin
getBrokerConfig prints). Pure: a table and two conversions, no I/O.

Each entry is ``(RocketMQ key, field path in BrokerConfig, unit factor)``; a value is written as
Java's Properties holds it (booleans ``true``/``false``, numbers in decimal). RocketMQ's key and
ours mean the same thing; where RocketMQ counts in other units the factor converts (its
``mappedFileSizeConsumeQueue`` is bytes, ours entries of 20 bytes).
"""

from __future__ import annotations

from rocketbox.cluster.config import BrokerConfig

CONSUMEQUEUE_ENTRY_BYTES = 20

BROKER_KEYS: tuple[tuple[str, str, int], ...] = (
    ("brokerClusterName", "cluster_name", 1),
    ("brokerName", "broker_name", 1),
    ("brokerId", "broker_id", 1),
    ("brokerIP1", "host", 1),
    ("brokerRole", "broker_role", 1),
    ("storePathRootDir", "store.store_dir", 1),
    ("flushDiskType", "store.flush_mode", 1),
    ("flushIntervalCommitLog", "store.flush_interval_ms", 1),
    ("syncFlushTimeout", "store.flush_sync_timeout_ms", 1),
    ("mappedFileSizeCommitLog", "store.commitlog_file_size_bytes", 1),
    ("mappedFileSizeConsumeQueue", "store.consumequeue_entries_per_file", CONSUMEQUEUE_ENTRY_BYTES),
    ("maxHashSlotNum", "store.index_slot_count", 1),
    ("maxIndexNum", "store.index_entry_count_max", 1),
    ("maxMessageSize", "store.message_size_bytes_max", 1),
    ("messageDelayLevel", "store.message_delay_levels", 1),
    ("fileReservedTime", "store.file_reserved_time_ms", -3_600_000),
    ("deleteWhen", "store.delete_when", 1),
    ("diskMaxUsedSpaceRatio", "store.disk_max_used_space_ratio", 1),
    ("cleanResourceInterval", "store.clean_resource_interval_ms", 1),
    ("deleteFileBatchMax", "store.delete_file_batch_max", 1),
    ("deleteCommitLogFilesInterval", "store.delete_commitlog_files_interval_ms", 1),
    ("enabledAppendPropCRC", "store.record_crc_enabled", 1),
    ("autoCreateTopicEnable", "auto_create_topic_enabled", 1),
    ("autoCreateSubscriptionGroup", "auto_create_subscription_group", 1),
    ("defaultTopicQueueNums", "topic_queue_count_default", 1),
    ("enablePropertyFilter", "enable_property_filter", 1),
    ("slaveReadEnable", "slave_read_enabled", 1),
    ("recallMessageEnable", "recall_message_enabled", 1),
    ("transactionTimeOut", "transaction_timeout_ms", 1),
    ("transactionCheckMax", "transaction_check_max", 1),
    ("transactionCheckInterval", "transaction_check_interval_ms", 1),
    ("enableControllerMode", "controller_mode", 1),
    ("haMaxTimeSlaveNotCatchup", "ha_max_time_slave_not_catchup_ms", 1),
    ("registerNameServerPeriod", "register_interval_ms", 1),
    ("serverChannelMaxIdleTimeSeconds", "remoting_idle_timeout_ms", -1000),
    ("metricsExporterType", "metrics_exporter_type", 1),
    ("metricsPromExporterHost", "metrics_prom_exporter_host", 1),
    ("metricsPromExporterPort", "metrics_prom_exporter_port", 1),
    ("aclEnable", "acl_enable", 1),
    ("authenticationEnabled", "authentication_enabled", 1),
    ("authorizationEnabled", "authorization_enabled", 1),
    ("authConfigPath", "auth_config_path", 1),
    ("initAuthenticationUser", "init_authentication_user", 1),
    ("innerClientAuthenticationCredentials", "inner_client_authentication_credentials", 1),
    ("migrateAuthFromV1Enabled", "migrate_auth_from_v1_enabled", 1),
    # TlsSystemConfig's keys (RocketMQ reads them as -D properties or from tls.properties).
    ("tls.server.mode", "tls_server_mode", 1),
    ("tls.server.certPath", "tls_server_cert_path", 1),
    ("tls.server.keyPath", "tls_server_key_path", 1),
    ("brokerFastFailureEnable", "broker_fast_failure_enabled", 1),
    ("waitTimeMillsInSendQueue", "wait_time_ms_in_send_queue", 1),
    ("waitTimeMillsInPullQueue", "wait_time_ms_in_pull_queue", 1),
    ("waitTimeMillsInAckQueue", "wait_time_ms_in_ack_queue", 1),
    ("waitTimeMillsInHeartbeatQueue", "wait_time_ms_in_heartbeat_queue", 1),
    ("waitTimeMillsInTransactionQueue", "wait_time_ms_in_transaction_queue", 1),
    ("waitTimeMillsInAdminBrokerQueue", "wait_time_ms_in_admin_queue", 1),
    ("osPageCacheBusyTimeOutMills", "os_page_cache_busy_timeout_ms", 1),
    ("sendThreadPoolQueueCapacity", "send_queue_capacity", 1),
)


def _field(cfg, path: str):
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def java_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def broker_properties(cfg: BrokerConfig) -> dict[str, str]:
    """The broker's settings under RocketMQ's keys, plus the derived ones (its ports, NameServers)."""
    props = {}
    for key, path, factor in BROKER_KEYS:
        value = _field(cfg, path)
        if not isinstance(value, (bool, str)):
            value = value * factor if factor > 0 else value // -factor
        props[key] = java_value(value)
    props["listenPort"] = str(cfg.remoting_port or cfg.port)
    props["haListenPort"] = str(cfg.ha_port or cfg.port + 1)
    props["namesrvAddr"] = ";".join(e[len("tcp://"):] if e.startswith("tcp://") else e
                                    for e in cfg.namesrv_endpoints)
    props["longPollingEnable"] = "true"
    return props


def properties_text(props: dict[str, str]) -> str:
    """Java's ``key=value`` lines (MixAll.properties2String), keys sorted."""
    return "".join(f"{key}={value}\n" for key, value in sorted(props.items()))


def parse_properties(text: str) -> dict[str, str]:
    """Java properties text (``key=value`` or ``key: value`` lines, ``#`` and ``!`` comments) as a dict."""
    props = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line, "") if cut < 0 else (line[:cut], line[cut + 1:])
        props[key.strip()] = value.strip()
    return props
