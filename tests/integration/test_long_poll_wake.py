"""One route from a send to a consumer (docs/ARCHITECTURE.md "The path of one message", step 4):
a parked pull is answered by the write it waits for, under either flush mode, and its message
reaches it without the reput worker (which only builds the IndexFile: queries by key wait for it)."""

from __future__ import annotations

import signal
import threading

import pytest

from rocketbox.cluster import Admin, Message, Producer, PullConsumer, PullStatus
from rocketbox.cluster.config import ASYNC_FLUSH, SYNC_FLUSH
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config

# Far longer than the waits below: a pull that is answered before it ends was woken by the write.
HOLD_MS = 60_000
WOKEN_WAIT_S = 20


def _parked_pull(consumer: PullConsumer, mq, offset: int) -> tuple[threading.Thread, list]:
    out: list = []

    def pull():
        out.append(consumer.pull(mq, offset, suspend_ms=HOLD_MS))

    thread = threading.Thread(target=pull, daemon=True)
    thread.start()
    return thread, out


@pytest.mark.timeout(180)
@pytest.mark.parametrize("door, flush_mode", [("native", ASYNC_FLUSH), ("native", SYNC_FLUSH),
                                              ("remoting", ASYNC_FLUSH)])
def test_a_parked_pull_is_answered_by_the_write_it_waits_for(start_cluster, door, flush_mode):
    """Under async flush the broker answers it right after the read that stored its message was
    served, before that read's answers are written (not at the loop turn's end):
    ``pullsAnsweredWithTheirPut`` counts each. Under sync flush the message is not readable before
    the flush: the pull is answered once flushed, and the count stays 0."""
    cluster = start_cluster(flush_mode=flush_mode)
    cfg = client_config(cluster, transport=door)
    with Admin(config=cfg) as admin:
        admin.create_topic("Woken", 1)
    with Producer("PG", config=cfg) as producer, PullConsumer("CG", config=cfg) as consumer, \
            Admin(config=cfg) as admin:
        (endpoint,) = admin.master_endpoints().values()
        mq = consumer.queues("Woken")[0]
        rounds = 3
        for round_ in range(rounds):   # each pull parks at the queue's end, then a send arrives
            offset = consumer.max_offset(mq)
            thread, out = _parked_pull(consumer, mq, offset)
            wait_until(lambda: admin.broker_runtime_info(endpoint)["parkedPulls"] >= 1, 20,
                       what="the pull parked at the broker")
            producer.send(Message("Woken", b"wake-%d" % round_))
            thread.join(WOKEN_WAIT_S)
            assert not thread.is_alive(), f"the pull was not woken by the send ({door}, {flush_mode})"
            assert out[0].status is PullStatus.FOUND and [m.body for m in out[0].messages] == [b"wake-%d" % round_]
        answered_with_put = admin.broker_runtime_info(endpoint)["pullsAnsweredWithTheirPut"]
        assert answered_with_put == (rounds if flush_mode == ASYNC_FLUSH else 0), (door, flush_mode)


@pytest.mark.timeout(180)
def test_consumers_read_while_the_reput_worker_is_stopped(start_cluster):
    cluster = start_cluster(heartbeat_timeout_s=600)   # SIGSTOPped, not restarted by the watchdog
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("NoReput", 1)
    with Producer("PG", config=cfg) as producer, PullConsumer("CG", config=cfg) as consumer:
        mq = consumer.queues("NoReput")[0]
        cluster.kill("broker-a-reput", signal.SIGSTOP)
        try:
            sent = producer.send(Message("NoReput", b"read-me", tags="TagA", keys="the-key"))
            result = consumer.pull(mq, 0, expression="TagA", suspend_ms=2000)
            assert result.status is PullStatus.FOUND and [m.msg_id for m in result.messages] == [sent.msg_id]
            with Admin(config=cfg) as admin:
                assert admin.query_by_key("NoReput", "the-key") == []   # not indexed yet
        finally:
            cluster.kill("broker-a-reput", signal.SIGCONT)
        with Admin(config=cfg) as admin:
            wait_until(lambda: [m.msg_id for m in admin.query_by_key("NoReput", "the-key")] == [sent.msg_id], 20,
                       what="the key indexed once the reput runs again")
