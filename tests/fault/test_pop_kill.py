"""SIGKILL a broker during a pop load: no ack is lost, and nothing acked comes back.

A pop consumer (POP_MESSAGE with long polling, then ACK_MESSAGE per message, over the broker's
native door) works through a topic while the broker process is killed and restarted by the
supervisor. Afterwards every message stored was acked (or its ack was on its way when the broker
died: whether that one was written, the consumer cannot know), and no message was delivered after its
ack was answered SUCCESS: the ack records and checkpoints are in the revive log before any
answer, and the restarted broker rebuilds its pop state from it. Messages popped but not acked
when the broker died come back after their invisible time, which is the rule the issue's note
states.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from rocketbox.cluster import Admin, Message, Producer
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient, TransportError
from tests.conftest import client_config

pytestmark = pytest.mark.timeout(240)

TOPIC = "PopDurable"
GROUP = "PopDurableGroup"
MESSAGES = 3000
INVISIBLE_MS = 3000


class PopLoad(threading.Thread):
    """Pops and acks until told to stop; records each delivery and each ack answered SUCCESS."""

    def __init__(self, endpoint: str):
        super().__init__(daemon=True)
        self.endpoint = endpoint
        self.deliveries: list[tuple[float, str]] = []   # (when, message id)
        self.acked_at: dict[str, float] = {}            # message id -> when its ack was answered SUCCESS
        # Acks sent when the broker died: written or not, the answer never came (the client cannot know).
        self.unanswered_acks: set[str] = set()
        self.errors = 0
        self.answers: dict[int, int] = {}   # pop answer code -> how many
        self.stop = threading.Event()

    def run(self):
        rpc = RpcClient(default_timeout_ms=2000)
        try:
            for _ in range(100_000):
                if self.stop.is_set():
                    break
                self._round(rpc)
        finally:
            rpc.close()

    def _round(self, rpc):
        try:
            answer = rpc.call(self.endpoint, Command(RequestCode.POP_MESSAGE, {
                "consumerGroup": GROUP, "topic": TOPIC, "queueId": "-1", "maxMsgNums": "32",
                "invisibleTime": str(INVISIBLE_MS), "pollTime": "500", "initMode": "0"}))
        except TransportError:
            self.errors += 1
            time.sleep(0.05)
            return
        self.answers[answer.code] = self.answers.get(answer.code, 0) + 1
        if answer.code != ResponseCode.SUCCESS:
            return
        popped = list(zip(fmt.iter_records(answer.body), answer.fields["handles"].split(",")))
        for record, handle in popped:
            msg_id = record.properties[PROPERTY_UNIQ_KEY]
            self.deliveries.append((time.monotonic(), msg_id))
            try:
                ack = rpc.call(self.endpoint, Command(RequestCode.ACK_MESSAGE, {
                    "consumerGroup": GROUP, "topic": TOPIC, "extraInfo": handle}))
            except TransportError:
                self.errors += 1
                self.unanswered_acks.add(msg_id)
                continue
            if ack.code == ResponseCode.SUCCESS:
                self.acked_at.setdefault(msg_id, time.monotonic())


def test_sigkill_of_the_broker_during_a_pop_load_loses_no_ack(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic(TOPIC, 4)
    sent = set()
    with Producer("PopDurablePG", config=cfg) as producer:
        for start in range(0, MESSAGES, 100):
            batch = [Message(TOPIC, f"p-{i}".encode()) for i in range(start, start + 100)]
            producer.send_batch(batch)
            sent.update(m.properties["UNIQ_KEY"] for m in batch)
    endpoint = f"tcp://{cluster.replica_configs('broker-a')['broker-a'].address}"
    load = PopLoad(endpoint)
    load.start()
    try:
        wait_until(lambda: len(load.acked_at) >= MESSAGES // 3, 60, what="a third of the topic acked")
        old_pid = cluster.kill("broker-a", signal.SIGKILL)
        cluster.await_running("broker-a", not_pid=old_pid)
        cluster.await_all_running()
        try:
            wait_until(lambda: sent <= set(load.acked_at) | load.unanswered_acks, 90, interval_s=0.2,
                       what="every message acked")
        except TimeoutError:
            missing = sorted(sent - set(load.acked_at) - load.unanswered_acks)
            raise AssertionError(f"{len(missing)} messages never acked, e.g. {missing[:3]}; pops answered "
                                 f"{load.answers}, {load.errors} transport errors") from None
    finally:
        load.stop.set()
        load.join(30)
    after_ack = [(when, msg_id) for when, msg_id in load.deliveries
                 if msg_id in load.acked_at and when > load.acked_at[msg_id]]
    assert not after_ack, f"{len(after_ack)} deliveries of messages already acked, e.g. {after_ack[:3]}"
    assert cluster.child("broker-a")["restarts"] >= 1
    redelivered = len(load.deliveries) - len(set(msg_id for _, msg_id in load.deliveries))
    print(f"{MESSAGES} messages, {len(load.deliveries)} deliveries ({redelivered} again after the kill), "
          f"{load.errors} transport errors, {len(load.unanswered_acks - set(load.acked_at))} acks unanswered")
