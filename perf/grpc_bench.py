"""RocketMQ 5's official Python client (rocketmq-python-client) measured against the gRPC proxy, run
by ``perf/scenarios/grpc_door.py`` as a child of ``.venv-rocketmq5/bin/python`` (the client and
the proxy's protocol modules share a package name; the bench process must not import it).

    python grpc_bench.py MODE '{"endpoint": ..., "topic": ..., ...}'

Modes, each printing one JSON line:
- ``sync``: ``count`` sends of ``body_bytes`` one at a time after ``warmup``: each one's time in us;
- ``async``: ``count`` sends with at most ``window`` in flight (send_async): count, elapsed s;
- ``receive``: SimpleConsumer receive (``batch`` at a time) and ack each (``ack``: 5.1.2's ``ack_async``
  drops the future it makes and returns None) until ``count`` messages: count, elapsed s from the
  first receive.
Standard library and the client only: this file runs outside the project's environment.
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque


def _config(spec):
    from rocketmq import ClientConfiguration, Credentials
    return ClientConfiguration(spec["endpoint"], Credentials(), request_timeout=10)


def _message(topic: str, body: bytes):
    from rocketmq import Message
    message = Message()
    message.topic = topic
    message.body = body
    return message


def sync_sends(spec) -> dict:
    from rocketmq import Producer
    producer = Producer(_config(spec), (spec["topic"],))
    producer.startup()
    body = b"x" * spec["body_bytes"]
    try:
        for _ in range(spec["warmup"]):
            producer.send(_message(spec["topic"], body))
        latencies = []
        deadline = time.monotonic() + spec["max_s"]
        for _ in range(spec["count"]):
            if time.monotonic() >= deadline:
                break
            started = time.perf_counter()
            producer.send(_message(spec["topic"], body))
            latencies.append((time.perf_counter() - started) * 1e6)
    finally:
        producer.shutdown()
    return {"latencies_us": latencies}


def async_sends(spec) -> dict:
    from rocketmq import Producer
    producer = Producer(_config(spec), (spec["topic"],))
    producer.startup()
    body = b"x" * spec["body_bytes"]
    in_flight: deque = deque()
    try:
        for _ in range(spec["warmup"]):
            producer.send(_message(spec["topic"], body))
        started = time.perf_counter()
        deadline = time.monotonic() + spec["max_s"]
        sent = 0
        while sent < spec["count"] and time.monotonic() < deadline:
            if len(in_flight) >= spec["window"]:
                in_flight.popleft().result()
            in_flight.append(producer.send_async(_message(spec["topic"], body)))
            sent += 1
        while in_flight:
            in_flight.popleft().result()
        elapsed = time.perf_counter() - started
    finally:
        producer.shutdown()
    return {"count": sent, "elapsed_s": elapsed}


def receive(spec) -> dict:
    from rocketmq import FilterExpression, SimpleConsumer
    consumer = SimpleConsumer(_config(spec), spec["group"], {spec["topic"]: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    received = 0
    started = None
    deadline = time.monotonic() + spec["max_s"]
    try:
        while received < spec["count"] and time.monotonic() < deadline:
            messages = consumer.receive(spec["batch"], 30)
            if started is None and messages:
                started = time.perf_counter()
            for message in messages:
                consumer.ack(message)
            received += len(messages)
        elapsed = time.perf_counter() - (started or time.perf_counter())
    finally:
        consumer.shutdown()
    return {"count": received, "elapsed_s": elapsed}


MODES = {"sync": sync_sends, "async": async_sends, "receive": receive}

if __name__ == "__main__":
    mode, spec = sys.argv[1], json.loads(sys.argv[2])
    sys.stdout.write(json.dumps(MODES[mode](spec)) + "\n")
