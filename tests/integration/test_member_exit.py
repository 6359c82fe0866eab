"""A consumer whose process ends leaves its group at once: on a plain exit without
``shutdown()`` its atexit hook unregisters it, and on SIGKILL the broker sees its connection
close and drops it, instead of keeping a dead member for ``client_expiry_ms`` (2 minutes)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, Message, Producer, PushConsumer
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config

MEMBER = """
import sys, time
from rocketbox.cluster import ConsumeStatus, PushConsumer
consumed = []
consumer = PushConsumer("Leavers", namesrv=sys.argv[1])
consumer.subscribe("Exits", "*")
consumer.register_listener(lambda messages: consumed.extend(messages) or ConsumeStatus.CONSUME_SUCCESS)
consumer.start()
deadline = time.monotonic() + 60
while (len(consumer.assigned_queues()) < 4 or len(consumed) < 20) and time.monotonic() < deadline:
    time.sleep(0.05)
print("assigned", len(consumer.assigned_queues()), "consumed", len(consumed), flush=True)
if sys.argv[2] == "stay":
    time.sleep(600)
# "exit": the script ends without shutdown(), as the README's first example once did
"""


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_a_member_whose_process_ended_leaves_its_group_promptly(start_cluster, ending):
    # The broker's own expiry is far beyond the waits below: only the prompt paths can pass.
    cluster = start_cluster(broker_overrides={"client_expiry_ms": 120_000})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin, Producer("ExitsProducer", config=cfg) as producer:
        admin.create_topic("Exits", 4)
        producer.send_batch([Message("Exits", b"m%d" % i) for i in range(20)])
        member = subprocess.Popen([sys.executable, "-c", MEMBER, cluster.namesrv,
                                   "exit" if ending == "exit" else "stay"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert member.stdout.readline().split() == ["assigned", "4", "consumed", "20"]
            wait_until(lambda: len(admin.consumer_ids("Exits", "Leavers")) == 1, 30, what="the member registered")
            if ending == "sigkill":
                member.send_signal(signal.SIGKILL)
            member.wait(60)
        finally:
            member.kill()
            member.wait()
        wait_until(lambda: admin.consumer_ids("Exits", "Leavers") == [], 15, what="the ended member dropped")
        if ending == "exit":
            # Its shutdown at exit committed what it consumed (commits are otherwise every 5 s).
            assert [row["lag"] for row in admin.queue_offsets("Exits", "Leavers")] == [0, 0, 0, 0]
    # The next member of the group gets every queue, not 1 of 4 beside a ghost.
    with PushConsumer("Leavers", config=cfg) as successor:
        successor.subscribe("Exits", "*")
        successor.register_listener(lambda messages: ConsumeStatus.CONSUME_SUCCESS)
        successor.start()
        wait_until(lambda: len(successor.assigned_queues()) == 4, 15, what="the successor owns all 4 queues")
