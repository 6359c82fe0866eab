"""gRPC messages as the proxy receives them: protobuf messages of the generated classes
(``cluster/proxy/protos.py``, RocketMQ 5's definitions) with random fields, through the proxy's
own conversion and validation (no server: the functions a request meets). A message is taken or
refused with ProxyError; what it takes is stored as properties text that reads back to the same
properties (no separator smuggled in), and the stored record comes back as the same message.
Transaction ids, receipt handles, filter expressions, Telemetry settings and invisible times
likewise."""

from __future__ import annotations

import pytest
from google.protobuf.descriptor import FieldDescriptor
from hypothesis import strategies as st

from rocketbox.cluster import topic_attributes
from rocketbox.cluster.proxy import messages, transactions, validation
from rocketbox.cluster.proxy.client_service import ClientService, StreamEnd
from rocketbox.cluster.proxy.consumer_service import ConsumerService, _millis
from rocketbox.cluster.proxy.protos import pb, service
from rocketbox.cluster.proxy.settings import ProxySettings
from rocketbox.cluster.proxy.status import ProxyError
from rocketbox.cluster.message import record_format as fmt
from rocketbox.cluster.message.properties import decode_properties
from tests.fuzz.budget import run_hypothesis
from tests.store_harness import BORN_HOST, STORE_HOST

# Text as clients send it and as they should not: separators of the stored properties text
# (\x01, \x02), other control characters, whitespace, names the broker gives meaning to.
_tricky_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(("", " ", "TAGS", "DELAY", "3", "TRAN_MSG", "true", "x\x01y", "x\x02DELAY\x013", "\x02",
                     "a|b", "\u0085", "\x7f", "K1 K2", "x" * 70, "127.0.0.1:8", "\U0001F600")),
    st.lists(st.sampled_from(("a", "\x01", "\x02", " ", "DELAY", "=", "TRAN_MSG", "true", "\t")), max_size=6)
    .map("".join))
_I32, _I64 = (-(1 << 31), (1 << 31) - 1), (-(1 << 63), (1 << 63) - 1)
_U32, _U64 = (0, (1 << 32) - 1), (0, (1 << 64) - 1)
_INTS = {FieldDescriptor.TYPE_INT32: _I32, FieldDescriptor.TYPE_SINT32: _I32, FieldDescriptor.TYPE_SFIXED32: _I32,
         FieldDescriptor.TYPE_UINT32: _U32, FieldDescriptor.TYPE_FIXED32: _U32, FieldDescriptor.TYPE_INT64: _I64,
         FieldDescriptor.TYPE_SINT64: _I64, FieldDescriptor.TYPE_SFIXED64: _I64, FieldDescriptor.TYPE_UINT64: _U64,
         FieldDescriptor.TYPE_FIXED64: _U64}
_DEPTH_MAX = 3


def _scalar(field) -> st.SearchStrategy:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return _tricky_text
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.one_of(st.binary(max_size=40), st.sampled_from((b"\x1f\x8b\x08\x00bad", b"x\x9c\x03\x00")))
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return st.floats(width=32 if kind == FieldDescriptor.TYPE_FLOAT else 64)
    if kind == FieldDescriptor.TYPE_ENUM:
        return st.one_of(st.sampled_from([v.number for v in field.enum_type.values]), st.integers(-3, 99))
    if field.message_type is not None and field.message_type.full_name == "google.protobuf.Timestamp":
        return st.builds(lambda s, n: {"seconds": s, "nanos": n}, st.integers(-(1 << 40), 1 << 40),
                         st.integers(0, 999_999_999))
    if field.message_type is not None and field.message_type.full_name == "google.protobuf.Duration":
        return st.builds(lambda s, n: {"seconds": s, "nanos": n}, st.integers(-(1 << 40), 1 << 40),
                         st.integers(-999_999_999, 999_999_999))
    low, high = _INTS[kind]
    return st.one_of(st.integers(low, high), st.integers(max(low, -5), min(high, 100_000)))


def _fill(message, values: dict) -> None:
    for name, value in values.items():
        field = message.DESCRIPTOR.fields_by_name[name]
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            getattr(message, name).update(value)
        elif field.is_repeated:
            target = getattr(message, name)
            for item in value:
                if field.message_type is not None:
                    _fill(target.add(), item)
                else:
                    target.append(item)
        elif field.message_type is not None:
            sub = getattr(message, name)
            sub.SetInParent()
            _fill(sub, value)
        else:
            setattr(message, name, value)


def _values_of(descriptor, depth: int) -> st.SearchStrategy:
    fields = {}
    for field in descriptor.fields:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            strategy = st.dictionaries(_scalar(key), _scalar(value), max_size=4)
        elif field.message_type is not None and field.message_type.full_name.startswith("google.protobuf."):
            strategy = _scalar(field)
        elif field.message_type is not None:
            if depth >= _DEPTH_MAX:
                continue
            strategy = st.deferred(lambda d=field.message_type: _values_of(d, depth + 1))
        else:
            strategy = _scalar(field)
        if field.is_repeated and not (
                field.message_type is not None and field.message_type.GetOptions().map_entry):
            strategy = st.lists(strategy, max_size=3)
        fields[field.name] = strategy
    # Some of the fields, each set or left unset (a oneof keeps its last one set).
    return st.fixed_dictionaries({}, optional=fields)


