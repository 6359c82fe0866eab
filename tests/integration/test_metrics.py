"""The Prometheus endpoint of a running cluster, read as Prometheus reads it:
scraped over HTTP and parsed with prometheus-client's text parser. Its numbers must move with the
traffic, the lag and the processes' lives."""

from __future__ import annotations

import signal
import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from rocketbox.cluster import ConsumeStatus, Message, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.client.transaction import LocalTransactionState, TransactionProducer
from rocketbox.cluster.metrics.exporter import MetricsExporter
from rocketbox.cluster.metrics.settings import BrokerTarget, ExporterSettings
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.cluster.topology import free_ports
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(240)

TOPIC = "MetricsTopic"
GROUP = "MetricsGroup"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(str(tmp_path_factory.mktemp("metrics")), brokers=2) as started:
        yield started


def scrape(url: str) -> list:
    """Every sample of the endpoint, parsed by Prometheus's own text parser."""
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def total(samples: list, name: str, **labels) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (across brokers and queues)."""
    return sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())


def labelled(samples: list, name: str, **labels) -> list:
    return [s for s in samples if s.name == name and labels.items() <= s.labels.items()]


def await_value(url: str, name: str, expected: float, at_least: bool = False, **labels) -> list:
    """Scrape until ``name`` (summed over ``labels``) reads ``expected`` (or more); the last scrape."""
    last: list = []

    def reached():
        last[:] = scrape(url)
        value = total(last, name, **labels)
        return value >= expected if at_least else value == expected
    try:
        wait_until(reached, 30, interval_s=0.2, what=f"{name}{labels} == {expected}")
    except TimeoutError:
        raise AssertionError(f"{name}{labels} is {total(last, name, **labels)}, not {expected}") from None
    return last


def test_traffic_and_lag_move_the_numbers(cluster):
    cfg = client_config(cluster)
    url = cluster.metrics_url
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 2)   # 2 queues on each of the 2 brokers
    with Producer("MetricsPG", config=cfg) as producer:
        for i in range(20):
            producer.send(Message(TOPIC, b"x" * 200))
        samples = scrape(url)
        # Counted before the answer goes: no wait needed.
        assert total(samples, "rocketmq_messages_in_total", topic=TOPIC, message_type="normal") == 20
        assert total(samples, "rocketmq_throughput_in_total", topic=TOPIC) > 20 * 200
        assert total(samples, "rocketmq_message_size_count", topic=TOPIC) == 20
        assert total(samples, "rocketmq_message_size_bucket", topic=TOPIC, le="1024.0") == 20
        sends = total(samples, "rocketmq_rpc_latency_count", request_code="send_message_v2", response_code="success")
        assert sends >= 20
        for broker in ("broker-a", "broker-b"):   # every broker, its workers' cursors
            for name in ("rocketmq_storage_flush_behind_bytes", "rocketmq_storage_dispatch_behind_bytes",
                         "rocketmq_storage_size"):
                assert len(labelled(samples, name, node_id=broker, node_type="broker")) == 1, (name, broker)
            assert {s.labels["process_role"] for s in labelled(samples, "rocketbox_heartbeat_age_seconds",
                                                               node_id=broker)} == {"broker", "flush", "reput",
                                                                                    "allocate"}

        with PullConsumer(GROUP, config=cfg) as consumer:
            queues = consumer.queues(TOPIC)
            for mq in queues:
                consumer.commit_offset(mq, 0)   # the group starts at the beginning: 20 behind
            lag = {"consumer_group": GROUP, "topic": TOPIC}
            samples = await_value(url, "rocketmq_consumer_lag_messages", 20, **lag)
            assert total(samples, "rocketmq_consumer_inflight_messages", **lag) == 0
            assert total(samples, "rocketmq_consumer_ready_messages", **lag) == 20
            assert total(samples, "rocketmq_consumer_lag_latency", **lag) > 0

            ends = {mq: consumer.pull(mq, 0, 64).next_begin_offset for mq in queues}
            samples = scrape(url)
            assert total(samples, "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == 20
            assert total(samples, "rocketmq_throughput_out_total", topic=TOPIC, consumer_group=GROUP) > 20 * 200
            # Pulled, not yet committed: in flight, still lag.
            assert total(samples, "rocketmq_consumer_inflight_messages", **lag) == 20
            assert total(samples, "rocketmq_consumer_lag_messages", **lag) == 20
            for mq, end in ends.items():
                consumer.commit_offset(mq, end)
            samples = scrape(url)
            assert total(samples, "rocketmq_consumer_lag_messages", **lag) == 0
            assert total(samples, "rocketmq_consumer_inflight_messages", **lag) == 0

            for i in range(7):   # the group falls behind again...
                producer.send(Message(TOPIC, b"y"))
            await_value(url, "rocketmq_consumer_lag_messages", 7, **lag)
            for mq in queues:    # ...and catches up
                result = consumer.pull(mq, ends[mq], 64)
                consumer.commit_offset(mq, result.next_begin_offset)
            await_value(url, "rocketmq_consumer_lag_messages", 0, **lag)
            assert total(scrape(url), "rocketmq_messages_out_total", topic=TOPIC, consumer_group=GROUP) == 27


class _Outcomes:
    """Commits, rolls back or leaves open (UNKNOW, also when checked) by the message's body."""

    def execute_local_transaction(self, message, arg):
        return {b"commit": LocalTransactionState.COMMIT_MESSAGE,
                b"rollback": LocalTransactionState.ROLLBACK_MESSAGE}.get(message.body, LocalTransactionState.UNKNOW)

    def check_local_transaction(self, message):
        return LocalTransactionState.UNKNOW


