"""Broker snapshots and the supervisor's run state as Prometheus metric families, in RocketMQ 5's
names, units and labels (BrokerMetricsConstant, DefaultStoreMetricsConstant,
RemotingMetricsConstant; ``../shared/OPERATIONS.md`` §1.6), so its dashboards and alert rules read
them unchanged. Pure: dicts in, families out.

Every broker family carries RocketMQ's ``cluster``, ``node_type`` ("broker") and ``node_id`` (the
broker name, as RocketMQ labels it), plus ``broker_id``: RocketMQ exports from each broker, so
Prometheus's ``instance`` tells a master from its slave; here one endpoint serves them all.
Families RocketMQ has no name for are ``rocketbox_*``: whether a broker answered, each process's
restarts, liveness, CPU and memory, and each worker's heartbeat age. Access control's refusals
(``rocketbox_acl_refusals_total``) are counted by brokers and NameServers alike: a NameServer's
rows carry ``node_type`` "namesrv", its name as ``node_id`` and an empty ``broker_id``.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from rocketbox.cluster.broker.meters import MESSAGE_SIZE_BUCKETS_BYTES, RPC_LATENCY_BUCKETS_MS
from rocketbox.cluster.protocol import RETRY_TOPIC_PREFIX
from rocketbox.cluster.message.system_topics import is_system_topic

BROKER_LABELS = ("cluster", "node_type", "node_id", "broker_id")
LAG_LABELS = ("consumer_group", "topic", "is_retry", "is_system")
STORAGE_LABELS = ("storage_type", "storage_medium")
PROCESS_LABELS = ("cluster", "process", "role", "group")

_SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"


def is_system(topic: str, group: str = "") -> str:
    """RocketMQ's ``is_system`` label: a system topic (message/system_topics.py) or MixAll's system group prefix."""
    return "true" if is_system_topic(topic) or group.lower().startswith(_SYSTEM_GROUP_PREFIX) else "false"


def _flag(value: bool) -> str:
    return "true" if value else "false"


def _cumulative(counts, bounds) -> list[tuple[str, float]]:
    """Per-bucket counts (one per bound, then overflow) as Prometheus's cumulative ``le`` buckets."""
    buckets, total = [], 0
    for bound, count in zip([*bounds, float("inf")], counts):
        total += count
        buckets.append((floatToGoString(bound), total))
    return buckets