def protobuf(cls) -> st.SearchStrategy:
    """Instances of a generated message class with random fields (nested messages to a depth)."""
    def build(values):
        message = cls()
        _fill(message, values)
        return message
    return _values_of(cls.DESCRIPTOR, 0).map(build)


SETTINGS = ProxySettings()
NOW_MS = 1_700_000_000_000


def _looks_like(message) -> pb.Message:
    """A message the way a real client fills it, before the random fields land on it."""
    base = pb.Message(topic=pb.Resource(name="T"), body=b"body")
    base.system_properties.message_id = "01ABCDEF"
    base.system_properties.message_type = pb.NORMAL
    base.MergeFrom(message)
    return base


def _check_send(message) -> None:
    try:
        out = messages.outgoing(message, SETTINGS, NOW_MS, "127.0.0.1:5000")
    except ProxyError as exc:
        assert pb.Code.Name(exc.code) and exc.message
        return
    if out.type_name == topic_attributes.LITE:
        return   # never stored: no topic here takes Lite messages (the send's type check, test_grpc_unserved)
    text = out.properties_text.encode()
    assert len(text) <= fmt.PROPERTIES_LENGTH_MAX
    assert decode_properties(text) == out.properties, "properties text does not read back"
    record = fmt.decode_at(fmt.encode(
        queue_id=1, flag=0, queue_offset=3, phys_offset=77, sys_flag=out.sys_flag, born_timestamp_ms=out.born_ms,
        born_host=BORN_HOST, store_timestamp_ms=NOW_MS, store_host=STORE_HOST, reconsume_times=out.reconsume_times,
        prepared_transaction_offset=0, body=out.body, topic=b"T", properties=text), 0)
    back = messages.incoming(record, receipt_handle="h")
    system = message.system_properties
    assert back.body == out.body and back.system_properties.message_id == out.message_id
    assert dict(back.user_properties) == dict(message.user_properties)
    assert back.system_properties.tag == system.tag
    joined = " ".join(system.keys)   # stored space-joined, as RocketMQ's KEYS (a key's own spaces split it)
    assert list(back.system_properties.keys) == (joined.split(" ") if joined else [])
    assert back.system_properties.message_group == system.message_group
    assert messages.type_name(back.system_properties.message_type) == out.type_name


@pytest.mark.fuzz(weight=2.0)
def test_grpc_messages_are_sent_as_stored_or_refused_with_a_proxy_error(fuzz_seconds):
    strategy = st.one_of(protobuf(pb.Message).map(_looks_like), protobuf(pb.Message))
    run_hypothesis("grpc messages (send)", fuzz_seconds, strategy, _check_send)


def _refused_or(call) -> object:
    try:
        return call()
    except ProxyError as exc:
        assert exc.message
        return exc


def _check_consumer_inputs(value) -> None:
    receive, ack, text = value
    _refused_or(lambda: validation.topic(receive.message_queue.topic.name))
    _refused_or(lambda: validation.consumer_group(receive.group.name))
    _refused_or(lambda: ConsumerService.filter_fields(receive.filter_expression))
    _refused_or(lambda: validation.invisible_ms(_millis(receive.invisible_duration), SETTINGS.invisible_min_ms,
                                                SETTINGS.invisible_max_ms))
    for entry in ack.entries:
        _refused_or(lambda: ConsumerService.handle_of(entry.receipt_handle, check_expiry=False))
    parsed = _refused_or(lambda: transactions.parse_transaction_id(text))
    if not isinstance(parsed, ProxyError):
        assert transactions.parse_transaction_id(transactions.transaction_id(*parsed)) == parsed


@pytest.mark.fuzz(weight=1.0)
def test_receive_ack_and_transaction_inputs_are_taken_or_refused(fuzz_seconds):
    ids = st.one_of(_tricky_text, st.builds(transactions.transaction_id, st.sampled_from(("broker-a", "b:c", "")),
                                            st.integers(0, 1 << 62), st.integers(0, 1 << 62)))
    strategy = st.tuples(protobuf(service.ReceiveMessageRequest), protobuf(service.AckMessageRequest), ids)
    run_hypothesis("grpc receive/ack/transaction inputs", fuzz_seconds, strategy, _check_consumer_inputs)


def _check_settings(raw) -> None:
    try:
        ClientService(SETTINGS, None, None)._check(raw)
    except StreamEnd as exc:
        assert str(exc)
    except ProxyError as exc:
        assert exc.message


@pytest.mark.fuzz(weight=0.5)
def test_telemetry_settings_are_taken_or_end_the_stream(fuzz_seconds):
    run_hypothesis("grpc telemetry settings", fuzz_seconds, protobuf(pb.Settings), _check_settings)
