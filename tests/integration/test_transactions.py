"""Transactional messages across real processes: commit, rollback, check-back (also after a
broker restart), discard after the maximum checks, and a half write that is not durable."""

from __future__ import annotations

import signal
import threading

import pytest

from rocketbox.cluster import Admin, Message, MessageInvalid, Producer, PullConsumer
from rocketbox.cluster.client.selectors import hash_selector
from rocketbox.cluster.client.transaction import LocalTransactionState as State, TransactionProducer
from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config

QUICK_CHECKS = {"transaction_check_interval_ms": 200, "transaction_timeout_ms": 300}


class Listener:
    def __init__(self, execute: State, check: State = State.COMMIT_MESSAGE):
        self.execute, self.check = execute, check
        self.executed, self.checked = [], []
        self.lock = threading.Lock()

    def execute_local_transaction(self, message, arg):
        with self.lock:
            self.executed.append(message.properties["UNIQ_KEY"])
        return self.execute

    def check_local_transaction(self, message):
        with self.lock:
            self.checked.append(message.msg_id)
        return self.check


@pytest.fixture(params=["native", "remoting"])
def transport(request):
    """The door the clients use: the check-back (CHECK_TRANSACTION_STATE) comes over the
    producer's own connection through either."""
    return request.param


def _setup(start_cluster, transport="native", **kwargs):
    cluster = start_cluster(**kwargs)
    cfg = client_config(cluster, transport=transport)
    with Admin(config=cfg) as admin:
        admin.create_topic("Orders", 1)
    return cluster, cfg


def _bodies(cfg) -> list[bytes]:
    with PullConsumer("TxCheck", config=cfg) as consumer:
        return [m.body for m in read_topic(consumer, "Orders")]


def _outcomes(cfg) -> dict:
    """The broker's transaction counters: committed, rolledBack, discarded, checksSent."""
    with Admin(config=cfg) as admin:
        endpoint = next(iter(admin.master_endpoints().values()))
        return admin.broker_runtime_info(endpoint)["transactions"]


def test_commit_is_delivered_and_rollback_never(start_cluster, transport):
    cluster, cfg = _setup(start_cluster, transport)
    committing, rolling_back = Listener(State.COMMIT_MESSAGE), Listener(State.ROLLBACK_MESSAGE)
    with TransactionProducer("TxGroupA", committing, config=cfg) as a, \
            TransactionProducer("TxGroupB", rolling_back, config=cfg) as b:
        rolled = b.send_message_in_transaction(Message("Orders", b"rolled back"))
        kept = a.send_message_in_transaction(Message("Orders", b"committed", keys="order-1"))
    assert rolled.local_state == State.ROLLBACK_MESSAGE and kept.local_state == State.COMMIT_MESSAGE
    wait_until(lambda: _bodies(cfg) == [b"committed"], 10, what="the committed message")
    wait_until(lambda: _outcomes(cfg)["rolledBack"] == 1, 10, what="the rollback recorded")
    assert _bodies(cfg) == [b"committed"]   # the rolled-back half never shows
    with PullConsumer("TxCheck2", config=cfg) as consumer:
        delivered = read_topic(consumer, "Orders")[0]
    assert delivered.msg_id == kept.send_result.msg_id and delivered.keys == ["order-1"]


def test_unknown_outcome_is_checked_back_and_committed(start_cluster, transport):
    cluster, cfg = _setup(start_cluster, transport, broker_overrides=QUICK_CHECKS)
    listener = Listener(State.UNKNOW, check=State.COMMIT_MESSAGE)
    with TransactionProducer("TxUnknown", listener, config=cfg) as producer:
        sent = producer.send_message_in_transaction(Message("Orders", b"decided later"))
        wait_until(lambda: _bodies(cfg) == [b"decided later"], 20, what="commit through the check-back")
    assert sent.send_result.msg_id in listener.checked


def test_check_back_survives_a_broker_restart(start_cluster, transport):
    cluster, cfg = _setup(start_cluster, transport, broker_overrides=QUICK_CHECKS)
    listener = Listener(State.UNKNOW, check=State.COMMIT_MESSAGE)
    with TransactionProducer("TxRestart", listener, config=cfg) as producer:
        producer.send_message_in_transaction(Message("Orders", b"open across a restart"))
        old = cluster.kill("broker-a", signal.SIGKILL)
        cluster.await_running("broker-a", not_pid=old)
        cluster.await_all_running()
        wait_until(lambda: _bodies(cfg) == [b"open across a restart"], 40, what="commit after the restart")


def test_half_left_open_is_discarded_after_the_maximum_checks(start_cluster):
    cluster, cfg = _setup(start_cluster, broker_overrides=dict(QUICK_CHECKS, transaction_check_max=2))
    listener = Listener(State.UNKNOW, check=State.UNKNOW)
    with TransactionProducer("TxNever", listener, config=cfg) as producer:
        sent = producer.send_message_in_transaction(Message("Orders", b"never decided"))
        wait_until(lambda: _outcomes(cfg)["discarded"] == 1, 30, what="the half discarded")
    assert listener.checked == [sent.send_result.msg_id] * 2
    assert _bodies(cfg) == []


def test_half_write_not_flushed_in_time_is_rolled_back_without_running(start_cluster):
    cluster, cfg = _setup(start_cluster, flush_mode=SYNC_FLUSH, store_overrides={"flush_sync_timeout_ms": 2000})
    listener = Listener(State.COMMIT_MESSAGE)
    with TransactionProducer("TxSlowDisk", listener, config=cfg) as producer:
        producer.send_message_in_transaction(Message("Orders", b"warm-up"))   # routes and heartbeat in place
        cluster.kill("broker-a-flush", signal.SIGSTOP)
        try:
            result = producer.send_message_in_transaction(Message("Orders", b"not durable"))
        finally:
            cluster.kill("broker-a-flush", signal.SIGCONT)
    assert result.send_result.status.name == "FLUSH_DISK_TIMEOUT"
    assert result.local_state == State.ROLLBACK_MESSAGE
    assert len(listener.executed) == 1   # only the warm-up ran its local transaction
    wait_until(lambda: _outcomes(cfg) == {"committed": 1, "rolledBack": 1, "discarded": 0, "checksSent": 0}, 10,
               what="both outcomes recorded")
    # The commit's record is readable once flushed and dispatched (sync flush: consumers read flushed records).
    wait_until(lambda: _bodies(cfg) == [b"warm-up"], 10, what="the warm-up alone readable")


def test_a_message_is_one_type_only(start_cluster):
    cluster, cfg = _setup(start_cluster)
    with TransactionProducer("TxTypes", Listener(State.COMMIT_MESSAGE), config=cfg) as producer:
        with pytest.raises(MessageInvalid):
            producer.send_message_in_transaction(Message("Orders", b"x").set_delay_level(2))
    with Producer("OrderedTypes", config=cfg) as ordered:
        with pytest.raises(MessageInvalid, match="ordered message"):
            ordered.send(Message("Orders", b"z", keys="k").set_delay_level(1), selector=hash_selector, arg="k")
    with Producer("RawTypes", config=cfg) as raw:
        both = Message("Orders", b"y", properties={"TRAN_MSG": "true", "PGROUP": "RawTypes", "DELAY": "2"})
        with pytest.raises(BrokerError, match="not both"):
            raw.send(both)