class _Families:
    """The families of one scrape, filled broker by broker."""

    def __init__(self):
        def counter(name, doc, labels):
            return CounterMetricFamily(name, doc, labels=[*BROKER_LABELS, *labels])

        def gauge(name, doc, labels=(), unit=""):
            return GaugeMetricFamily(name, doc, labels=[*BROKER_LABELS, *labels], unit=unit)

        in_labels = ("topic", "message_type", "is_system")
        out_labels = ("topic", "consumer_group", "is_system")
        self.up = gauge("rocketbox_broker_up", "1 when the broker answered this scrape", ("address",))
        self.messages_in = counter("rocketmq_messages_in", "Total number of incoming messages", in_labels)
        self.throughput_in = counter("rocketmq_throughput_in", "Total traffic of incoming messages", in_labels)
        self.message_size = HistogramMetricFamily("rocketmq_message_size", "Incoming messages size",
                                                  labels=[*BROKER_LABELS, *in_labels])
        self.messages_out = counter("rocketmq_messages_out", "Total number of outgoing messages", out_labels)
        self.throughput_out = counter("rocketmq_throughput_out", "Total traffic of outgoing messages", out_labels)
        self.producers = gauge("rocketmq_producer_connections", "Producer connections",
                               ("language", "version", "protocol_type"))
        self.consumers = gauge("rocketmq_consumer_connections", "Consumer connections",
                               ("consumer_group", "language", "version", "consume_mode", "protocol_type", "is_system"))
        self.lag = gauge("rocketmq_consumer_lag_messages", "Consumer lag messages", LAG_LABELS)
        self.lag_latency = gauge("rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)", LAG_LABELS)
        self.inflight = gauge("rocketmq_consumer_inflight_messages", "Consumer inflight messages", LAG_LABELS)
        self.ready = gauge("rocketmq_consumer_ready_messages", "Consumer ready messages", LAG_LABELS)
        self.dlq = counter("rocketmq_send_to_dlq_messages", "Consumer send to DLQ messages",
                           ("consumer_group", "topic", "is_system"))
        self.commits = counter("rocketmq_commit_messages", "Total number of commit messages", ("topic",))
        self.rollbacks = counter("rocketmq_rollback_messages", "Total number of rollback messages", ("topic",))
        self.half = gauge("rocketmq_half_messages", "Half messages of all topics", ("topic",))
        self.storage_size = gauge("rocketmq_storage_size", "Broker storage size (bytes in use on its disk)",
                                  STORAGE_LABELS)
        self.flush_behind = gauge("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes", STORAGE_LABELS)
        self.dispatch_behind = gauge("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes",
                                     STORAGE_LABELS)
        self.topics = gauge("rocketmq_topic_number", "Active topic number")
        self.groups = gauge("rocketmq_consumer_group_number", "Active subscription group number")
        self.rpc_latency = HistogramMetricFamily(
            "rocketmq_rpc_latency", "Rpc latency (milliseconds)",
            labels=[*BROKER_LABELS, "protocol_type", "request_code", "response_code", "is_long_polling"])
        self.heartbeat_age = gauge("rocketbox_heartbeat_age_seconds",
                                   "Seconds since each process of the broker group last beat its heartbeat "
                                   "in the control block", ("process_role",))
        self.acl_refusals = counter("rocketbox_acl_refusals", "Requests refused by access control (answered "
                                    "NO_PERMISSION) by each broker and NameServer (node_type), per door and kind "
                                    "(authentication or authorization)", ("door", "kind"))
        self.namesrv_up = GaugeMetricFamily("rocketbox_namesrv_up", "1 when the NameServer answered this scrape",
                                            labels=[*BROKER_LABELS, "address"])

    def all(self) -> list:
        return [value for value in vars(self).values()]

    def add_broker(self, snap: dict) -> None:
        base = [snap["cluster"], "broker", snap["brokerName"], str(snap["brokerId"])]
        self.up.add_metric([*base, snap["address"]], 1)
        for row in snap["messagesIn"]:
            labels = [*base, row["topic"], row["messageType"], is_system(row["topic"])]
            self.messages_in.add_metric(labels, row["messages"])
            self.throughput_in.add_metric(labels, row["bytes"])
            self.message_size.add_metric(labels, _cumulative(row["sizeBuckets"], MESSAGE_SIZE_BUCKETS_BYTES),
                                         row["sizeSum"])
        for row in snap["messagesOut"]:
            labels = [*base, row["topic"], row["group"], is_system(row["topic"], row["group"])]
            self.messages_out.add_metric(labels, row["messages"])
            self.throughput_out.add_metric(labels, row["bytes"])
        for row in snap["producers"]:
            self.producers.add_metric([*base, row["language"], str(row["version"]), row["protocol"]],
                                      row["connections"])
        for row in snap["consumers"]:
            self.consumers.add_metric([*base, row["group"], row["language"], str(row["version"]), row["consumeMode"],
                                       row["protocol"], is_system("", row["group"])], row["connections"])
        for row in snap["lag"]:
            labels = [*base, row["group"], row["topic"], _flag(row["topic"].startswith(RETRY_TOPIC_PREFIX)),
                      is_system(row["topic"], row["group"])]
            self.lag.add_metric(labels, row["lag"])
            self.lag_latency.add_metric(labels, row["lagLatencyMs"])
            self.inflight.add_metric(labels, row["inflight"])
            self.ready.add_metric(labels, row["ready"])
        for row in snap["sentToDlq"]:
            self.dlq.add_metric([*base, row["group"], row["topic"], is_system(row["topic"], row["group"])],
                                row["messages"])
        for family, rows in ((self.commits, snap["commits"]), (self.rollbacks, snap["rollbacks"]),
                             (self.half, snap["halfMessages"])):
            for row in rows:
                family.add_metric([*base, row["topic"]], row["messages"])
        store = snap["store"]
        storage = [*base, "local", "disk"]   # RocketMQ's DEFAULT_STORAGE_TYPE and DEFAULT_STORAGE_MEDIUM
        self.storage_size.add_metric(storage, store["diskUsedBytes"])
        self.flush_behind.add_metric(storage, max(store["writePos"] - store["flushedPos"], 0))
        self.dispatch_behind.add_metric(storage, max(store["writePos"] - store["dispatchedPos"], 0))
        self.topics.add_metric(base, snap["topics"])
        self.groups.add_metric(base, snap["consumerGroups"])
        for row in snap["rpcLatency"]:
            labels = [*base, row["protocol"], row["requestCode"], row["responseCode"], _flag(row["longPolling"])]
            self.rpc_latency.add_metric(labels, _cumulative(row["buckets"], RPC_LATENCY_BUCKETS_MS), row["sumMs"])
        for row in snap.get("aclRefusals", ()):
            self.acl_refusals.add_metric([*base, row["door"], row["kind"]], row["count"])
        for role, beat_ms in snap["heartbeatsMs"].items():
            if beat_ms:   # 0: that process has not beaten yet
                self.heartbeat_age.add_metric([*base, role], max(snap["nowMs"] - beat_ms, 0) / 1000)


    def add_namesrv(self, cluster: str, target, snap: dict) -> None:
        base = [cluster, "namesrv", target.name, ""]
        for row in snap["aclRefusals"]:
            self.acl_refusals.add_metric([*base, row["door"], row["kind"]], row["count"])
        self.namesrv_up.add_metric([*base, target.address], 1)


