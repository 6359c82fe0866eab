"""SIGKILL a broker process during a sync-flush load: every acknowledged message survives.

The producer keeps sending while the process dies and the supervisor restarts it
(the broker main takes its workers with it and recovers the store; a worker
restarts alone). Afterwards every message answered SEND_OK is read back.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from rocketbox.cluster import Admin, ClientError, Message, Producer, PullConsumer, SendStatus
from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config

TOPIC = "Durable"


class LoadThread(threading.Thread):
    def __init__(self, cfg):
        super().__init__(daemon=True)
        self.cfg = cfg
        self.acked: dict[str, bytes] = {}
        self.failures = 0
        self.stop = threading.Event()

    def run(self):
        with Producer("LoadPG", config=self.cfg) as producer:
            i = 0
            while not self.stop.is_set() and i < 200_000:
                i += 1
                batch = [Message(TOPIC, f"m-{i}-{j}".encode()) for j in range(10)]
                try:
                    result = producer.send_batch(batch, timeout_ms=3000)
                except ClientError:
                    self.failures += 1
                    time.sleep(0.01)
                    continue
                if result.status == SendStatus.SEND_OK:
                    for m in batch:
                        self.acked[m.properties["UNIQ_KEY"]] = m.body


def _read_all(cfg) -> dict[str, bytes]:
    with PullConsumer("Verify", config=cfg) as consumer:
        return {m.msg_id: m.body for m in read_topic(consumer, TOPIC)}


@pytest.mark.parametrize("victim, kills", [("broker-a", 1), ("broker-a-flush", 1), ("broker-a-reput", 1),
                                           ("broker-a", 5)])
def test_sigkill_during_sync_flush_load_loses_no_acknowledged_message(start_cluster, victim, kills):
    cluster = start_cluster(flush_mode=SYNC_FLUSH)
    cfg = client_config(cluster, request_timeout_ms=3000)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 4)
    load = LoadThread(cfg)
    load.start()
    try:
        for kill in range(kills):
            acked_before = len(load.acked)
            wait_until(lambda: len(load.acked) >= acked_before + 2000, 60,
                       what=f"2000 more acknowledged before kill {kill + 1}")
            old_pid = cluster.kill(victim, signal.SIGKILL)
            cluster.await_running(victim, not_pid=old_pid)
            cluster.await_all_running()
        acked_at_restart = len(load.acked)
        wait_until(lambda: len(load.acked) >= acked_at_restart + 2000, 60,
                   what="2000 more acknowledged after the restart")
    finally:
        load.stop.set()
        load.join(30)
    acked = dict(load.acked)
    got = wait_until(lambda: (lambda g: g if all(k in g for k in acked) else None)(_read_all(cfg)), 30,
                     what="every acknowledged message readable")
    lost = [k for k in acked if k not in got]
    assert not lost, f"{len(lost)} acknowledged messages lost of {len(acked)}"
    assert all(got[k] == body for k, body in acked.items())
    assert cluster.child(victim)["restarts"] >= kills
