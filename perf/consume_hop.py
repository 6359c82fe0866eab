"""``python -m rocketbox.perf.consume_hop``: a default PushConsumer's hop from a pull's answer to its
listener, end to end at 10k msg/s (``public_api_latency``'s e2e shape, no Redis).

Each batch's time from the I/O thread receiving the pull answer that carried it to the listener
starting (on a consume thread or, inline, on the I/O thread), beside the e2e p50/p99 and the
consumer process's CPU a message. The hook wraps ``PullService._on_pulled`` and the listener in
this process only, so base and new trees are measured alike.

    python -m rocketbox.perf.consume_hop [--variant default|push0] [--seconds 5]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from rocketbox.cluster import PushConsumer
from rocketbox.cluster.client import pull_service
from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf import public_api_latency
from rocketbox.perf.harness import PACED_RATE_MSG_S
from rocketbox.perf.report import percentile


def _hook(hops_ns: list[int]) -> None:
    on_pulled = pull_service.PullService._on_pulled
    register_listener = PushConsumer.register_listener

    def timed_on_pulled(self, pq, *args, **kwargs):
        pq.answer_received_ns = time.perf_counter_ns()
        return on_pulled(self, pq, *args, **kwargs)

    def timed_register_listener(consumer, listener):
        def timed(messages):
            now = time.perf_counter_ns()
            for pq in list(consumer._queues.values()):
                received = getattr(pq, "answer_received_ns", None)
                if received is not None and pq.mq.topic == messages[0].topic:
                    hops_ns.append(now - received)
            return listener(messages)
        return register_listener(consumer, timed)

    pull_service.PullService._on_pulled = timed_on_pulled
    PushConsumer.register_listener = timed_register_listener


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="default", choices=["default", "push0"])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    hops_ns: list[int] = []
    _hook(hops_ns)
    variant = public_api_latency.E2E_VARIANTS[args.variant]
    with tempfile.TemporaryDirectory(prefix="rocketbox-consume-hop-") as tmp, \
            LocalCluster(os.path.join(tmp, "cluster")) as cluster:
        cpu_before = time.process_time()
        latencies = public_api_latency.rocketbox_e2e({"native": cluster.namesrv}, variant, "ConsumeHop",
                                                     "ConsumeHopGroup", args.seconds)
        cpu_s = time.process_time() - cpu_before
    hops_us = [h / 1000 for h in hops_ns]
    messages = PACED_RATE_MSG_S * args.seconds
    print(f"e2e p50 {percentile(latencies, 0.5):.0f} us, p99 {percentile(latencies, 0.99):.0f} us | "
          f"pull answer -> listener p50 {percentile(hops_us, 0.5):.0f} us, p90 {percentile(hops_us, 0.9):.0f} us "
          f"({len(hops_us)} batches) | consumer process CPU {cpu_s / messages * 1e6:.0f} us a message")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
