"""RocketMQ 5's SyncStateSet in controller mode (broker/sync_state.py), with real processes.

A sync master whose slave is gone keeps answering SEND_OK once the SyncStateSet has shrunk to
itself (after a failover at once: the new master's set is itself alone), takes the slave back once
it catches up, and with ``min_in_sync_replicas`` 2 refuses, unstored, what it cannot replicate.
"""

from __future__ import annotations

import signal
import time

import pytest

from rocketbox.cluster import Message, Producer, SendStatus
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.config import SYNC_MASTER
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.testing import broker_runtime_info, store_host_prefix, wait_until
from tests.conftest import client_config

TOPIC = "SyncSet"
GROUP = "broker-a"
DEADLINE_S = 30.0


def _cluster(start_cluster, **overrides):
    broker = {"broker_role": SYNC_MASTER, "sync_replication_timeout_ms": 1000,
              "ha_max_time_slave_not_catchup_ms": 2000, **overrides}
    cluster = start_cluster(slaves=1, failover=True, broker_overrides=broker)
    admin = Admin(config=client_config(cluster))
    admin.create_topic(TOPIC, 2)
    master = cluster.await_group_serving(GROUP, admin, 60)
    slave = next(name for name in cluster.replica_configs(GROUP) if name != master)
    return cluster, admin, master, slave


def _replica_id(cluster, child: str) -> int:
    return cluster.replica_configs(GROUP)[child].broker_id + 1


def _sync_set(admin) -> list[int]:
    return admin.controller_group(GROUP)["syncStateSet"]


def _producer(cluster, name: str) -> Producer:
    return Producer(name, config=client_config(cluster, request_timeout_ms=3000, send_timeout_ms=3000,
                                               send_retry_count=0))


def test_after_a_failover_the_lone_new_master_answers_send_ok(start_cluster):
    cluster, admin, old, new = _cluster(start_cluster)
    with _producer(cluster, "SyncSetFo") as producer:
        assert producer.send(Message(TOPIC, b"before")).status == SendStatus.SEND_OK
        cluster.kill(old, signal.SIGSTOP)   # stays stopped: its replica is not there to copy anything
        try:
            wait_until(lambda: cluster.master_child(GROUP, admin) == new, DEADLINE_S, interval_s=0.1,
                       what="the slave elected")
            assert _sync_set(admin) == [_replica_id(cluster, new)]
            prefix = store_host_prefix(cluster.replica_configs(GROUP)[new])

            def on_new_master():
                try:
                    result = producer.send(Message(TOPIC, b"during"))
                except Exception:
                    return None   # the client has not followed the route yet
                return result if result.offset_msg_id.startswith(prefix) else None
            first = wait_until(on_new_master, DEADLINE_S, interval_s=0.1, what="a send stored by the new master")
            # RocketMQ 5: the SyncStateSet is the new master alone, so an all-ack write needs nobody else
            # (before: SLAVE_NOT_AVAILABLE on every send until the old master was back and in sync).
            assert first.status == SendStatus.SEND_OK
            statuses = {producer.send(Message(TOPIC, f"after-{i}".encode())).status for i in range(10)}
            assert statuses == {SendStatus.SEND_OK}
        finally:
            cluster.kill(old, signal.SIGCONT)
    # The old master rejoins as a slave, catches up and is taken back into the set.
    wait_until(lambda: sorted(_sync_set(admin)) == sorted([_replica_id(cluster, old), _replica_id(cluster, new)]),
               DEADLINE_S, interval_s=0.2, what="the old master back in the SyncStateSet")
    admin.shutdown()


def test_a_stopped_slave_leaves_the_sync_state_set_and_the_master_keeps_writing(start_cluster):
    cluster, admin, master, slave = _cluster(start_cluster)
    master_id, slave_id = _replica_id(cluster, master), _replica_id(cluster, slave)
    wait_until(lambda: sorted(_sync_set(admin)) == [master_id, slave_id], DEADLINE_S, interval_s=0.1,
               what="both replicas in sync")
    with _producer(cluster, "SyncSetShrink") as producer:
        assert producer.send(Message(TOPIC, b"both")).status == SendStatus.SEND_OK
        cluster.kill(slave, signal.SIGSTOP)
        try:
            stopped_at = time.monotonic()
            wait_until(lambda: _sync_set(admin) == [master_id], DEADLINE_S, interval_s=0.1,
                       what="the SyncStateSet shrunk to the master")
            shrunk_s = time.monotonic() - stopped_at
            # ha_max_time_slave_not_catchup_ms (2 s) of not catching up, not the 20 s slave expiry.
            assert shrunk_s < 10, shrunk_s
            statuses = {producer.send(Message(TOPIC, f"alone-{i}".encode())).status for i in range(10)}
            assert statuses == {SendStatus.SEND_OK}
        finally:
            cluster.kill(slave, signal.SIGCONT)
        wait_until(lambda: sorted(_sync_set(admin)) == [master_id, slave_id], DEADLINE_S, interval_s=0.1,
                   what="the slave back in the SyncStateSet")
        assert producer.send(Message(TOPIC, b"both-again")).status == SendStatus.SEND_OK
    admin.shutdown()


def test_min_in_sync_replicas_refuses_unstored_what_the_set_cannot_hold(start_cluster):
    cluster, admin, master, slave = _cluster(start_cluster, min_in_sync_replicas=2)
    master_id = _replica_id(cluster, master)
    wait_until(lambda: len(_sync_set(admin)) == 2, DEADLINE_S, interval_s=0.1, what="both replicas in sync")
    address = cluster.replica_configs(GROUP)[master].address

    def masters_view(expected: list[int]) -> bool:
        # Both sets as the master holds them: its own and the controller's it last heard (which is
        # [master] alone from the election until the master's next heartbeat is answered).
        ha = (broker_runtime_info(address) or {}).get("ha", {})
        return sorted(ha.get("syncStateSet") or ()) == expected and \
            sorted(ha.get("controllerSyncStateSet") or ()) == expected

    wait_until(lambda: masters_view(sorted([master_id, _replica_id(cluster, slave)])), DEADLINE_S, interval_s=0.1,
               what="the master counting both replicas, as the controller does")
    with _producer(cluster, "SyncSetMin") as producer:
        assert producer.send(Message(TOPIC, b"both")).status == SendStatus.SEND_OK
        cluster.kill(slave, signal.SIGSTOP)
        try:
            # Until the master has heard the controller take the change it still counts two.
            wait_until(lambda: masters_view([master_id]), DEADLINE_S, interval_s=0.1,
                       what="the master told the set shrunk")
            end_before = broker_runtime_info(address)["writePos"]
            with pytest.raises(BrokerError) as refused:
                producer.send(Message(TOPIC, b"refused"))
            assert refused.value.code == ResponseCode.SYSTEM_ERROR
            assert "in-sync replicas not enough" in refused.value.remark
            end_after = broker_runtime_info(address)["writePos"]
            assert end_after == end_before   # refused before it was stored, as RocketMQ 5 does
        finally:
            cluster.kill(slave, signal.SIGCONT)
    admin.shutdown()
