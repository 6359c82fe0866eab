"""Multi-master through real processes: two broker groups, each a master and a slave,
one topic with queues on both. A producer with latency fault tolerance sends continuously and a
PushConsumer consumes while one whole group (master, slave and their workers) is lost: SIGKILLed
and kept down, or SIGSTOPped (hung: its TCP connections stay open, nothing answers).

Keeping a killed group down: the supervisor is SIGSTOPped first, so it reaps and restarts nothing
until SIGCONT (the surviving group's processes run on; the watchdog is off meanwhile, which these
few seconds do not need). Then the group comes back and nothing acknowledged is missing.

Proved here: every send begun after the loss is answered SEND_OK within the send time-out from the
surviving group's queues; the producer's fault table avoids the lost group, after which no attempt
goes there and no send pays a time-out; the consumer keeps consuming the surviving group's queues;
once the group returns every acknowledged message is readable and consumed.
(With ``send_latency_fault_enabled`` off, the retry still answers every send, but a send on every
round-robin pass to the lost group pays one attempt time-out: the steering assertions fail.)
"""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from rocketbox.cluster import Admin, ConsumeStatus, Message, Producer, PullConsumer, PushConsumer, SendStatus
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config

TOPIC = "MultiMaster"
GROUP = "MultiMasterReaders"
LOST, SURVIVOR = "broker-b", "broker-a"
REQUEST_TIMEOUT_MS = 1000
SEND_TIMEOUT_MS = 10_000
# RocketMQ's table, but a failed broker avoided for 60 s: the whole loss lies inside one avoidance.
DURATIONS_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 60_000)


def _group_children(cluster, broker: str) -> list[tuple[str, int]]:
    """(name, pid) of every process of ``broker``'s master and slave groups."""
    return [(c["name"], c["pid"]) for c in cluster.state()["children"]
            if (c["name"] == broker or c["name"].startswith(broker + "-")) and c["pid"]]


class Sender(threading.Thread):
    """Sends one message at a time until stopped; keeps (started, ended, SendResult or error) each."""

    def __init__(self, producer: Producer):
        super().__init__(name="multi-master-sender", daemon=True)
        self.producer = producer
        self.stop = threading.Event()
        self.outcomes: list[tuple[float, float, object]] = []
        self.lock = threading.Lock()

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                outcome = self.producer.send(Message(TOPIC, f"m{i}".encode()))
            except Exception as exc:  # noqa: BLE001 - asserted on by the test
                outcome = exc
            with self.lock:
                self.outcomes.append((started, time.monotonic(), outcome))
            i += 1
            self.stop.wait(0.003)

    def since(self, t: float) -> list[tuple[float, float, object]]:
        with self.lock:
            return [o for o in self.outcomes if o[0] >= t]

    def acknowledged(self) -> dict[str, str]:
        """msg id -> broker name of every SEND_OK so far."""
        with self.lock:
            return {o.msg_id: o.queue.broker_name for _, _, o in self.outcomes
                    if not isinstance(o, Exception) and o.status == SendStatus.SEND_OK}


