"""``python -m rocketbox.perf.latency_ab``: one message's sync send under broker and client
latency settings, interleaved run by run in one process, beside Redis Streams' XADD round trip,
to choose the polling defaults by measurement. Settings ``busy_poll_us:sync_call_spin_us`` pairs; a cluster per ``busy_poll_us``.

    python -m rocketbox.perf.latency_ab --door remoting --configs 0:0,0:1000,300:0,300:1000
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile
import time
from contextlib import ExitStack

from rocketbox.cluster import Message, Producer
from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf.harness import client_config, create_topic
from rocketbox.perf.report import percentile

WARM_UP = 200


def _sends(cfg, topic: str, count: int) -> list[float]:
    create_topic(cfg, topic)
    with Producer("LatencyAbPG", config=cfg) as producer:
        for _ in range(WARM_UP):
            producer.send(Message(topic, b"x" * 100))
        lat = []
        for _ in range(count):
            t0 = time.perf_counter()
            producer.send(Message(topic, b"x" * 100))
            lat.append((time.perf_counter() - t0) * 1e6)
    return lat


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--door", choices=("native", "remoting"), default="remoting")
    parser.add_argument("--configs", default="0:0,0:1000,300:0,300:1000")
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    configs = [tuple(int(v) for v in pair.split(":")) for pair in args.configs.split(",")]
    values: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="rocketbox-latency-ab-") as tmp, ExitStack() as stack:
        clusters = {busy: stack.enter_context(LocalCluster(os.path.join(tmp, f"busy{busy}"),
                                                           broker_overrides={"busy_poll_us": busy}))
                    for busy in sorted({busy for busy, _ in configs})}
        redis = None
        from rocketbox.perf.peers.redis_streams import RedisStreams
        peer = RedisStreams()
        if peer.missing() is None:
            redis = peer.client(stack.enter_context(peer.server(tmp)))
            redis.setup("latency")
        else:
            print(f"Redis Streams not measured: {peer.missing()}")
        for run in range(args.runs):
            if redis is not None:
                redis.publish_latencies("latency", WARM_UP, time.monotonic() + 30)
                lat = redis.publish_latencies("latency", args.sends, time.monotonic() + 120)
                values.setdefault("Redis Streams XADD", []).append((percentile(lat, 0.5), percentile(lat, 0.99)))
            for busy, spin in configs:
                cluster = clusters[busy]
                namesrv = cluster.namesrv if args.door == "native" else cluster.remoting_namesrv
                cfg = dataclasses.replace(client_config(namesrv, transport=args.door), sync_call_spin_us=spin)
                lat = _sends(cfg, f"LatencyAb{run}x{spin}", args.sends)
                values.setdefault(f"{args.door}, busy_poll_us={busy}, sync_call_spin_us={spin}", []).append(
                    (percentile(lat, 0.5), percentile(lat, 0.99)))
    for name, runs in values.items():
        p50 = sorted(round(r[0]) for r in runs)
        p99 = sorted(round(r[1]) for r in runs)
        print(f"{name}: p50 {p50} us, p99 {p99} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
