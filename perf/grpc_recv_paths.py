"""The native gRPC door's receive + ack steps a message, in process (issue 33 item 2): each step the
way the session of 2026-11-28 e left it (protobuf objects, a response a C call, the whole metadata a
call) against the way it is now (``response_wire`` bytes, one C call a receive's run, the fields a
call needs read from its split HEADERS; since the session of 2026-11-28 h a record's response
written by ``received_wire``'s C writer, not built by ``messages.incoming``), interleaved, best of
``--repeat`` runs of ``--number`` each. No sockets, no broker: what the proxy's own Python costs a
message, out of reach of the machine's other load that spreads the end-to-end figures (``grpc_front_ab``).

    .venv/bin/python -m rocketbox.perf.grpc_recv_paths [--number 20000] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import timeit

from rocketbox.cluster._native.h2 import H2Connection, fields_of
from rocketbox.cluster.message import record_format
from rocketbox.cluster.proxy import messages, received_wire, response_wire
from rocketbox.cluster.proxy.calls import call_of
from rocketbox.cluster.proxy.native_door import CallContext, first_value, headers_of, split_fields
from rocketbox.cluster.proxy.protos import Code, pb, service

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
RUN = 32   # the Node client's receive batch
# An AckMessage call of the Node.js 5.x client, as the door's HEADERS event carries it.
NODE_ACK_FIELDS = [
    (":method", "POST"), (":scheme", "http"), (":path", "/apache.rocketmq.v2.MessagingService/AckMessage"),
    (":authority", "127.0.0.1:8081"), ("content-type", "application/grpc"), ("te", "trailers"),
    ("grpc-timeout", "2999m"), ("x-mq-protocol", "v2"), ("x-mq-client-id", "host@4242@0@m2b3k1"),
    ("x-mq-date-time", "20261128T151515Z"), ("x-mq-request-id", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"),
    ("x-mq-language", "HTTP"), ("x-mq-client-version", "5.0.0"), ("grpc-accept-encoding", "identity,deflate,gzip"),
    ("accept-encoding", "identity"), ("user-agent", "grpc-node-js/1.8.0")]
HANDLE = "v1 1234 1764342915000 60000 0 2 7 123456 broker-a"


def _sample_message() -> pb.Message:
    message = pb.Message(body=b"x" * 100)
    message.topic.name = "GrpcFrontAB"
    system = message.system_properties
    system.message_id, system.tag, system.receipt_handle = "7F0000010B6D1B2C3D4E5F60718293A4", "TagA", HANDLE
    system.body_digest.type, system.body_digest.checksum = pb.MD5, "0" * 32
    system.born_host, system.store_host = "127.0.0.1:54321", "127.0.0.1:10911"
    system.born_timestamp.seconds = system.store_timestamp.seconds = 1764342915
    system.queue_id, system.queue_offset, system.delivery_attempt = 2, 7, 1
    return message


def _stream_connection() -> H2Connection:
    """A connection with one open request stream, its window wide open, its output dropped by callers."""
    conn = H2Connection(100, 1 << 20, 2 << 20)
    conn.feed(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
    path = b"/apache.rocketmq.v2.MessagingService/ReceiveMessage"
    block = b"\x83\x86\x04" + bytes([len(path)]) + path
    conn.feed(len(block).to_bytes(3, "big") + b"\x01\x05\x00\x00\x00\x01" + block)
    conn.feed(b"\x00\x00\x04\x08\x00\x00\x00\x00\x00" + (1 << 30).to_bytes(4, "big"))
    conn.feed(b"\x00\x00\x04\x08\x00\x00\x00\x00\x01" + (1 << 30).to_bytes(4, "big"))
    return conn


def receive_steps():
    """A receive's 32 messages (each already a Message) written to the stream, then the output taken."""
    messages = [_sample_message() for _ in range(RUN)]
    conn = _stream_connection()

    def drop():
        conn.sent(len(conn.output()))

    def one_at_a_time():
        for message in messages:
            conn.message(1, service.ReceiveMessageResponse(message=message).SerializeToString())
            conn.unsent()
        drop()

    def as_a_run():
        conn.messages(1, [response_wire.receive_message(message.SerializeToString()) for message in messages])
        conn.unsent()
        drop()
    return one_at_a_time, as_a_run, RUN


