"""Several NameServers and broker groups side by side; the supervisor leaves no orphan."""

from __future__ import annotations

import os
import signal

import psutil

from rocketbox.cluster import Admin, Message, Producer, PullConsumer
from rocketbox.cluster.testing import wait_until
from tests.conftest import client_config


def test_two_namesrvs_two_brokers_survive_the_loss_of_a_namesrv(start_cluster):
    cluster = start_cluster(namesrvs=2, brokers=2)
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Spread", 2)
        for endpoint in cluster.topology.namesrv_endpoints:
            # Every broker registered with every NameServer: each alone knows the whole route.
            single = Admin(namesrv=endpoint)
            route = single.route("Spread")
            assert sorted(b["brokerName"] for b in route["brokerDatas"]) == ["broker-a", "broker-b"]
            single.shutdown()
        info = admin.cluster_info()
        assert sorted(info["clusterAddrTable"]["DefaultCluster"]) == ["broker-a", "broker-b"]
    cluster.kill("namesrv-0", signal.SIGSTOP)  # silent, not gone: clients must move on to the other
    try:
        with Producer("PG", config=client_config(cluster, request_timeout_ms=1000)) as producer:
            brokers = {producer.send(Message("Spread", f"m{i}".encode())).queue.broker_name for i in range(8)}
        assert brokers == {"broker-a", "broker-b"}
    finally:
        cluster.kill("namesrv-0", signal.SIGCONT)
    with PullConsumer("CG", config=cfg) as consumer:
        queues = consumer.queues("Spread")
        assert len(queues) == 4
        wait_until(lambda: sum(consumer.max_offset(mq) for mq in queues) == 8, 10, what="8 messages dispatched")


def test_sigkill_of_the_supervisor_leaves_no_orphan(start_cluster):
    cluster = start_cluster()
    children = [c["pid"] for c in cluster.state()["children"]]
    assert len(children) == 5 and all(children)   # NameServer, broker, its flush and reput (+ allocate), web
    os.kill(cluster.process.pid, signal.SIGKILL)
    cluster.process.wait(10)

    def all_gone():
        return not [p for p in children if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    wait_until(all_gone, 20, what="every child of the killed supervisor gone")
