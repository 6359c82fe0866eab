"""A steady 2,000 sync sends a second through the remoting door (RocketMQ's Java client saw
35-385 of 36,000 refused SYSTEM_BUSY [TIMEOUT_CLEAN_QUEUE] on a loaded machine; Apache none): every
send stored and no broker answer SYSTEM_BUSY. Counts answers, not times: a slow machine sends fewer
a second, never fails the test by it. The Java client's own run is tests/java (SteadyLoad)."""

from __future__ import annotations

import threading
import time

import pytest

from rocketbox.cluster import Admin, Message, Producer
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(180)

RATE = 2000
SECONDS = 10
SENDERS = 4


def test_a_steady_2000_sends_a_second_are_never_refused(start_cluster):
    cluster = start_cluster()
    remoting = client_config(cluster, transport="remoting")
    with Admin(config=remoting) as admin:
        admin.create_topic("Steady", 4)
    failures: list[str] = []
    with Producer("SteadyPG", config=remoting) as producer:
        producer.send(Message("Steady", b"warm-up"))
        start = time.monotonic()
        per_sender = RATE * SECONDS // SENDERS
        interval = SENDERS / RATE

        def sender(index: int) -> None:
            for i in range(per_sender):
                delay = start + index * interval / SENDERS + i * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                try:
                    producer.send(Message("Steady", b"x" * 1024))
                except Exception as exc:   # counted, not raised: the test reports them all
                    failures.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=sender, args=(n,)) for n in range(SENDERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        busy = producer.statistics()["busy_answers"]
    assert not failures, failures[:5]
    assert busy == 0, f"{busy} SYSTEM_BUSY answers"
