"""On a SYNC_MASTER every write a client is answered for waits for a slave, not only a send
(broker/durability.py, RocketMQ's handleDiskFlushAndHA): a CONSUMER_SEND_MSG_BACK and an
END_TRANSACTION answer SUCCESS once the slave holds their records, FLUSH_SLAVE_TIMEOUT (12) when it
does not answer, SLAVE_NOT_AVAILABLE (11) with no slave in sync. Real processes; the slave is
stopped with SIGSTOP."""

from __future__ import annotations

import os
import signal

from rocketbox.cluster import Admin
from rocketbox.cluster.config import SYNC_MASTER
from rocketbox.cluster.message.ids import parse_offset_msg_id
from rocketbox.cluster.message.properties import properties_text
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient
from tests.conftest import client_config
from tests.fault.test_replication import runtime_info

TOPIC = "SyncWrites"
REPLICA_TIMEOUT_MS = 1500
SLAVE_PROCESSES = ("broker-a-s1", "broker-a-s1-flush", "broker-a-s1-reput")


def _send(client: RpcClient, master: str, body: bytes, half: bool = False,
          expect: int = ResponseCode.SUCCESS) -> Command:
    """A send whose answer is ``expect``; its fields (msgId, queueOffset) name the stored record."""
    props = [("UNIQ_KEY", body.hex().upper()), ("PGROUP", "SyncPG")] + ([("TRAN_MSG", "true")] if half else [])
    answer = client.call(master, Command(RequestCode.SEND_MESSAGE, {
        "producerGroup": "SyncPG", "topic": TOPIC, "defaultTopic": "TBW102", "defaultTopicQueueNums": "1",
        "queueId": "0", "sysFlag": "4" if half else "0", "bornTimestamp": "0", "flag": "0",
        "properties": properties_text(props)}, body))
    assert answer.code == expect, answer.remark
    return answer


def _send_back(client: RpcClient, master: str, sent: Command) -> Command:
    return client.call(master, Command(RequestCode.CONSUMER_SEND_MSG_BACK, {
        "group": "SyncCG", "offset": str(parse_offset_msg_id(sent.fields["msgId"])[2]), "delayLevel": "0",
        "originTopic": TOPIC, "maxReconsumeTimes": "16"}), 10_000)


def _end(client: RpcClient, master: str, half: Command, body: bytes) -> Command:
    return client.call(master, Command(RequestCode.END_TRANSACTION, {
        "producerGroup": "SyncPG", "tranStateTableOffset": half.fields["queueOffset"],
        "commitLogOffset": str(parse_offset_msg_id(half.fields["msgId"])[2]), "commitOrRollback": "8",
        "fromTransactionCheck": "false", "msgId": body.hex().upper()}), 10_000)


def test_send_back_and_end_transaction_wait_for_the_slave(start_cluster):
    cluster = start_cluster(slaves=1, broker_overrides={"broker_role": SYNC_MASTER,
                                                        "sync_replication_timeout_ms": REPLICA_TIMEOUT_MS,
                                                        "ha_slave_expiry_ms": 60_000})
    with Admin(config=client_config(cluster)) as admin:
        admin.create_topic(TOPIC, 1)
    master = cluster.topology.brokers[0].address
    wait_until(lambda: runtime_info(master)["ha"]["inSync"], 10, what="slave in sync")
    client = RpcClient(default_timeout_ms=10_000)
    endpoint = f"tcp://{master}"
    try:
        plain, halves = _send(client, endpoint, b"plain-0"), [_send(client, endpoint, f"half-{i}".encode(), True)
                                                              for i in range(2)]
        # While the slave runs: SUCCESS, and by then it holds every byte the master wrote.
        assert _send_back(client, endpoint, plain).code == ResponseCode.SUCCESS
        assert _end(client, endpoint, halves[0], b"half-0").code == ResponseCode.SUCCESS
        info = runtime_info(master)
        assert info["confirmPos"] == info["writePos"]

        # A slave that does not answer: each waits its time-out, then FLUSH_SLAVE_TIMEOUT.
        for name in SLAVE_PROCESSES:
            os.kill(cluster.pid(name), signal.SIGSTOP)
        try:
            back = _send_back(client, endpoint, plain)
            assert (back.code, back.remark) == (ResponseCode.FLUSH_SLAVE_TIMEOUT,
                                                f"no slave confirmed it within {REPLICA_TIMEOUT_MS} ms")
            ended = _end(client, endpoint, halves[1], b"half-1")
            assert ended.code == ResponseCode.FLUSH_SLAVE_TIMEOUT, ended.remark
        finally:
            for name in SLAVE_PROCESSES:
                os.kill(cluster.pid(name), signal.SIGCONT)
        # The records stay written (as a send's under FLUSH_SLAVE_TIMEOUT): the slave gets them later.
        wait_until(lambda: (i := runtime_info(master))["confirmPos"] == i["writePos"], 20, interval_s=0.1,
                   what="the slave caught up")
        assert runtime_info(master)["transactions"]["committed"] == 2
    finally:
        client.close()


def test_without_a_slave_send_back_and_end_transaction_answer_slave_not_available(start_cluster):
    cluster = start_cluster(broker_overrides={"broker_role": SYNC_MASTER})
    with Admin(config=client_config(cluster)) as admin:
        admin.create_topic(TOPIC, 1)
    endpoint = f"tcp://{cluster.topology.brokers[0].address}"
    client = RpcClient(default_timeout_ms=10_000)
    try:
        plain = _send(client, endpoint, b"plain-0", expect=ResponseCode.SLAVE_NOT_AVAILABLE)
        half = _send(client, endpoint, b"half-0", True, expect=ResponseCode.SLAVE_NOT_AVAILABLE)
        assert _send_back(client, endpoint, plain).code == ResponseCode.SLAVE_NOT_AVAILABLE
        assert _end(client, endpoint, half, b"half-0").code == ResponseCode.SLAVE_NOT_AVAILABLE
    finally:
        client.close()
