"""Lite topics at scale (issue 34 item 3): many lite topics, each with a subscriber, on one box.

    python -m rocketbox.perf.lite_scale [--lite-topics 100000] [--clients 100] [--drain 1]

A cluster with a gRPC proxy and one LITE parent topic; ``clients`` Lite consumers (raw gRPC calls
through the generated stub: 100,000 client processes would measure the client library, not the
cluster) each subscribe their share of the lite topics (one group each, COMPLETE_ADD), then one
message is sent to every lite topic (SendMessage, 32 lite topics a call). Printed as one JSON
line: the proxy's and the broker's resident memory (VmRSS) and the store's disk use (du of the
data dir) before and after, the time of each phase, and the drain of ``drain`` groups: how long one
group's receives take to deliver its own lite topics' messages out of everything the topic holds
(its pops read every message of the parent topic and ack the others: the cost of sharing queues).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time

import grpc

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.proxy.protos import pb, service, service_grpc
from rocketbox.cluster.testing import LocalCluster

TOPIC = "LiteScale"
SEND_BATCH = 32


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def disk_kib(path: str) -> int:
    return int(subprocess.run(["du", "-sk", path], capture_output=True, text=True, check=True).stdout.split()[0])


def meta(client_id: str) -> list:
    return [("x-mq-client-id", client_id)]


def settle_client(stub, client_id: str, group: str) -> None:
    command = service.TelemetryCommand(settings=pb.Settings(
        client_type=pb.LITE_SIMPLE_CONSUMER, subscription=pb.Subscription(
            group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name=TOPIC))])))
    call = stub.Telemetry(iter([command]), metadata=meta(client_id), timeout=10)
    for answer in call:
        if answer.status.code != pb.OK:
            raise RuntimeError(f"settings refused: {answer.status}")
        break
    call.cancel()


def lite_name(i: int) -> str:
    return f"session-{i:06d}"


def run(lite_topics: int, clients: int, drain: int) -> dict:
    per_client = lite_topics // clients
    out: dict = {"lite_topics": lite_topics, "clients": clients, "subscriptions_per_client": per_client}
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(os.path.join(tmp, "c"), proxy=True,
                               # Raw clients neither heartbeat nor hold a stream: keep them known throughout.
                               proxy_overrides={"lite_subscription_quota": max(per_client, 1200),
                                                "client_expiry_ms": 3_600_000}).start()
        try:
            with Admin(cluster.namesrv) as admin:
                admin.create_topic(TOPIC, 8, message_type="LITE")
            proxy_pid, broker_pid = cluster.pid("proxy"), cluster.pid("broker-a")
            channel = grpc.insecure_channel(cluster.proxy_endpoint,
                                            options=[("grpc.max_send_message_length", 64 << 20)])
            stub = service_grpc.MessagingServiceStub(channel)
            time.sleep(1)
            out["before"] = {"proxy_rss_kib": rss_kib(proxy_pid), "broker_rss_kib": rss_kib(broker_pid),
                             "data_dir_kib": disk_kib(cluster.data_dir)}
            started = time.monotonic()
            for c in range(clients):
                client_id, group = f"lite-{c}@scale", f"LiteScaleCG{c}"
                settle_client(stub, client_id, group)
                names = [lite_name(c * per_client + i) for i in range(per_client)]
                answer = stub.SyncLiteSubscription(service.SyncLiteSubscriptionRequest(
                    action=pb.COMPLETE_ADD, topic=pb.Resource(name=TOPIC), group=pb.Resource(name=group),
                    lite_topic_set=names), metadata=meta(client_id), timeout=30)
                if answer.status.code != pb.OK:
                    raise RuntimeError(f"sync refused: {answer.status}")
            out["subscribe_s"] = round(time.monotonic() - started, 2)
            out["after_subscribe"] = {"proxy_rss_kib": rss_kib(proxy_pid)}
            started = time.monotonic()
            sent = 0
            for first in range(0, lite_topics, SEND_BATCH):
                messages = [pb.Message(topic=pb.Resource(name=TOPIC), body=b"x" * 64, system_properties=pb.SystemProperties(
                    message_id=f"LITE{i:028d}", message_type=pb.LITE, body_encoding=pb.IDENTITY, lite_topic=lite_name(i)))
                    for i in range(first, min(first + SEND_BATCH, lite_topics))]
                answer = stub.SendMessage(service.SendMessageRequest(messages=messages), metadata=meta("scale-producer"),
                                          timeout=30)
                if answer.status.code != pb.OK:
                    raise RuntimeError(f"send refused: {answer.status}")
                sent += len(messages)
            out["send_s"] = round(time.monotonic() - started, 2)
            out["sent"] = sent
            time.sleep(2)
            out["after_send"] = {"proxy_rss_kib": rss_kib(proxy_pid), "broker_rss_kib": rss_kib(broker_pid),
                                 "data_dir_kib": disk_kib(cluster.data_dir)}
            # The first group's lite topics were sent first, the last group's last: its pops read past
            # every other group's messages first (acked unseen), the cost of sharing the parent's queues.
            out["drains"] = [drain_group(stub, c, per_client) for c in sorted({0, clients - 1})[:max(drain, 1)]]
            out["after_drain"] = {"proxy_rss_kib": rss_kib(proxy_pid), "broker_rss_kib": rss_kib(broker_pid)}
            channel.close()
        finally:
            cluster.stop()
    return out


def drain_group(stub, c: int, per_client: int, max_s: float = 300.0) -> dict:
    """Receives (and acks) as group ``c`` until it holds one message of each of its lite topics; counts
    anything else it was handed (a lite topic not its own would be a fault)."""
    client_id, group = f"lite-{c}@scale", f"LiteScaleCG{c}"
    mine = {lite_name(c * per_client + i) for i in range(per_client)}
    own: set[str] = set()
    foreign = duplicates = receives = 0
    started = time.monotonic()
    while len(own) < len(mine) and time.monotonic() - started < max_s:
        receives += 1
        handles = []
        for response in stub.ReceiveMessage(service.ReceiveMessageRequest(
                group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=TOPIC)),
                filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=32,
                invisible_duration={"seconds": 60}, long_polling_timeout={"seconds": 1}),
                metadata=meta(client_id), timeout=30):
            if response.HasField("message"):
                lite = response.message.system_properties.lite_topic
                if lite not in mine:
                    foreign += 1
                elif lite in own:
                    duplicates += 1
                else:
                    own.add(lite)
                handles.append(response.message.system_properties.receipt_handle)
        if handles:
            stub.AckMessage(service.AckMessageRequest(
                group=pb.Resource(name=group), topic=pb.Resource(name=TOPIC),
                entries=[service.AckMessageEntry(receipt_handle=h) for h in handles]), metadata=meta(client_id), timeout=30)
    return {"group": group, "own_lite_topics_received": len(own & mine), "foreign": foreign, "duplicates": duplicates,
            "receives": receives, "seconds": round(time.monotonic() - started, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lite-topics", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--drain", type=int, default=2, help="groups drained: the first, then the last")
    args = parser.parse_args()
    print(json.dumps(run(args.lite_topics, args.clients, args.drain)))


if __name__ == "__main__":
    main()