def broker_families(answers: list[tuple], unanswered: list[tuple], cluster: str,
                    namesrv_answers: list[tuple] = (), namesrv_unanswered: list[tuple] = ()) -> list:
    """Families of every broker that answered (``answers``: (BrokerTarget, snapshot)), and
    ``rocketbox_broker_up`` 0 for each of ``unanswered`` ((BrokerTarget, reason)); the same for
    NameServers (NamesrvTarget, GET_NAMESRV_METRICS's snapshot). A snapshot that does not read as
    one counts as unanswered."""
    families = _Families()
    namesrvs_down = list(namesrv_unanswered)
    for target, snap in namesrv_answers:
        try:
            families.add_namesrv(cluster, target, snap)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            namesrvs_down.append((target, f"malformed snapshot: {exc}"))
    for target, _reason in namesrvs_down:
        families.namesrv_up.add_metric([cluster, "namesrv", target.name, "", target.address], 0)
    down = list(unanswered)
    for target, snap in answers:
        try:
            families.add_broker(snap)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            down.append((target, f"malformed snapshot: {exc}"))
    for target, _reason in down:
        families.up.add_metric([cluster, "broker", target.name, str(target.broker_id), target.address], 0)
    return families.all()


def process_families(state: dict | None, cluster: str, usage: dict[int, tuple[float, int]]) -> list:
    """Per supervised process (cluster.json): restarts, whether it runs, and its CPU seconds and
    resident bytes (``usage``: pid -> (cpu seconds, rss bytes), for the pids that could be read)."""
    restarts = CounterMetricFamily("rocketbox_process_restarts", "Times the supervisor restarted this process",
                                   labels=PROCESS_LABELS)
    up = GaugeMetricFamily("rocketbox_process_up", "1 while the supervisor reports the process running",
                           labels=PROCESS_LABELS)
    cpu = CounterMetricFamily("rocketbox_process_cpu_seconds", "User and system CPU time of the process",
                              labels=PROCESS_LABELS)
    memory = GaugeMetricFamily("rocketbox_process_resident_memory_bytes", "Resident memory of the process",
                               labels=PROCESS_LABELS)
    for child in (state or {}).get("children", []):
        labels = [cluster, str(child.get("name", "")), str(child.get("role", "")), str(child.get("group", ""))]
        restarts.add_metric(labels, child.get("restarts") or 0)
        up.add_metric(labels, 1 if child.get("state") == "running" else 0)
        if child.get("pid") in usage:
            cpu_s, rss = usage[child["pid"]]
            cpu.add_metric(labels, cpu_s)
            memory.add_metric(labels, rss)
    return [restarts, up, cpu, memory]
