"""The native gRPC door reads a call's :path, grpc-timeout and x-mq-client-id from its HEADERS event's
fields without making its whole metadata (``native_door.split_fields``, ``CallContext.metadata_value``);
what it reads must be what the whole metadata (``headers_of``, grpc.aio's view) says, whatever the
fields hold: repeated names, a value equal to a name, ``-bin`` keys, names that are not metadata."""

from __future__ import annotations

import random

from rocketbox.cluster._native.h2 import fields_of
from rocketbox.cluster.proxy.calls import CLIENT_ID_KEY, call_of
from rocketbox.cluster.proxy.native_door import CallContext, first_value, headers_of, split_fields

NODE_ACK = [(":method", "POST"), (":scheme", "http"), (":path", "/apache.rocketmq.v2.MessagingService/AckMessage"),
            (":authority", "127.0.0.1:8081"), ("content-type", "application/grpc"), ("te", "trailers"),
            ("grpc-timeout", "2999m"), ("x-mq-protocol", "v2"), ("x-mq-client-id", "host@123@0@abc"),
            ("x-mq-request-id", "1b4e28ba-2fa1-11d2-883f-0016d3cca427"), ("trace-bin", "AAEC")]


def payload_of(fields) -> bytes:
    return b"".join(name.encode("latin-1") + b"\0" + value.encode("latin-1") + b"\0" for name, value in fields)


def context_of(fields) -> CallContext:
    payload = payload_of(fields)
    return CallContext(payload, *split_fields(payload), "ipv4:127.0.0.1:5", None)


def assert_reads_agree(fields) -> None:
    payload = payload_of(fields)
    parts, names = split_fields(payload)
    path, timeout, metadata = headers_of(fields_of(payload))
    assert (first_value(parts, names, b":path") or "") == path
    assert first_value(parts, names, b"grpc-timeout") == timeout
    context = context_of(fields)
    assert context.invocation_metadata() == metadata
    for name in {name for name, _ in fields} | {CLIENT_ID_KEY, "absent", "trace-bin", ":path", "te"}:
        expected = next((value for key, value in metadata if key == name and isinstance(value, str)), None)
        if name.endswith("-bin"):
            expected = None   # a -bin value is bytes: never a client id
        assert context.metadata_value(name) == expected, name


def test_a_node_clients_ack_call():
    assert_reads_agree(NODE_ACK)
    call = call_of(context_of(NODE_ACK))
    assert call.client_id == "host@123@0@abc" and call.peer_host == "127.0.0.1:5"
    assert context_of(NODE_ACK).invocation_metadata()[-1] == ("trace-bin", b"\x00\x01\x02")


def test_values_equal_to_names_repeats_and_empty_fields_read_as_the_whole_metadata_says():
    tricky = [(":authority", ":path"), (":path", "/first"), (":path", "/second"), ("x", "x-mq-client-id"),
              ("x-mq-client-id", ""), ("x-mq-client-id", "later"), ("grpc-timeout", "grpc-timeout"), ("", "")]
    assert_reads_agree(tricky)
    assert_reads_agree([])
    assert_reads_agree([("x-mq-client-id-bin", "AAEC"), ("x-mq-client-id", "real")])
    names = [":path", ":authority", "grpc-timeout", "te", "x-mq-client-id", "a", "b-bin", "content-type", ""]
    rng = random.Random(7)
    for _ in range(500):
        fields = [(rng.choice(names), rng.choice(names + ["1S", "v", "/p"])) for _ in range(rng.randint(0, 8))]
        assert_reads_agree(fields)
