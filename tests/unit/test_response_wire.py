"""Golden tests of ``cluster/proxy/response_wire.py``: the responses the native door writes without
protobuf objects are byte for byte what the protobuf library serializes for the same response."""

from __future__ import annotations

import random

import pytest

from rocketbox.cluster.proxy import response_wire as wire
from rocketbox.cluster.proxy.protos import Code, pb, service


def library_status(code: int, message: str) -> bytes:
    return pb.Status(code=code, message=message).SerializeToString()


def test_golden_bytes_of_a_received_message_and_an_ack():
    message = pb.Message()
    message.topic.name = "T"
    message.system_properties.message_id = "ID"
    message.body = b"hi"
    assert wire.receive_message(message.SerializeToString()) == bytes.fromhex("120f0a031201541a041a02494422026869")
    ack = wire.ack_message(wire.status(Code.OK, "OK"),
                           [wire.ack_entry("m1", "v1 h", wire.status(Code.INVALID_RECEIPT_HANDLE, "expired"))])
    assert ack == bytes.fromhex("0a0808a09c0112024f4b12190a026d311204763120681a0d08cdb802120765787069726564")
    assert service.AckMessageResponse.FromString(ack) == service.AckMessageResponse(
        status=pb.Status(code=Code.OK, message="OK"),
        entries=[service.AckMessageResultEntry(message_id="m1", receipt_handle="v1 h", status=pb.Status(
            code=Code.INVALID_RECEIPT_HANDLE, message="expired"))])


@pytest.mark.parametrize("value", [0, 1, 127, 128, 300, 16_383, 16_384, 2 ** 21, 2 ** 31 - 1, 2 ** 63])
def test_varints_are_protobufs(value):
    if value < 2 ** 22:   # a length's varint, as the library writes it before a field's bytes (Message.body: 4)
        field = b"\x22" + wire.varint(value) + b"x" * value if value else b""   # proto3 leaves out empty bytes
        assert pb.Message(body=b"x" * value).SerializeToString() == field
    else:                 # a large enum value, as the library writes it (Status.code: 1)
        code = value if value < 2 ** 31 else 0
        assert pb.Status(code=code).SerializeToString() == (b"\x08" + wire.varint(code) if code else b"")
    decoded = sum((byte & 0x7F) << (7 * i) for i, byte in enumerate(wire.varint(value)))
    assert decoded == value and all(b & 0x80 for b in wire.varint(value)[:-1]) and wire.varint(value)[-1] < 0x80


def test_a_message_of_every_size_is_wrapped_as_the_library_wraps_it():
    rng = random.Random(33)
    for size in (0, 1, 100, 126, 127, 128, 4_000, 16_384, 70_000, 2_100_000):
        message = pb.Message(body=rng.randbytes(size))
        message.topic.name = "TopicA"
        expected = service.ReceiveMessageResponse(message=message).SerializeToString()
        assert wire.receive_message(message.SerializeToString()) == expected


def test_statuses_and_acks_match_the_library_on_varied_input():
    rng = random.Random(2)
    texts = ["", "OK", "é ünïcode ✓", "x" * 127, "y" * 128, "z" * 20_000, "v1 1 2 3 0 4 5 6 broker-a"]
    codes = [0, Code.OK, Code.MULTIPLE_RESULTS, Code.INVALID_RECEIPT_HANDLE, Code.INTERNAL_SERVER_ERROR, 1]
    for code in codes:
        for text in texts:
            assert wire.status(code, text) == library_status(code, text)
    for _ in range(200):
        entries = [(rng.choice(texts), rng.choice(texts), rng.choice(codes), rng.choice(texts))
                   for _ in range(rng.randint(0, 5))]
        overall = (rng.choice(codes), rng.choice(texts))
        ours = wire.ack_message(wire.status(*overall), [wire.ack_entry(m, h, wire.status(c, t))
                                                        for m, h, c, t in entries])
        theirs = service.AckMessageResponse(status=pb.Status(code=overall[0], message=overall[1]), entries=[
            service.AckMessageResultEntry(message_id=m, receipt_handle=h, status=pb.Status(code=c, message=t))
            for m, h, c, t in entries]).SerializeToString()
        assert ours == theirs
