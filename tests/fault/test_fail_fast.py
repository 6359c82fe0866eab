"""A request parked on a broker that dies fails as "connection lost", not at its time-out.

Without this a push consumer's long poll (15 s by default) on a broker that was killed
and restarted is lost for its whole wait plus the request time-out: consumption stalls.
"""

import signal
from concurrent.futures import TimeoutError as FutureTimeout

import pytest

from rocketbox.cluster import Admin, MessageQueue, Producer, Message, PushConsumer
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.zmq_transport import RequestTimeout, RpcClient, TransportError
from tests.conftest import client_config

SUSPEND_MS = 60_000


def test_parked_pull_fails_at_once_when_its_broker_dies(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("FailFast", 1)
        endpoint = next(iter(admin.master_endpoints().values()))
    rpc = RpcClient()
    try:
        request = broker_api.pull_request("FailFastGroup", MessageQueue("FailFast", "broker-a", 0), 0, 32, "*",
                                          suspend_ms=SUSPEND_MS)
        future = rpc.call_async(endpoint, request, SUSPEND_MS + 30_000)
        # The queue is empty, so the broker parks the pull and answers nothing for a minute.
        with pytest.raises(FutureTimeout):
            future.result(0.5)
        cluster.kill("broker-a", signal.SIGKILL)
        error = future.exception(timeout=SUSPEND_MS / 1000 / 2)   # well before its time-out
        assert isinstance(error, TransportError) and not isinstance(error, RequestTimeout), error
        assert "lost" in str(error)
    finally:
        rpc.close()


def test_push_consumer_resumes_soon_after_its_broker_restarts(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster, pull_suspend_ms=SUSPEND_MS)
    with Admin(config=cfg) as admin:
        admin.create_topic("FailFastPush", 2)
    received = []
    consumer = PushConsumer("FailFastPushGroup", config=cfg)
    consumer.subscribe("FailFastPush")
    consumer.register_listener(lambda messages: received.extend(m.body for m in messages))
    consumer.start()
    try:
        wait_until(lambda: len(consumer.assigned_queues()) == 2, 30, what="queues assigned")
        old = cluster.kill("broker-a", signal.SIGKILL)   # the consumer's pulls are parked there
        cluster.await_running("broker-a", not_pid=old)
        cluster.await_all_running()
        with Producer("FailFastProducer", config=cfg) as producer:
            producer.send(Message("FailFastPush", b"after-restart"))
        # Well before a lost long poll (60 s) would have ended.
        wait_until(lambda: b"after-restart" in received, SUSPEND_MS / 1000 / 2, what="message after restart")
    finally:
        consumer.shutdown()
