"""The broker tells a group's members when one joins or leaves; they rebalance at once,
long before their periodic rebalance (set here to a minute) would."""

from __future__ import annotations

from rocketbox.cluster import Admin, PushConsumer
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config


def test_members_rebalance_on_notify_not_on_the_timer(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster, rebalance_interval_ms=60_000, client_heartbeat_interval_ms=60_000)
    with Admin(config=cfg) as admin:
        admin.create_topic("Notify", 4)
    first = PushConsumer("NG", config=cfg)
    first.subscribe("Notify")
    first.register_listener(lambda messages: None)
    first.start()
    second = PushConsumer("NG", config=cfg)
    second.subscribe("Notify")
    second.register_listener(lambda messages: None)
    try:
        assert len(first.assigned_queues()) == 4
        second.start()
        wait_until(lambda: len(first.assigned_queues()) == 2 and len(second.assigned_queues()) == 2, 10,
                   what="both members holding two queues after the join notification")
        assert first.assigned_queues().isdisjoint(second.assigned_queues())
        second.shutdown()
        wait_until(lambda: len(first.assigned_queues()) == 4, 10, what="the remaining member taking every queue")
    finally:
        first.shutdown()
        if not second._closed:
            second.shutdown()
