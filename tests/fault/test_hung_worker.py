"""A hung process (SIGSTOP: alive, silent) is killed by the supervisor's heartbeat watchdog
and restarted; the broker keeps every acknowledged message."""

from __future__ import annotations

import signal

import pytest

from rocketbox.cluster import Admin, Message, Producer, PullConsumer
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config


@pytest.mark.parametrize("victim", ["broker-a-reput", "broker-a"])
def test_a_hung_process_is_restarted(start_cluster, victim):
    cluster = start_cluster(heartbeat_timeout_s=1.5)
    cfg = client_config(cluster, request_timeout_ms=2000)
    with Admin(config=cfg) as admin:
        admin.create_topic("Hung", 2)
    sent = []
    with Producer("PG", config=cfg) as producer:
        for i in range(20):
            sent.append(producer.send(Message("Hung", b"before-%d" % i)).msg_id)
        old_pid = cluster.kill(victim, signal.SIGSTOP)
        new_pid = cluster.await_running(victim, not_pid=old_pid, timeout_s=30)
        assert new_pid != old_pid
        assert "SIGKILL" in (cluster.child(victim)["last_exit"] or "")
        cluster.await_all_running()
        for i in range(20):
            sent.append(producer.send(Message("Hung", b"after-%d" % i)).msg_id)
    with PullConsumer("CG", config=cfg) as consumer:
        wait_until(lambda: {m.msg_id for m in read_topic(consumer, "Hung")} >= set(sent), 20,
                   what="every acknowledged message readable after the restart")
