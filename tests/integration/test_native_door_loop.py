"""The broker's native door as a cluster runs it (zmtp_door.py): without access control the broker's
own loop serves it (not a libzmq ROUTER), and RocketBox's client (direct ZMTP and
through libzmq) sends and consumes through it; the counters of its connections are in runtime info."""

from __future__ import annotations

import dataclasses

import pytest

from rocketbox.cluster import Message, Producer, PullConsumer
from rocketbox.cluster.testing import LocalCluster, broker_runtime_info, pull_until
from tests.conftest import client_config


@pytest.mark.timeout(120)
def test_the_brokers_loop_serves_the_native_door_to_both_kinds_of_client(tmp_path):
    with LocalCluster(str(tmp_path / "cluster"), metrics=False, remoting=False) as cluster:
        cfg = client_config(cluster)
        broker = cluster.topology.brokers[0].address
        for direct in (True, False):
            config = dataclasses.replace(cfg, native_direct=direct)
            with Producer(f"LoopDoorPG{direct:d}", config=config) as producer:
                for i in range(20):
                    producer.send(Message("LoopDoor", f"{direct}-{i}".encode()))
        with PullConsumer("LoopDoorCG", config=cfg) as consumer:
            assert len(pull_until(consumer, "LoopDoor", 40)) == 40
        native = broker_runtime_info(broker)["doors"]["native"]
        assert native["servedBy"] == "loop", native
        assert native["requestsServed"] >= 40 and native["malformedFrames"] == 0, native
