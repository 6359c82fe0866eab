"""Runs RocketMQ 5's official Python client (rocketmq-python-client 5.1.2) against a proxy, as a child
process of the tests, with ``.venv-rocketmq5/bin/python`` (the test process cannot import that client:
the proxy's own modules come from the same package, and a test must see the client as a user would).

    python grpc_driver.py COMMAND '{spec as JSON}'

Prints one JSON object per line: ``{"started": true}`` once the client is up, one line per event,
and ``{"done": true}`` (or ``{"done": false, "error": ...}``) last. Commands: produce, transaction,
simple, push, raw (requests built from JSON through the generated stub), idle_streams, lite.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import threading
import time
import uuid


def emit(**line) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


def configuration(spec):
    """The client's configuration; ``access_key``/``secret_key`` in the spec become its own Credentials
    (it then signs every call's ``authorization`` header)."""
    from rocketmq import ClientConfiguration, Credentials
    credentials = Credentials(spec.get("access_key", ""), spec.get("secret_key", ""))
    return ClientConfiguration(spec["endpoint"], credentials, request_timeout=spec.get("request_timeout_s", 3))


def message_of(spec: dict, topic: str):
    from rocketmq import Message
    message = Message()
    message.topic = topic
    message.body = spec["body"].encode()
    if spec.get("tag"):
        message.tag = spec["tag"]
    for key in ([spec["keys"]] if isinstance(spec.get("keys"), str) else spec.get("keys") or []):
        message.keys = key   # the setter adds one key
    for key, value in (spec.get("properties") or {}).items():
        message.add_property(key, value)
    if spec.get("group"):
        message.message_group = spec["group"]
    if spec.get("delay_s"):
        message.delivery_timestamp = int(time.time()) + int(spec["delay_s"])
    if spec.get("priority") is not None:
        message.priority = spec["priority"]
    if spec.get("lite_topic"):
        message.lite_topic = spec["lite_topic"]
    return message


def error_line(exc) -> dict:
    code = getattr(exc, "code", None)
    if callable(code):   # a grpc error's code() is a method giving a StatusCode
        code = str(code())
    return {"error": f"{type(exc).__name__}: {exc}", "code": code}


def received_line(message, **extra) -> dict:
    return {"message_id": message.message_id, "body": message.body.decode(errors="replace"), "tag": message.tag,
            "keys": sorted(message.keys or []), "properties": dict(message.properties or {}),
            "topic": message.topic, "attempt": message.delivery_attempt, "group": message.message_group,
            "delivery_ms": message.delivery_timestamp, "born_ms": message.born_timestamp, "at": time.time(),
            "corrupted": message.corrupted, "priority": message.priority, "type": message.message_type,
            "lite_topic": message.lite_topic, **extra}


# ---------------------------------------------------------------- producers

def produce(spec: dict) -> None:
    from rocketmq import Producer
    producer = Producer(configuration(spec), (spec["topic"],), tls_enable=spec.get("tls", False))
    producer.startup()
    emit(started=True)
    try:
        if spec.get("in_flight"):   # every message sent at once (send_async), the receipts in order
            futures = [(item, producer.send_async(message_of(item, spec["topic"]))) for item in spec["messages"]]
            for item, future in futures:
                try:
                    receipt = future.result(timeout=60)
                    emit(sent=item["body"], message_id=receipt.message_id, offset=receipt.offset, at=time.time())
                except Exception as exc:
                    emit(sent=None, body=item["body"], **error_line(exc))
            return
        for item in spec["messages"]:
            try:
                message = message_of(item, spec["topic"])
                receipt = producer.send(message)
                emit(sent=item["body"], message_id=receipt.message_id, offset=receipt.offset,
                     delivery_s=message.delivery_timestamp, at=time.time(), recall_handle=receipt.recall_handle)
            except Exception as exc:   # a refusal is an outcome the test checks
                emit(sent=None, body=item["body"], **error_line(exc))
                continue
            if "recall" in item:   # the receipt's handle (True) or the one given, recalled at once
                recall(producer, spec["topic"], item["body"],
                       receipt.recall_handle if item["recall"] is True else item["recall"])
        for handle in spec.get("recall_later", ()):
            time.sleep(spec.get("recall_after_s", 0))
            recall(producer, spec["topic"], None, handle)
    finally:
        producer.shutdown()


def recall(producer, topic: str, body, handle: str) -> None:
    """RecallMessage through the client's own ``recall_message``; its answer or its refusal."""
    try:
        emit(recalled=body, message_id=producer.recall_message(topic, handle), handle=handle)
    except Exception as exc:
        emit(recalled=None, body=body, handle=handle, **error_line(exc))


def transaction(spec: dict) -> None:
    """Half messages ended by commit, rollback or nothing (``action``); the checker answers
    ``checker`` for every check and reports it; runs until ``checks`` checks came or ``wait_s``."""
    from rocketmq import Producer, TransactionChecker, TransactionResolution
    answer = TransactionResolution.COMMIT if spec.get("checker", "commit") == "commit" else \
        TransactionResolution.ROLLBACK
    checked = []

    class Checker(TransactionChecker):
        def check(self, message):
            checked.append(message.message_id)
            emit(checked=message.message_id, body=message.body.decode(errors="replace"), topic=message.topic)
            return answer

    producer = Producer(configuration(spec), (spec["topic"],), Checker())
    producer.startup()
    emit(started=True)
    try:
        for item in spec["messages"]:
            tx = producer.begin_transaction()
            receipt = producer.send(message_of(item, spec["topic"]), tx)
            emit(half=item["body"], message_id=receipt.message_id, transaction_id=receipt.transaction_id)
            if item.get("action") == "commit":
                tx.commit()
            elif item.get("action") == "rollback":
                tx.rollback()
        deadline = time.time() + spec.get("wait_s", 0)
        while len(checked) < spec.get("checks", 0) and time.time() < deadline:
            time.sleep(0.1)
        time.sleep(spec.get("linger_s", 0.5))   # the checker's EndTransaction goes out after check() returns
    finally:
        producer.shutdown()


# ---------------------------------------------------------------- consumers

def simple(spec: dict) -> None:
    """Receive until ``expect`` deliveries (redeliveries count) or ``max_s``. Per message: ack on
    delivery ``ack_on_attempt`` (0: never); ``change_invisible_s``: on the first delivery, change
    its invisible duration instead; ``ack_after_s``: wait that long before acking."""
    from rocketmq import FilterExpression, SimpleConsumer
    from rocketmq.grpc_protocol import FilterType
    expression = FilterExpression(spec["sql"], FilterType.SQL) if spec.get("sql") else \
        FilterExpression(spec.get("expression", "*"))
    consumer = SimpleConsumer(configuration(spec), spec["group"], {spec["topic"]: expression},
                              await_duration=spec.get("await_s", 2), tls_enable=spec.get("tls", False))
    consumer.startup()
    emit(started=True)
    deliveries = receives = 0
    deadline = time.time() + spec.get("max_s", 30)
    try:
        while deliveries < spec.get("expect", 1) and time.time() < deadline:
            try:
                messages = consumer.receive(spec.get("batch", 16), spec.get("invisible_s", 5))
            except Exception as exc:
                emit(receive_error=True, **error_line(exc))
                time.sleep(0.2)
                continue
            receives += 1
            for message in messages:
                deliveries += 1
                emit(received=received_line(message, receive=receives))
                if spec.get("change_invisible_s") and message.delivery_attempt == 1:
                    try:
                        consumer.change_invisible_duration(message, spec["change_invisible_s"])
                        emit(changed=message.message_id)
                    except Exception as exc:
                        emit(changed=None, message_id=message.message_id, **error_line(exc))
                    continue
                ack_on = spec.get("ack_on_attempt", 1)
                if ack_on and message.delivery_attempt >= ack_on:
                    time.sleep(spec.get("ack_after_s", 0))
                    try:
                        consumer.ack(message)
                        emit(acked=message.message_id)
                    except Exception as exc:
                        emit(acked=None, message_id=message.message_id, **error_line(exc))
    finally:
        consumer.shutdown()


def push(spec: dict) -> None:
    """A PushConsumer whose listener fails a message's first ``fail_first`` deliveries, until
    ``expect`` successful consumptions or ``max_s``."""
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer
    consumed = threading.Event()
    successes = []

    class Listener(MessageListener):
        def consume(self, message):
            failed = message.delivery_attempt <= spec.get("fail_first", 0)
            started = time.time()
            time.sleep(spec.get("consume_s", 0))   # a slow listener
            emit(consumed=received_line(message, result="FAILURE" if failed else "SUCCESS", started=started))
            if failed:
                return ConsumeResult.FAILURE
            successes.append(message.message_id)
            if len(successes) >= spec.get("expect", 1):
                consumed.set()
            return ConsumeResult.SUCCESS

    consumer = PushConsumer(configuration(spec), spec["group"], Listener(),
                            {spec["topic"]: FilterExpression(spec.get("expression", "*"))})
    consumer.startup()
    emit(started=True)
    consumed.wait(spec.get("max_s", 60))
    time.sleep(spec.get("linger_s", 1.0))   # the last acks go out after consume() returns
    consumer.shutdown()


# ---------------------------------------------------------------- raw requests

def _stub(endpoint: str, root_cert: str = ""):
    """A channel to the proxy: over TLS trusting ``root_cert`` (a PEM file) when one is given."""
    import grpc
    from rocketmq.grpc_protocol import service_pb2_grpc
    options = [("grpc.max_send_message_length", 64 * 1024 * 1024)]
    if root_cert:
        with open(root_cert, "rb") as f:
            channel = grpc.secure_channel(endpoint, grpc.ssl_channel_credentials(root_certificates=f.read()), options)
    else:
        channel = grpc.insecure_channel(endpoint, options=options)
    return channel, service_pb2_grpc.MessagingServiceStub(channel)


def _metadata(client_id: str | None, credentials: dict | None = None, endpoint: str = "") -> list:
    """A call's metadata; with ``credentials`` (access_key, secret_key) the client's own signer adds
    its ``authorization`` and ``x-mq-date-time`` headers (``date_time`` in them: that date signed
    instead of now, with the client's own HMAC)."""
    metadata = [("x-mq-client-id", client_id)] if client_id else []
    if credentials:
        from rocketmq.v5.util.signature import Signature
        signed = Signature.metadata(configuration({"endpoint": endpoint, **credentials}), client_id or "raw")
        given = credentials.get("date_time")
        for key, value in signed:
            if given and key == "x-mq-date-time":
                value = given
            elif given and key == "authorization":
                value = value[:value.rindex("Signature=")] + "Signature=" + Signature.sign(credentials["secret_key"],
                                                                                            given)
            if key in ("authorization", "x-mq-date-time"):
                metadata.append((key, value))
    return metadata


def _fill(value, names: dict):
    """Strings "{name}" in a request template replaced by what earlier steps captured."""
    if isinstance(value, str) and value.startswith("{") and value.endswith("}") and value[1:-1] in names:
        return names[value[1:-1]]
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    return value


def raw(spec: dict) -> None:
    """Steps of ``{"rpc": name, "request": {...}, "client_id": ..., "as": capture-name}`` (a body
    may be given as ``"body_bytes": n``; ``"credentials": {"access_key", "secret_key"}`` signs it),
    ``{"sleep": s}``, ``{"gate": true}`` (wait for a line on stdin, the test's go) or
    ``{"telemetry": [settings...]}``."""
    from google.protobuf.json_format import MessageToDict, ParseDict
    from rocketmq.grpc_protocol import service_pb2
    channel, stub = _stub(spec["endpoint"], spec.get("root_cert", ""))
    emit(started=True)
    names: dict = {}
    client_id = spec.get("client_id", f"raw@{os.getpid()}@{uuid.uuid4().hex[:8]}")
    for step in spec["steps"]:
        if "sleep" in step:
            time.sleep(step["sleep"])
            continue
        if "gate" in step:
            emit(gate=True)
            sys.stdin.readline()
            continue
        metadata = _metadata(step.get("client_id", client_id), step.get("credentials"), spec["endpoint"])
        if "junk" in step:
            # Bytes that are no protobuf message, to a method's path: gRPC itself must refuse them.
            method = channel.unary_unary(f"/apache.rocketmq.v2.MessagingService/{step['method']}")
            codes = collections.Counter()
            for i in range(step["junk"]):
                try:
                    # An 11-byte varint starts it: no protobuf parser takes that as a field tag.
                    method(b"\xff" * 11 + os.urandom(i % 64), metadata=metadata, timeout=5)
                    codes["answered"] += 1
                except Exception as exc:
                    codes[exc.code().name if hasattr(exc, "code") else type(exc).__name__] += 1
            emit(step=step.get("name", "junk"), codes=dict(codes))
            continue
        if "telemetry" in step:
            commands = [ParseDict(c, service_pb2.TelemetryCommand()) for c in step["telemetry"]]
            call = stub.Telemetry(iter(commands), metadata=metadata, timeout=step.get("timeout_s", 3))
            answers, error = [], None
            try:
                for answer in call:
                    answers.append(MessageToDict(answer))
                    if len(answers) >= len(commands):
                        break
            except Exception as exc:   # grpc.RpcError: the stream was refused
                error = {"grpc_code": exc.code().name, "details": exc.details()} if hasattr(exc, "code") else str(exc)
            call.cancel()
            emit(step=step.get("name", "Telemetry"), responses=answers, error=error)
            continue
        request_type = getattr(service_pb2, step["rpc"] + "Request")
        request = ParseDict(_fill(step["request"], names), request_type())
        if "body_bytes" in step:
            request.messages[0].body = b"x" * step["body_bytes"]
        method = getattr(stub, step["rpc"])
        if step.get("repeat"):
            codes = collections.Counter()
            for _ in range(step["repeat"]):
                codes[MessageToDict(method(request, metadata=metadata, timeout=10))["status"]["code"]] += 1
            emit(step=step.get("name", step["rpc"]), codes=dict(codes))
            continue
        try:
            if step["rpc"] in ("ReceiveMessage", "PullMessage"):   # streams of responses
                responses = [MessageToDict(r) for r in method(request, metadata=metadata,
                                                               timeout=step.get("timeout_s", 30))]
            else:
                responses = [MessageToDict(method(request, metadata=metadata, timeout=step.get("timeout_s", 10)))]
        except Exception as exc:
            emit(step=step.get("name", step["rpc"]), grpc_error=f"{exc.code().name}: {exc.details()}"
                 if hasattr(exc, "code") else str(exc))
            continue
        for response in responses:
            message = response.get("message")
            if message and step.get("as"):
                names.setdefault(step["as"] + "_handle", message["systemProperties"]["receiptHandle"])
                names.setdefault(step["as"] + "_id", message["systemProperties"]["messageId"])
        emit(step=step.get("name", step["rpc"]), responses=responses)
    channel.close()


def idle_streams(spec: dict) -> None:
    """Open ``count`` Telemetry streams (on ``channels`` connections) that send settings once and
    then stay silent, report how many the proxy answered, and hold them until stdin closes."""
    import grpc
    from google.protobuf.json_format import ParseDict
    from rocketmq.grpc_protocol import service_pb2
    channels = [_stub(spec["endpoint"]) for _ in range(spec.get("channels", 4))]
    emit(started=True)
    calls, answered, refused = [], 0, 0
    release = threading.Event()
    for i in range(spec["count"]):
        command = ParseDict(spec["settings"], service_pb2.TelemetryCommand())

        def requests(first=command):
            yield first
            release.wait()
        call = channels[i % len(channels)][1].Telemetry(requests(), metadata=_metadata(f"idle@{i}@{os.getpid()}"))
        calls.append(call)
        try:
            next(call)
            answered += 1
        except grpc.RpcError as exc:
            refused += 1
            if refused == 1:
                emit(first_refusal=f"{exc.code().name}: {exc.details()}")
    emit(opened=spec["count"], answered=answered, refused=refused)
    sys.stdin.read()
    release.set()
    for call in calls:
        call.cancel()


def lite(spec: dict) -> None:
    """RocketMQ 5.5's Lite clients: a LiteSimpleConsumer (or with ``"push": true`` a LitePushConsumer)
    bound to ``topic`` runs ``steps``: ``{"subscribe": lite}``, ``{"unsubscribe": lite}``, ``{"sync_all": true}``,
    ``{"produce": [message specs]}`` (a Producer of the topic sends them), ``{"receive": n, "max_s": s}``
    (receive and ack until n messages, or consumed by the push listener), ``{"settings": true}`` (the
    quota and size the proxy granted); each outcome (or error) one line."""
    from rocketmq import LitePushConsumer, MessageListener, Producer
    from rocketmq.v5.consumer.simple.lite_simple_consumer import LiteSimpleConsumer
    consumed: list = []

    class Listener(MessageListener):
        def consume(self, message):
            consumed.append(message.message_id)
            emit(received=received_line(message))
            from rocketmq import ConsumeResult
            return ConsumeResult.SUCCESS

    if spec.get("push"):
        consumer = LitePushConsumer(configuration(spec), spec["group"], spec["topic"], Listener())
    else:
        consumer = LiteSimpleConsumer(spec["topic"], configuration(spec), spec["group"],
                                      await_duration=spec.get("await_s", 2))
    try:
        consumer.startup()
    except Exception as exc:
        emit(started=False, **error_line(exc))
        return
    # The 5.1.2 LiteSimpleConsumer's startup does not wait for the proxy's settings (its push sibling
    # does): until they come its lite quota is 0 and subscribe_lite refuses. Wait as a user must.
    settled = consumer._init_settings_event.wait(10)
    emit(started=True, settings=settled)
    producer = None
    try:
        for step in spec["steps"]:
            if "subscribe" in step or "unsubscribe" in step:
                name = "subscribe" if "subscribe" in step else "unsubscribe"
                try:
                    getattr(consumer, f"{name}_lite")(step[name])
                    emit(step=f"{name}:{step[name]}", ok=True)
                except Exception as exc:
                    emit(step=f"{name}:{step[name]}", ok=False, **error_line(exc))
            elif "sync_all" in step:
                # 5.1.2's subscribe_lite sends its lite topic as a character set (lite_topic_set.extend(str)):
                # the server then holds "s", "e", ... until the full sync (COMPLETE_ADD of the names the
                # client kept), every 30 s or at once through subscribe_lite_all.
                consumer.subscribe_lite_all()
                emit(step="sync_all", ok=True)
            elif "settings" in step:
                manager = consumer._LiteSimpleConsumer__subscription_manager if not spec.get("push") \
                    else consumer._LitePushConsumer__subscription_manager
                emit(step="settings", quota=manager.lite_subscription_quota, max_size=manager.max_lite_topic_size,
                     lite_topics=sorted(manager.lite_topics))
            elif "produce" in step:
                if producer is None:
                    producer = Producer(configuration(spec), (spec["topic"],))
                    producer.startup()
                for item in step["produce"]:
                    try:
                        receipt = producer.send(message_of(item, spec["topic"]))
                        emit(sent=item["body"], message_id=receipt.message_id, lite_topic=item.get("lite_topic"))
                    except Exception as exc:
                        emit(sent=None, body=item["body"], **error_line(exc))
            elif "receive" in step:
                deadline = time.time() + step.get("max_s", 20)
                got = 0
                while got < step["receive"] and time.time() < deadline:
                    if spec.get("push"):
                        got = len(consumed)
                        time.sleep(0.1)
                        continue
                    try:
                        messages = consumer.receive(16, 10)
                    except Exception as exc:
                        emit(receive_error=True, **error_line(exc))
                        time.sleep(0.2)
                        continue
                    for message in messages:
                        got += 1
                        emit(received=received_line(message))
                        consumer.ack(message)
                emit(step="receive", got=got)
    finally:
        if producer is not None:
            producer.shutdown()
        consumer.shutdown()


COMMANDS = {"produce": produce, "transaction": transaction, "simple": simple, "push": push, "raw": raw,
            "idle_streams": idle_streams, "lite": lite}


def main() -> None:
    command, spec = sys.argv[1], json.loads(sys.argv[2])
    try:
        COMMANDS[command](spec)
        emit(done=True)
    except Exception as exc:
        import traceback
        emit(done=False, error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc()[-3000:])
    finally:
        # The client's threads (schedulers, gRPC's) need not be waited for.
        sys.stdout.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
