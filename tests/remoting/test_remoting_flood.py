"""A flood of connections that never prove themselves against a NameServer's and a broker's remoting
doors, while real clients use them (``cluster/remoting_admission.py``).

The flood (``tests/door_flood.py``, a process of its own) keeps as many idle connections open
at each door as its table holds, plus connections holding half frames that declare nearly the
largest frame each door takes (gigabytes in all) and connections dripping a byte every 100 ms,
and opens each again as soon as the door closes it. Meanwhile RocketMQ's C++ client and
RocketBox's own remoting client get routes, send and receive; the doors' memory stays within the
budget for unproven bytes, and every flood connection is closed within the unproven time-out."""

from __future__ import annotations

import pathlib

import pytest

from rocketbox.cluster import Message, Producer, PullConsumer
from rocketbox.cluster.config import ClientConfig
from rocketbox.cluster.procs.namesrv import NAMESRV_FRAME_BYTES_MAX
from rocketbox.cluster.testing import LocalCluster, broker_runtime_info, pull_until
from rocketbox.cluster.wire_format import HEADER_BYTES_MAX
from tests.door_flood import PeakRss, flood_process
from tests.remoting.cpp_client import CppClient, require_cpp_client, run_cpp, sent_ok

MIB = 1024 * 1024
TABLE = 2048
UNPROVEN_BYTES_MAX = 16 * MIB
BOUNDS = {"remoting_connections_max": TABLE, "remoting_unproven_timeout_ms": 5_000,
          "remoting_unproven_bytes_max": UNPROVEN_BYTES_MAX, "remoting_buffered_bytes_max": 64 * MIB}
HALF_FRAMES = 40            # a door, each holding HALF_BYTES of its frame
HALF_BYTES = 4 * MIB        # 160 MiB a door would be buffered without the budget
RSS_GROWTH_MAX = 64 * MIB   # the budget, plus reads in flight and what the allocator keeps of freed bytes
SENDS = 20
# Every address of 127.0.0.0/8 is this machine: idle connections from five of them look like five
# hosts, each within its share of unproven places, so together they fill the table.
SOURCES = [f"127.0.0.{n}" for n in range(1, 6)]


@pytest.mark.timeout(300)
def test_a_flood_of_strangers_slows_the_doors_but_clients_still_send_and_receive(tmp_path):
    require_cpp_client()
    cluster = LocalCluster(str(tmp_path / "cluster"), broker_overrides=BOUNDS, namesrv_overrides=BOUNDS,
                           metrics=False).start()
    flood = None
    try:
        namesrv_cfg, broker_cfg = cluster.topology.namesrvs[0], cluster.topology.brokers[0]
        frame_max = {namesrv_cfg.remoting_port: NAMESRV_FRAME_BYTES_MAX,
                     broker_cfg.remoting_port: broker_cfg.store.message_size_bytes_max + HEADER_BYTES_MAX}
        doors = [{"port": port, "idle": TABLE, "half": HALF_FRAMES, "declared": most - 8, "half_bytes": HALF_BYTES,
                  "drip": 16} for port, most in frame_max.items()]
        rss = PeakRss({"namesrv": cluster.pid("namesrv-0"), "broker": cluster.pid("broker-a")})
        flood = flood_process({"doors": doors, "sources": SOURCES, "reconnects_per_s": 2000, "duration_s": 200,
                               "drain_s": 20}, tmp_path / "flood")
        try:
            flood.wait_for(lambda lines: any("started" in line for line in lines), 60, "flood's first connections")
            _clients_send_and_receive(cluster, tmp_path)
            door = broker_runtime_info(broker_cfg.address)["doors"]["remoting"]
        finally:
            flood.close_stdin()   # stop: nothing is opened again
        flood.finish(60)
        done = next(line for line in flood.snapshot() if line.get("done"))
        growth = rss.growth()
    finally:
        if flood is not None:
            flood.kill()
        cluster.stop()
    assert done["declared_bytes"] > 2 * 1024 * MIB, done   # gigabytes declared
    assert done["sent_bytes"] > 4 * UNPROVEN_BYTES_MAX, done   # the doors were offered far more than the budget
    assert done["still_open"] == 0, done   # every flood connection closed by the doors
    assert all(size < RSS_GROWTH_MAX for size in growth.values()), (growth, done)
    evicted = door["connectionsEvicted"]
    assert evicted.get("bufferedBytes", 0) > 0 and evicted.get("tableFull", 0) > 0, door
    assert door["unprovenBytes"] <= UNPROVEN_BYTES_MAX, door


def _clients_send_and_receive(cluster: LocalCluster, tmp_path: pathlib.Path) -> None:
    """RocketBox's remoting client and RocketMQ's C++ client each send SENDS messages through the
    flooded doors; a C++ push consumer and a RocketBox pull consumer each receive all of them."""
    remoting = ClientConfig(namesrv_endpoints=tuple(f"tcp://{a}" for a in cluster.remoting_namesrv.split(";")),
                            transport="remoting", request_timeout_ms=10_000)
    with Producer("FloodPG", config=remoting) as producer:
        for i in range(SENDS):
            producer.send(Message("FloodTopic", f"ours-{i}".encode()))
    results = run_cpp("produce", {"namesrv": cluster.remoting_namesrv, "timeout_ms": 10_000,
                                  "messages": [{"topic": "FloodTopic", "body": f"cpp-{i}"} for i in range(SENDS)]},
                      tmp_path / "cpp-produce")
    assert len(sent_ok(results)) == SENDS, results
    bodies = {f"ours-{i}" for i in range(SENDS)} | {f"cpp-{i}" for i in range(SENDS)}
    received = CppClient("consume", {"namesrv": cluster.remoting_namesrv, "group": "FloodCG", "topic": "FloodTopic",
                                     "expect": len(bodies), "timeout_s": 90, "quiet_s": 1},
                         tmp_path / "cpp-consume").finish(120)
    assert {line["body"] for line in received} == bodies
    with PullConsumer("FloodPullCG", config=remoting) as consumer:
        assert {m.body.decode() for m in pull_until(consumer, "FloodTopic", len(bodies), timeout_s=60)} == bodies