@pytest.mark.parametrize("loss", ["killed", "hung"])
def test_losing_one_whole_group_leaves_the_other_serving(start_cluster, monkeypatch, loss):
    # The watchdog would kill (and restart) processes stopped for its heartbeat time-out.
    cluster = start_cluster(brokers=2, slaves=1, heartbeat_timeout_s=300)
    cfg = client_config(cluster, request_timeout_ms=REQUEST_TIMEOUT_MS, pull_suspend_ms=500,
                        slave_fallback_ms=2000)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 2)
        route = admin.route(TOPIC)
    # The route carries each group's queues, and each group's master and slave.
    assert sorted((q["brokerName"], q["writeQueueNums"]) for q in route["queueDatas"]) == [
        (SURVIVOR, 2), (LOST, 2)]
    assert sorted((b["brokerName"], sorted(b["brokerAddrs"])) for b in route["brokerDatas"]) == [
        (SURVIVOR, ["0", "1"]), (LOST, ["0", "1"])]

    received: dict[str, str] = {}  # msg id -> broker name
    received_lock = threading.Lock()

    def listener(messages):
        with received_lock:
            for m in messages:
                received[m.msg_id] = m.broker_name
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(GROUP, config=cfg)
    consumer.subscribe(TOPIC)
    consumer.register_listener(listener)
    consumer.start()
    producer = Producer("MultiMasterPG", config=client_config(
        cluster, request_timeout_ms=REQUEST_TIMEOUT_MS, send_timeout_ms=SEND_TIMEOUT_MS,
        send_latency_fault_enabled=True, send_not_available_duration_ms=DURATIONS_MS))
    attempts: list[tuple[float, str, bool]] = []  # every attempt's (time, broker, failed)
    update = producer.faults.update

    def spy(broker, latency_ms, isolation=False):
        attempts.append((time.monotonic(), broker, isolation))
        return update(broker, latency_ms, isolation)
    monkeypatch.setattr(producer.faults, "update", spy)
    sender = Sender(producer)
    supervisor = cluster.process.pid
    lost = _group_children(cluster, LOST)
    assert {name for name, _ in lost} >= {LOST, f"{LOST}-s1", f"{LOST}-flush", f"{LOST}-s1-reput"}
    stopped_supervisor = False
    try:
        wait_until(lambda: len(consumer.assigned_queues()) == 4, 20, what="all four queues assigned")
        sender.start()

        def consumed_from(brokers: set[str], since: float) -> bool:
            sent = {k: b for _, _, o in sender.since(since) if not isinstance(o, Exception)
                    for k, b in [(o.msg_id, o.queue.broker_name)]}
            with received_lock:
                got = {b for k, b in sent.items() if k in received}
            return got >= brokers
        wait_until(lambda: consumed_from({SURVIVOR, LOST}, 0), 30, interval_s=0.05,
                   what="sends on both groups consumed")

        # Lose the whole group.
        os.kill(supervisor, signal.SIGSTOP)
        stopped_supervisor = True
        for _, pid in lost:
            os.kill(pid, signal.SIGKILL if loss == "killed" else signal.SIGSTOP)
        lost_at = time.monotonic()

        def isolated_at():
            return next((t for t, b, failed in attempts if b == LOST and failed and t >= lost_at), None)
        wait_until(isolated_at, 10, interval_s=0.05, what=f"an attempt on {LOST} failed")
        steered_at = isolated_at()
        state = producer.fault_state()[LOST]
        assert state["isolated"] and not state["available"], state
        # Two more seconds' sends, and the survivor's share of them consumed.
        wait_until(lambda: time.monotonic() > steered_at + 2 and len(sender.since(steered_at + 1)) >= 50, 30,
                   interval_s=0.05, what="sends after the loss")
        after = sender.since(lost_at)
        cut = time.monotonic()

        def survivors_consumed() -> bool:
            with received_lock:
                return all(o.msg_id in received for _, end, o in after
                           if not isinstance(o, Exception) and end <= cut)
        wait_until(survivors_consumed, 30, interval_s=0.05,
                   what=f"the consumer consumed every send on {SURVIVOR} after the loss")

        errors = [o for _, _, o in after if isinstance(o, Exception)]
        assert not errors, errors[:3]
        assert all(o.status == SendStatus.SEND_OK and o.queue.broker_name == SURVIVOR for _, _, o in after)
        # Steered: once the lost group failed, no attempt goes there, so no send waits on it (how
        # long sends take through a loss is a figure of perf's failover scenario, not a pass/fail here).
        assert not [a for a in attempts if a[0] > steered_at and a[1] == LOST], "attempts on the lost group"
        assert [1 for start, _, _ in after if start > steered_at], "no send after the producer steered"
        assert not producer.fault_state()[LOST]["available"]
        assert producer.send_failures == 0

        # The group returns.
        if loss == "hung":
            for _, pid in lost:
                os.kill(pid, signal.SIGCONT)
        os.kill(supervisor, signal.SIGCONT)
        stopped_supervisor = False
        if loss == "killed":
            cluster.await_running(LOST, not_pid=dict(lost)[LOST])
        cluster.await_all_running()
        sender.stop.set()
        sender.join(SEND_TIMEOUT_MS / 1000 + 5)
        acknowledged = sender.acknowledged()
        assert {b for b in acknowledged.values()} == {SURVIVOR, LOST}
        with PullConsumer("MultiMasterAudit", config=client_config(cluster)) as audit:
            wait_until(lambda: {m.msg_id for m in read_topic(audit, TOPIC)} >= set(acknowledged), 30,
                       interval_s=0.2, what="every acknowledged message readable")

        def all_consumed() -> bool:
            with received_lock:
                return set(received) >= set(acknowledged)
        wait_until(all_consumed, 60, interval_s=0.2, what="every acknowledged message consumed")
    finally:
        sender.stop.set()
        if stopped_supervisor:
            for _, pid in lost:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
            os.kill(supervisor, signal.SIGCONT)
        consumer.shutdown()
        producer.shutdown()
