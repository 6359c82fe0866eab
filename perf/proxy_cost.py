"""What the gRPC proxy's own code costs a message, without grpcio: the servicer's SendMessage,
ReceiveMessage and AckMessage coroutines called in this process against a real LocalCluster, as a
gRPC front end outside grpcio-Python would call them (perf/RESULTS.md, "The gRPC door: the floor of
a C front end and the proxy's own cost").

Each call starts from the request's protobuf bytes and ends with the answer's bytes (a front end
hands Python bytes), with the smallest context the methods read (the client id header, the peer,
the deadline). Sends: ``--window`` calls in flight, one message a SendMessage, as the official
Node.js client sends; receives: ``--receivers`` loops of ReceiveMessage (batch 32), each acking
every message of a batch in its own AckMessage, all of them in flight together (the Node client's
SimpleConsumer). This process's CPU (the servicer, the broker gateway and its RpcClient I/O
thread) per message, and the broker's, beside the rate.

    python -m rocketbox.perf.proxy_cost --count 20000 --rounds 3 [--profile-s 5]

Prints one JSON line a phase a round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid

import psutil

from rocketbox.cluster.testing import LocalCluster
from rocketbox.cluster.topology import proxy_settings
from rocketbox.perf.harness import client_config, create_topic

BODY = b"x" * 100
CLIENT_ID = "perf-host@4242@1@proxycost"
SEND_TIMEOUT_S = 10.0
RECEIVE_POLL_S = 1
INVISIBLE_S = 30
PHASE_S_MAX = 120.0


class CallContext:
    """What the proxy's handlers read from a grpc.aio ServicerContext, and nothing else."""

    __slots__ = ("_metadata", "_deadline")

    def __init__(self, timeout_s: float):
        self._metadata = (("x-mq-client-id", CLIENT_ID),)
        self._deadline = time.monotonic() + timeout_s

    def invocation_metadata(self):
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def time_remaining(self) -> float:
        return max(0.0, self._deadline - time.monotonic())


def send_request_bytes(topic: str, count: int) -> list[bytes]:
    """``count`` SendMessageRequests as the Node client builds them (one message each), serialized."""
    from google.protobuf.timestamp_pb2 import Timestamp
    from rocketbox.cluster.proxy.protos import pb, service
    born = Timestamp()
    born.GetCurrentTime()
    out = []
    for _ in range(count):
        system = pb.SystemProperties(message_id=uuid.uuid4().hex.upper()[:34], born_timestamp=born,
                                     born_host="perf-host", body_encoding=pb.IDENTITY, queue_id=0,
                                     message_type=pb.NORMAL)
        message = pb.Message(topic=pb.Resource(name=topic), system_properties=system, body=BODY)
        out.append(service.SendMessageRequest(messages=[message]).SerializeToString())
    return out


def cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


async def send_phase(servicer, requests: list[bytes], window: int) -> dict:
    from rocketbox.cluster.proxy.protos import Code, service
    parse = service.SendMessageRequest.FromString
    todo = iter(requests)
    failed = 0

    async def sender() -> None:
        nonlocal failed
        for raw in todo:
            answer = await servicer.SendMessage(parse(raw), CallContext(SEND_TIMEOUT_S))
            answer.SerializeToString()
            if answer.status.code != Code.OK:
                failed += 1
    await asyncio.gather(*(sender() for _ in range(window)))
    return {"count": len(requests), "failed": failed}


async def receive_phase(servicer, topic: str, group: str, count: int, receivers: int) -> dict:
    from google.protobuf.duration_pb2 import Duration
    from rocketbox.cluster.proxy.protos import Code, pb, service
    request = service.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=32,
        invisible_duration=Duration(seconds=INVISIBLE_S), long_polling_timeout=Duration(seconds=RECEIVE_POLL_S),
        auto_renew=False).SerializeToString()
    parse_receive = service.ReceiveMessageRequest.FromString
    parse_ack = service.AckMessageRequest.FromString
    received = failed_acks = 0
    deadline = time.monotonic() + PHASE_S_MAX

    async def ack(message) -> None:
        nonlocal failed_acks
        raw = service.AckMessageRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=topic),
            entries=[service.AckMessageEntry(message_id=message.system_properties.message_id,
                                             receipt_handle=message.system_properties.receipt_handle)]
        ).SerializeToString()
        answer = await servicer.AckMessage(parse_ack(raw), CallContext(SEND_TIMEOUT_S))
        answer.SerializeToString()
        if answer.status.code != Code.OK:
            failed_acks += 1

    async def receiver() -> None:
        nonlocal received
        while received < count and time.monotonic() < deadline:
            batch = []
            async for answer in servicer.ReceiveMessage(parse_receive(request), CallContext(RECEIVE_POLL_S + 10)):
                answer.SerializeToString()
                if answer.HasField("message"):
                    batch.append(service.ReceiveMessageResponse.FromString(answer.SerializeToString()).message)
            received += len(batch)
            await asyncio.gather(*(ack(m) for m in batch))
    await asyncio.gather(*(receiver() for _ in range(receivers)))
    return {"count": received, "failed_acks": failed_acks}


async def measured(phase, broker: psutil.Process) -> dict:
    wall, cpu, broker_cpu = time.perf_counter(), time.process_time(), cpu_s(broker)
    result = await phase
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    count = max(result["count"], 1)
    return {**result, "rate": round(result["count"] / wall), "proxy_cpu_us": round(cpu / count * 1e6, 1),
            "broker_cpu_us": round((cpu_s(broker) - broker_cpu) / count * 1e6, 1)}


async def run(cluster: LocalCluster, args) -> None:
    from rocketbox.cluster.proxy.server import MessagingService
    namesrvs = tuple(n.endpoint for n in cluster.topology.namesrvs)
    settings = proxy_settings("127.0.0.1", 1, namesrvs, list(cluster.topology.brokers))
    servicer = MessagingService(settings, asyncio.get_running_loop())
    broker = psutil.Process(cluster.pid("broker-a"))
    config = client_config(cluster.namesrv)
    try:
        for round_ in range(args.rounds):
            topic, group = f"ProxyCost{round_}", f"ProxyCostGroup{round_}"
            create_topic(config, topic)
            await send_phase(servicer, send_request_bytes(topic, 200), args.window)   # routes, caches, warm code
            requests = send_request_bytes(topic, args.count)
            sent = await measured(send_phase(servicer, requests, args.window), broker)
            print(json.dumps({"round": round_, "phase": "send", "window": args.window, **sent}), flush=True)
            if args.no_receive:
                continue
            got = await measured(receive_phase(servicer, topic, group, args.count + 200, args.receivers), broker)
            print(json.dumps({"round": round_, "phase": "receive+ack", "receivers": args.receivers, **got}),
                  flush=True)
    finally:
        servicer.gateway.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--window", type=int, default=64, help="SendMessage calls in flight")
    parser.add_argument("--receivers", type=int, default=2, help="ReceiveMessage loops")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-receive", action="store_true", help="sends only (to profile them alone)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalCluster(tmp, metrics=False, remoting=False) as cluster:
        print(json.dumps({"pid": os.getpid()}), flush=True)
        asyncio.run(run(cluster, args))


if __name__ == "__main__":
    sys.exit(main())
