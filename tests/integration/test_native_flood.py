"""A flood at a broker's and a NameServer's native (ZeroMQ) doors: what ZeroMQ
lets the door bound, it bounds (``zmq_transport.HANDSHAKE_TIMEOUT_MS``, ``HEARTBEAT_MS``).

The flood (``tests/door_flood.py``) opens idle TCP connections that never send ZMTP's greeting,
connections that greet as a DEALER and then hold half a frame declaring nearly the door's largest
(4 MiB of it sent), and ones that drip such a frame a byte every 100 ms; each is opened again when
closed. Meanwhile a native client sends and receives. Every idle connection is closed within the
handshake time-out, every half frame within two heartbeats, and the memory they held goes with
them (ZeroMQ keeps no budget across connections: within those times a door holds what is sent to
it, up to its frame limit a connection)."""

from __future__ import annotations

import pytest

from rocketbox.cluster import Message, Producer, PullConsumer
from rocketbox.cluster.procs.namesrv import NAMESRV_FRAME_BYTES_MAX
from rocketbox.cluster.testing import LocalCluster, pull_until
from rocketbox.cluster.wire_format import HEADER_BYTES_MAX
from rocketbox.cluster.zmq_transport import HANDSHAKE_TIMEOUT_MS, HEARTBEAT_MS
from tests.conftest import client_config
from tests.door_flood import PeakRss, flood_process

MIB = 1024 * 1024
HALF_FRAMES = 20
HALF_BYTES = 4 * MIB
SLACK_S = 4.0          # the door's timers fire on their own clock; the flood notices a close on its next turn
SENDS = 50


@pytest.mark.timeout(240)
def test_a_flood_at_the_native_doors_is_closed_within_the_handshake_and_heartbeat_times(tmp_path):
    cluster = LocalCluster(str(tmp_path / "cluster"), metrics=False, remoting=False).start()
    flood = None
    try:
        broker, namesrv = cluster.topology.brokers[0], cluster.topology.namesrvs[0]
        doors = [{"port": port, "zmtp": True, "idle": 500, "half": HALF_FRAMES, "declared": most - 16,
                  "half_bytes": HALF_BYTES, "drip": 8}
                 for port, most in ((broker.port, broker.store.message_size_bytes_max + HEADER_BYTES_MAX),
                                    (namesrv.port, NAMESRV_FRAME_BYTES_MAX))]
        rss = PeakRss({"namesrv": cluster.pid("namesrv-0"), "broker": cluster.pid("broker-a")})
        flood = flood_process({"doors": doors, "reconnects_per_s": 200, "duration_s": 120, "drain_s": 60},
                              tmp_path / "flood")
        flood.wait_for(lambda lines: any("started" in line for line in lines), 60, "flood's first connections")
        cfg = client_config(cluster)
        with Producer("NativeFloodPG", config=cfg) as producer:
            for i in range(SENDS):
                producer.send(Message("NativeFlood", f"m{i}".encode()))
        with PullConsumer("NativeFloodCG", config=cfg) as consumer:
            assert len(pull_until(consumer, "NativeFlood", SENDS)) == SENDS
        flood.close_stdin()   # nothing is opened again; what is open, the doors close
        flood.finish(90)
        done = next(line for line in flood.snapshot() if line.get("done"))
        peak, after = rss.growth(), rss.now()
    finally:
        if flood is not None:
            flood.kill()
        cluster.stop()
    assert done["still_open"] == 0, done
    lived = done["lived_max_s"]
    assert lived["idle"] <= HANDSHAKE_TIMEOUT_MS / 1000 + SLACK_S, done
    assert max(lived["half"], lived["drip"]) <= 2 * HEARTBEAT_MS / 1000 + SLACK_S, done
    # ZeroMQ's bound: what a door's connections hold of their frames while they live, and no more after.
    assert all(size < 2 * HALF_FRAMES * HALF_BYTES for size in peak.values()), (peak, done)
    assert all(size < 48 * MIB for size in after.values()), (after, peak, done)
