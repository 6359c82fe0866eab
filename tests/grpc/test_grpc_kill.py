"""SIGKILL the proxy, then the broker, while RocketMQ 5's SimpleConsumer works through a topic.

The proxy holds no pop state (checkpoints and acks are records in the broker's revive log), so a
proxy restarted by the supervisor serves the receipt handles the old one gave out; the broker
rebuilds its pop state from the log. Afterwards every message was acked (or its ack was on its way
when a process died: the client cannot know whether that one was written), and no message was
delivered again after its ack was answered OK. Messages received but not acked when a process
died come back after their invisible time (attempt + 1): the stated rule.
"""

from __future__ import annotations

import signal

import pytest

from rocketbox.cluster import Admin, Message, Producer
from tests.conftest import client_config
from tests.grpc.grpc_client import GrpcClient

TOPIC = "GrpcKill"
MESSAGES = 600


def _progress(lines: list[dict]) -> tuple[set, set, list]:
    """(ids acked OK, ids whose ack failed, violations: deliveries after an OK ack), in line order."""
    acked, failed, violations = set(), set(), []
    for line in lines:
        if "received" in line and line["received"]["message_id"] in acked:
            violations.append(line["received"])
        elif line.get("acked"):
            acked.add(line["acked"])
        elif "acked" in line:
            failed.add(line["message_id"])
    return acked, failed, violations


@pytest.mark.timeout(300)
def test_sigkill_of_proxy_and_broker_during_a_grpc_pop_load(start_cluster, tmp_path):
    cluster = start_cluster(proxy=True)
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 4)
    with Producer("GrpcKillPG", config=cfg) as producer:
        ids = {producer.send(Message(TOPIC, f"k-{i}".encode())).msg_id for i in range(MESSAGES)}
    consumer = GrpcClient("simple", {"endpoint": cluster.proxy_endpoint, "group": "GrpcKillCG", "topic": TOPIC,
                                     "expect": 100 * MESSAGES, "max_s": 240, "invisible_s": 3, "batch": 8,
                                     "await_s": 1, "request_timeout_s": 2}, tmp_path / "consumer")
    try:
        for victim, share in (("proxy", 3), ("broker-a", 3 / 2)):
            consumer.wait_for(lambda ls: len(_progress(ls)[0]) >= MESSAGES / share, 120,
                              f"{MESSAGES / share:.0f} acked before the {victim} is killed")
            old_pid = cluster.kill(victim, signal.SIGKILL)
            cluster.await_running(victim, not_pid=old_pid)
        consumer.wait_for(lambda ls: ids <= (lambda p: p[0] | p[1])(_progress(ls)), 150, "every message acked")
    finally:
        consumer.kill()
    acked, failed, violations = _progress(consumer.snapshot())
    assert not violations, f"{len(violations)} deliveries after an OK ack, e.g. {violations[:2]}"
    assert ids <= acked | failed
    assert cluster.child("proxy")["restarts"] >= 1 and cluster.child("broker-a")["restarts"] >= 1
    deliveries = sum(1 for line in consumer.snapshot() if "received" in line)
    print(f"{MESSAGES} messages: {deliveries} deliveries, {len(failed - acked)} acks unanswered")
