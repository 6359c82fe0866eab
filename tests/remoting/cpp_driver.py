"""Drives RocketMQ's C++ client (PyPI ``rocketmq`` 0.4.4) in a process of its own.

Run by the interpreter of ``.venv-rocketmq4`` (never imports rocketbox):
``python cpp_driver.py produce|consume '<json spec>'``. Writes one JSON object per line to stdout
(a send's result, a received message) and ends with ``{"done": ...}``. A spec with ``access_key``
and ``secret_key`` (optional ``channel``, the client's default "ALIYUN") signs every request with
the client's own ``set_session_credentials`` (RocketMQ ACL 1.0). Exits through
``os._exit``: the wrapper's C++ destructors can hang or crash at interpreter exit
(../shared/rocketmq-protocol.md §8).
"""

import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def credentials(client, spec):
    if spec.get("access_key") is not None:
        client.set_session_credentials(spec["access_key"], spec.get("secret_key", ""), spec.get("channel", "ALIYUN"))


def produce(spec):
    producer = Producer(spec.get("group", "PID_ROCKETBOX_TEST"), timeout=spec.get("timeout_ms", 3000))
    producer.set_namesrv_addr(spec["namesrv"])
    credentials(producer, spec)
    producer.start()
    if spec.get("gate"):
        # The test's go: a line on stdin (it first brings the broker to the state the sends are for).
        emit({"gate": True})
        sys.stdin.readline()
    for i, m in enumerate(spec["messages"]):
        msg = Message(m["topic"])
        if m.get("tags"):
            msg.set_tags(m["tags"])
        if m.get("keys"):
            msg.set_keys(m["keys"])
        for key, value in (m.get("properties") or {}).items():
            msg.set_property(key, value)
        if m.get("delay_level"):
            msg.set_delay_time_level(m["delay_level"])
        msg.set_body(m["body"])
        try:
            if "order_key" in m:
                result = producer.send_orderly(msg, m["order_key"])
            else:
                result = producer.send_sync(msg)
            emit({"i": i, "status": int(result.status), "msg_id": result.msg_id, "offset": result.offset})
        except Exception as exc:   # noqa: BLE001 - the test judges every failure
            emit({"i": i, "error": str(exc)})
    emit({"done": True})
    producer.shutdown()


def consume(spec):
    lock = threading.Lock()
    state = {"received": 0, "last": time.monotonic()}
    # Fail every delivery made fewer than this many times before: the client sends it back to
    # the broker (CONSUMER_SEND_MSG_BACK). The C API stops a consume batch at its first failure
    # and fails the whole batch, so later messages of that batch never reach this listener then.
    fail_below = spec.get("fail_reconsume_times_below", 0)

    def on_message(msg):
        fail = msg.reconsume_times < fail_below
        record = {"id": _text(msg.id), "topic": _text(msg.topic), "body": _text(msg.body), "tags": _text(msg.tags),
                  "keys": _text(msg.keys), "queue_id": msg.queue_id, "queue_offset": msg.queue_offset,
                  "reconsume_times": msg.reconsume_times, "failed": fail,
                  "properties": {name: _text(msg.get_property(name)) for name in spec.get("show_properties", ())}}
        with lock:
            emit(record)
            state["last"] = time.monotonic()
            if not fail:
                state["received"] += 1
        if fail:
            raise RuntimeError("asked to fail this delivery")

    consumer = PushConsumer(spec["group"], orderly=spec.get("orderly", False))
    consumer.set_namesrv_addr(spec["namesrv"])
    credentials(consumer, spec)
    if spec.get("instance"):
        consumer.set_instance_name(spec["instance"])
    consumer.subscribe(spec["topic"], on_message, spec.get("expression", "*"))
    consumer.start()
    emit({"started": True})
    deadline = time.monotonic() + spec.get("timeout_s", 60)
    expect, quiet_s = spec.get("expect"), spec.get("quiet_s", 2.0)
    while time.monotonic() < deadline:
        with lock:
            enough = expect is not None and state["received"] >= expect
            quiet = time.monotonic() - state["last"] >= quiet_s
        if enough and quiet:
            break
        time.sleep(0.05)
    emit({"done": True, "received": state["received"]})
    consumer.shutdown()


if __name__ == "__main__":
    command, spec = sys.argv[1], json.loads(sys.argv[2])
    try:
        {"produce": produce, "consume": consume}[command](spec)
    except Exception as exc:   # noqa: BLE001
        emit({"done": False, "error": f"{type(exc).__name__}: {exc}"})
    os._exit(0)
