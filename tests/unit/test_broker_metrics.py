"""GET_BROKER_METRICS and its families, in one process: a broker service fed real requests, its
snapshot turned into Prometheus text by the exporter's families and read back with Prometheus's
own parser (the same path the endpoint takes, minus the processes and HTTP)."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rocketbox.cluster.broker.meters import InTraffic, RpcLatency
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.metrics.families import broker_families, process_families
from rocketbox.cluster.metrics.settings import BrokerTarget
from rocketbox.cluster.protocol import MessageQueue, RequestCode, ResponseCode
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.message.sysflags import SYSFLAG_TRANSACTION_PREPARED
from rocketbox.cluster.wire_format import Command
from tests.in_process import InProcessBroker

TOPIC = "Metered"


def _send(broker: InProcessBroker, body: bytes, sys_flag: int = 0, **properties: str) -> Command:
    return broker.send(TOPIC, body, queue_count=1, sys_flag=sys_flag, **properties)


def _commit(half: Command, body: bytes) -> Command:
    """The END_TRANSACTION a producer of group PG sends to commit the half ``half`` answered."""
    return Command(RequestCode.END_TRANSACTION, {
        "producerGroup": "PG", "tranStateTableOffset": half.fields["queueOffset"],
        "commitLogOffset": str(parse_offset_msg_id(half.fields["msgId"])[2]), "commitOrRollback": "8",
        "msgId": body.hex()})


def _scrape(*families) -> dict:
    """The families as the endpoint writes them, parsed back: {(sample name, labels): value}."""
    class Fixed:
        def collect(self):
            return families
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Fixed())
    text = generate_latest(registry).decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def _value(samples: dict, name: str, **labels) -> float:
    matching = [v for (n, ls), v in samples.items() if n == name and labels.items() <= dict(ls).items()]
    assert len(matching) == 1, (name, labels, matching)
    return matching[0]


def test_a_snapshot_counts_traffic_lag_transactions_and_latency(tmp_path):
    in_process = InProcessBroker(tmp_path / "store")
    cfg = in_process.cfg
    try:
        for body in (b"a" * 100, b"b" * 100):
            assert _send(in_process, body).code == ResponseCode.SUCCESS
        assert _send(in_process, b"later", DELAY="3").code == ResponseCode.SUCCESS
        half = _send(in_process, b"half", sys_flag=SYSFLAG_TRANSACTION_PREPARED, TRAN_MSG="true", PGROUP="PG")
        assert half.code == ResponseCode.SUCCESS
        in_process.dispatch()
        mq = MessageQueue(TOPIC, cfg.broker_name, 0)
        pulled = in_process.call_command(broker_api.pull_request("CG", mq, 0, 32, "*", 0))
        assert pulled.code == ResponseCode.SUCCESS and pulled.fields["nextBeginOffset"] == "2"
        commit = Command(RequestCode.UPDATE_CONSUMER_OFFSET,
                         {"consumerGroup": "CG", "topic": TOPIC, "queueId": "0", "commitOffset": "1"})
        assert in_process.call_command(commit).code == ResponseCode.SUCCESS

        snapshot = json.loads(in_process.call_command(Command(RequestCode.GET_BROKER_METRICS)).body)
        rows = {(r["topic"], r["messageType"]): r for r in snapshot["messagesIn"]}
        assert rows[(TOPIC, "normal")]["messages"] == 2 and rows[(TOPIC, "delay")]["messages"] == 1
        assert rows[(TOPIC, "transaction")]["messages"] == 1
        assert rows[(TOPIC, "normal")]["bytes"] > 200   # the stored records: bodies plus headers
        assert snapshot["halfMessages"] == [{"topic": TOPIC, "messages": 1}]
        [lag] = [r for r in snapshot["lag"] if r["group"] == "CG"]
        assert (lag["lag"], lag["inflight"], lag["ready"]) == (1, 1, 0)
        assert lag["lagLatencyMs"] >= 0

        assert in_process.call_command(_commit(half, b"half")).code == ResponseCode.SUCCESS
        in_process.dispatch()
        snapshot = json.loads(in_process.call_command(Command(RequestCode.GET_BROKER_METRICS)).body)
        assert snapshot["commits"] == [{"topic": TOPIC, "messages": 1}] and snapshot["halfMessages"] == []

        answered = BrokerTarget(cfg.address, cfg.broker_name, 0)
        samples = _scrape(*broker_families([(answered, snapshot), (answered._replace(broker_id=1), {"brokerId": 1})],
                                           [(BrokerTarget("127.0.0.1:1", "broker-b", 0), "refused")],
                                           cfg.cluster_name))
        broker = {"cluster": cfg.cluster_name, "node_type": "broker", "node_id": cfg.broker_name, "broker_id": "0"}
        assert _value(samples, "rocketmq_messages_in_total", topic=TOPIC, message_type="normal", **broker) == 2
        assert _value(samples, "rocketmq_messages_out_total", topic=TOPIC, consumer_group="CG") == 2
        assert _value(samples, "rocketmq_consumer_lag_messages", consumer_group="CG", topic=TOPIC,
                      is_retry="false") == 2   # the commit put one more message in the queue
        assert _value(samples, "rocketmq_commit_messages_total", topic=TOPIC) == 1
        # Two 100-byte bodies: each put's record is over 100 bytes and under 1 KiB.
        assert _value(samples, "rocketmq_message_size_bucket", topic=TOPIC, message_type="normal", le="1024.0") == 2
        assert _value(samples, "rocketmq_message_size_bucket", topic=TOPIC, message_type="normal", le="+Inf") == 2
        assert _value(samples, "rocketmq_rpc_latency_count", request_code="send_message", response_code="success",
                      protocol_type="zeromq") == 4
        assert _value(samples, "rocketmq_storage_dispatch_behind_bytes", **broker) >= 0
        assert _value(samples, "rocketbox_broker_up", **broker) == 1
        assert _value(samples, "rocketbox_broker_up", address="127.0.0.1:1", node_id="broker-b") == 0
        assert _value(samples, "rocketbox_broker_up", node_id=cfg.broker_name, broker_id="1") == 0   # malformed
    finally:
        in_process.close()


def test_message_sizes_fall_in_rocketmq_buckets():
    traffic = InTraffic()
    traffic.add("T", "normal", 1, 1024)              # le 1 KiB (inclusive)
    traffic.add("T", "normal", 10, 10 * 5000)        # mean 5000: le 512 KiB
    traffic.add("T", "normal", 1, 5 * 1024 * 1024)   # over 4 MiB: overflow
    [row] = traffic.snapshot()
    assert row["sizeBuckets"] == [1, 0, 1, 0, 0, 0, 1] and row["messages"] == 12


def test_a_handler_that_answers_later_is_timed_when_it_answers():
    latency = RpcLatency()
    parked = []
    handlers = latency.timed({RequestCode.PULL_MESSAGE: lambda request, reply: parked.append(reply)})
    answers = []
    handlers[RequestCode.PULL_MESSAGE](Command(RequestCode.PULL_MESSAGE), answers.append)
    assert latency.snapshot() == [] and answers == []
    parked[0](Command(ResponseCode.PULL_NOT_FOUND))
    parked[0](Command(ResponseCode.SUCCESS))   # a second answer goes nowhere and counts nothing
    [row] = latency.snapshot()
    assert (row["requestCode"], row["responseCode"], row["longPolling"], row["count"]) == \
        ("pull_message", "pull_not_found", True, 1)
    assert len(answers) == 1


def test_processes_report_restarts_and_state_from_the_run_state():
    state = {"children": [{"name": "broker-a-reput", "role": "reput", "group": "broker-a", "pid": 7,
                           "state": "running", "restarts": 2},
                          {"name": "broker-a-flush", "role": "flush", "group": "broker-a", "pid": None,
                           "state": "backoff", "restarts": 1}]}
    samples = _scrape(*process_families(state, "C", {7: (1.5, 4096)}))
    assert _value(samples, "rocketbox_process_restarts_total", process="broker-a-reput") == 2
    assert _value(samples, "rocketbox_process_up", process="broker-a-flush") == 0
    assert _value(samples, "rocketbox_process_cpu_seconds_total", process="broker-a-reput") == 1.5
    assert _scrape(*process_families(None, "C", {})) == {}


def test_open_halves_are_counted_again_after_a_restart(tmp_path):
    """The half count is memory; a restarted broker rebuilds it from the half queue (what the check
    walk has not passed), without the halves resolved before the restart."""
    broker = InProcessBroker(tmp_path / "store")
    try:
        halves = [_send(broker, body, sys_flag=SYSFLAG_TRANSACTION_PREPARED, TRAN_MSG="true", PGROUP="PG")
                  for body in (b"stays open", b"committed")]
        broker.dispatch()
        assert broker.call_command(_commit(halves[1], b"committed")).code == ResponseCode.SUCCESS
        assert broker.service.transactions.open_halves_by_topic() == {TOPIC: 1}
        broker.reboot()
        assert broker.service.transactions.open_halves_by_topic() == {TOPIC: 1}
    finally:
        broker.close()
