"""A topic deleted and at once re-created starts empty and keeps every new message."""

from __future__ import annotations

from rocketbox.cluster import Admin, Message, NoRouteError, Producer, PullConsumer
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config


def _bodies(consumer, topic):
    return sorted(m.body for m in read_topic(consumer, topic, 256))


def test_delete_then_recreate_at_once(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin, Producer("PG", config=cfg) as producer, PullConsumer("CG", config=cfg) as consumer:
        for round_ in range(3):
            admin.create_topic("Again", 2)
            expected = sorted(f"r{round_}-{i}".encode() for i in range(200))
            producer.routes.get("Again", refresh=True)
            for start in range(0, 200, 50):
                producer.send_batch([Message("Again", body) for body in expected[start:start + 50]])
            consumer.routes.get("Again", refresh=True)
            wait_until(lambda: _bodies(consumer, "Again") == expected, 10,
                       what=f"round {round_}: exactly this round's messages")
            admin.delete_topic("Again")
            try:
                admin.route("Again")
                raise AssertionError("the deleted topic still has a route")
            except NoRouteError:
                pass