def test_transactions_and_dead_letters_are_counted(cluster):
    cfg = client_config(cluster)
    url = cluster.metrics_url
    topic = "MetricsTx"
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, 1)
    with TransactionProducer("MetricsTxPG", _Outcomes(), config=cfg) as producer:
        for body in (b"commit", b"commit", b"rollback", b"open"):
            producer.send_message_in_transaction(Message(topic, body))
        samples = await_value(url, "rocketmq_commit_messages_total", 2, topic=topic)
        assert total(samples, "rocketmq_rollback_messages_total", topic=topic) == 1
        assert total(samples, "rocketmq_half_messages", topic=topic) == 1
        assert total(samples, "rocketmq_messages_in_total", topic=topic, message_type="transaction") == 4
        # A transaction producer heartbeats (the broker asks it about open halves): a connection.
        assert total(samples, "rocketmq_producer_connections", language="python", protocol_type="zeromq") >= 1

    # Messages whose consumer always fails go to the group's dead-letter topic at once
    # (max_reconsume_times 0): RocketMQ's send-to-DLQ counter, by group and original topic.
    poisoned = "MetricsPoison"
    with Admin(config=cfg) as admin:
        admin.create_topic(poisoned, 1)
    with Producer("MetricsDlqPG", config=cfg) as producer:
        for _ in range(3):
            producer.send(Message(poisoned, b"poison"))
    with PushConsumer("MetricsDlqGroup", config=cfg, max_reconsume_times=0) as consumer:
        consumer.subscribe(poisoned, "*")
        consumer.register_listener(lambda messages: ConsumeStatus.RECONSUME_LATER)
        consumer.start()
        await_value(url, "rocketmq_send_to_dlq_messages_total", 3, consumer_group="MetricsDlqGroup", topic=poisoned)
        connections = labelled(scrape(url), "rocketmq_consumer_connections", consumer_group="MetricsDlqGroup",
                               consume_mode="push")
        assert sorted((s.labels["node_id"], s.value) for s in connections) == [("broker-a", 1), ("broker-b", 1)]


def test_a_broker_that_does_not_answer_is_reported_down_and_the_rest_still_are(cluster):
    """An exporter told of a broker that is not there: that broker is up 0 and the scrape still
    has every other broker's numbers, within the request time-out."""
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    live = [b.address for b in cluster.topology.brokers]
    settings = ExporterSettings(host="127.0.0.1", port=free_ports(1)[0], cluster_name="DefaultCluster",
                                brokers=(*(BrokerTarget(address, "live", 0) for address in live),
                                         BrokerTarget(dead, "broker-gone", 0)),
                                state_path=f"{cluster.data_dir}/cluster.json", request_timeout_ms=500)
    exporter = MetricsExporter(settings)
    try:
        samples = scrape(exporter.start())
    finally:
        exporter.close()
    assert total(samples, "rocketbox_broker_up", address=dead, node_id="broker-gone") == 0
    assert all(total(samples, "rocketbox_broker_up", address=address) == 1 for address in live)
    assert len(labelled(samples, "rocketmq_storage_dispatch_behind_bytes")) == len(live)


def test_the_endpoint_survives_bad_input(cluster):
    host, port = cluster.metrics_url.split("//")[1].split("/")[0].split(":")
    for junk in (b"\x00\xff" * 64 + b"\r\n\r\n", b"GET /metrics HTTP/9.9\r\nHost: \xff\r\n\r\n",
                 b"POST /metrics HTTP/1.1\r\nContent-Length: 99999999\r\n\r\nabc", b"GET " + b"/a" * 40_000):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            try:   # the server may answer 400/414 and close before all of it is sent: that is fine
                sock.sendall(junk)
                sock.shutdown(socket.SHUT_WR)
                sock.recv(4096)
            except OSError:
                pass
    assert labelled(scrape(cluster.metrics_url), "rocketbox_broker_up")
    assert cluster.child("web")["restarts"] == 0


def test_restarts_grow_when_a_process_is_killed(cluster):
    """Numbers from every process of a group: the supervisor's restarts of a SIGKILLed worker, and
    the exporter itself killed and back."""
    url = cluster.metrics_url
    before = total(scrape(url), "rocketbox_process_restarts_total", process="broker-a-reput")
    pid = cluster.kill("broker-a-reput", signal.SIGKILL)
    cluster.await_running("broker-a-reput", not_pid=pid)
    samples = await_value(url, "rocketbox_process_restarts_total", before + 1, process="broker-a-reput")
    assert total(samples, "rocketbox_process_up", process="broker-a-reput") == 1
    assert total(samples, "rocketbox_process_cpu_seconds_total", process="broker-a") > 0
    assert total(samples, "rocketbox_process_resident_memory_bytes", process="broker-a-flush") > 0

    pid = cluster.kill("web", signal.SIGKILL)
    cluster.await_running("web", not_pid=pid)
    await_value(url, "rocketbox_process_restarts_total", 1, process="web")