def ack_answer_steps():
    """An AckMessage call's answer (one entry, OK), made and serialized."""
    request = service.AckMessageRequest(entries=[service.AckMessageEntry(message_id="ID", receipt_handle=HANDLE)])
    ok = pb.Status(code=Code.OK, message="OK")
    ok_bytes = response_wire.status(Code.OK, "OK")

    def objects():
        entries = [service.AckMessageResultEntry(message_id=e.message_id, receipt_handle=e.receipt_handle, status=ok)
                   for e in request.entries]
        return service.AckMessageResponse(status=ok, entries=entries).SerializeToString()

    def wire_bytes():
        return response_wire.ack_message(ok_bytes, [response_wire.ack_entry(e.message_id, e.receipt_handle, ok_bytes)
                                                    for e in request.entries])
    assert objects() == wire_bytes()
    return objects, wire_bytes, 1


def call_header_steps():
    """A call's :path, grpc-timeout and client id (calls.call_of) from its HEADERS event."""
    payload = b"".join(n.encode() + b"\0" + v.encode() + b"\0" for n, v in NODE_ACK_FIELDS)

    class WholeMetadata:   # the context as it was: the metadata made for every call
        def __init__(self, metadata):
            self.metadata = metadata

        def invocation_metadata(self):
            return self.metadata

        def peer(self):
            return "ipv4:127.0.0.1:5"

        def time_remaining(self):
            return None

    def whole_metadata():
        path, timeout, metadata = headers_of(fields_of(payload))
        return call_of(WholeMetadata(metadata))

    def split():
        parts, names = split_fields(payload)
        first_value(parts, names, b":path")
        first_value(parts, names, b"grpc-timeout")
        return call_of(CallContext(payload, parts, names, "ipv4:127.0.0.1:5", None))
    assert whole_metadata() == split()
    return whole_metadata, split, 1


def record_steps():
    """A popped record (as the Node client's sends store it) as its ReceiveMessageResponse's bytes: the
    Message built by ``messages.incoming`` and serialized (the session of 2026-11-28 f) against the C
    writer (``received_wire``)."""
    host = bytes((127, 0, 0, 1)) + (10911).to_bytes(4, "big")
    properties = b"UNIQ_KEY\x017F0000010B6D1B2C3D4E5F6071829300\x02__BORNHOST\x01127.0.0.1\x02" \
                 b"BORN_TIMESTAMP\x011764342915123\x02"
    record = next(record_format.iter_records(record_format.encode(
        queue_id=2, flag=0, queue_offset=7, phys_offset=12345, sys_flag=0, born_timestamp_ms=1764342915123,
        born_host=host, store_timestamp_ms=1764342915200, store_host=host, reconsume_times=0,
        prepared_transaction_offset=0, body=b"x" * 100, topic=b"GrpcFrontAB", properties=properties)))
    out = received_wire.Buffer()

    def objects():
        return response_wire.receive_message(messages.incoming(
            record, receipt_handle=HANDLE, delivery_attempt=1, topic="GrpcFrontAB").SerializeToString())

    def c_writer():
        return received_wire.received(record, HANDLE, 1, "GrpcFrontAB", out)
    assert objects() == c_writer()
    return objects, c_writer, 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=20_000, help="calls of a step a run (a receive counts 32)")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    for name, steps in (("receive: a record as its response", record_steps),
                        ("receive: a message written", receive_steps), ("ack: a call's answer", ack_answer_steps),
                        ("ack: a call's headers and caller", call_header_steps)):
        before, after, per = steps()
        number = max(1, args.number // per)
        best = {"before": float("inf"), "after": float("inf")}
        for _ in range(args.repeat):   # interleaved: the machine's load falls on both alike
            best["before"] = min(best["before"], timeit.timeit(before, number=number) / (number * per) * 1e6)
            best["after"] = min(best["after"], timeit.timeit(after, number=number) / (number * per) * 1e6)
        print(json.dumps({"step": name, "before_us": round(best["before"], 2), "after_us": round(best["after"], 2),
                          "saved_us": round(best["before"] - best["after"], 2)}), flush=True)


if __name__ == "__main__":
    main()
