"""The send's fast paths against the checked paths they stand in for, on the same inputs (issue 33
item 1): a properties text's WAIT cut on the text (``message/properties.split_property``) against
decoding it, dropping WAIT and encoding it again; a plain send's header read in the fewest steps
(``broker/send._parse_plain``) against ``_parse_checked``, down to the properties bytes the broker's
own ``_route`` stores; and a JSON header as RocketMQ's clients write it (``remoting_format``'s fast
path) against the full checks. A fast path may decline (None: the checked path runs); when it
answers, it answers what the checked path would, byte for byte."""

from __future__ import annotations

import itertools
import random

import orjson
import pytest

from rocketbox.cluster import remoting_format as rf
from rocketbox.cluster.broker import send as send_module
from rocketbox.cluster.message.properties import (PROPERTY_WAIT, decode_properties, encode_properties,
                                                  properties_text, split_property)
from rocketbox.cluster.protocol import ProtocolError, RequestCode, SEND_V2_LONG_NAMES
from rocketbox.cluster.wire_format import Command, FrameError
from tests.in_process import InProcessBroker

NAMES = ("UNIQ_KEY", "KEYS", "TAGS", "WAIT", "CLUSTER", "ünï名", "", "WAITX", "XWAIT", "a b")
VALUES = ("", "true", "false", "v", "é中😀", "x\x01y", " ", "0")


def _oracle(text: str) -> tuple[str | None, str]:
    """What the send handler stored before the fast path: decode, drop WAIT, encode."""
    properties = decode_properties(text.encode())
    value = properties.pop(PROPERTY_WAIT, None)
    return value, encode_properties(properties).decode()


def _plain_texts() -> list[str]:
    """Texts as clients write them: WAIT first, in the middle, last, absent; closed or not."""
    texts = []
    for count in range(4):
        for names in itertools.permutations(NAMES, count):
            for values in itertools.islice(itertools.product(VALUES, repeat=count), 0, None, 7 if count > 2 else 1):
                text = properties_text(zip(names, values))
                texts.extend((text, text[:-1]))
    return texts


def _odd_texts(rng: random.Random) -> list[str]:
    """Texts no client writes: an empty pair, a pair without \\x01, a name twice (WAIT twice)."""
    texts = ["\x02", "\x02\x02", "WAIT", "WAIT\x02", "WAIT\x01true\x02WAIT\x01false\x02", "a\x01b\x02\x02WAIT\x01t\x02",
             "a\x01b\x02a\x01c\x02WAIT\x01true\x02", "\x02WAIT\x01true", "WAIT\x01true\x02\x02", "a\x02WAIT\x01true\x02"]
    pieces = ("\x01", "\x02", "WAIT", "a", "é", "true", "\x02WAIT\x01")
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 9))) for _ in range(3000)]
    return texts


def test_wait_cut_on_the_text_is_what_decoding_and_encoding_wrote():
    plain = _plain_texts()
    assert len(plain) > 2000
    for text in plain:
        assert split_property(text, PROPERTY_WAIT) == _oracle(text), repr(text)
    declined = 0
    for text in _odd_texts(random.Random(33)):
        cut = split_property(text, PROPERTY_WAIT)
        declined += cut is None
        assert cut is None or cut == _oracle(text), repr(text)
    assert declined > 100   # the odd texts go to decode and encode


def _header(code: int, **fields: str) -> dict[str, str]:
    if code == RequestCode.SEND_MESSAGE_V2:
        return {SEND_V2_LONG_NAMES[name]: value for name, value in fields.items()}
    return fields


def _headers(rng: random.Random):
    """Send headers as clients send them and with every field the plain path reads made odd."""
    base = {"producerGroup": "PG", "topic": "Fast", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
            "queueId": "1", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0", "reconsumeTimes": "0",
            "unitMode": "false", "batch": "false"}
    odd = {"topic": ("", "TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_REVIVE_LOG_x", "bad topic", "T" * 200, "%RETRY%G"),
           "queueId": ("", "-1", "x", "3", " 2"), "sysFlag": ("", "1", "2", "4", "8", "769", "0x1", "-1"),
           "bornTimestamp": ("", "-1", str(1 << 62), "1e3", "5"), "flag": ("", str(1 << 31), str(-(1 << 31)), "q"),
           "reconsumeTimes": ("", "-1", "3", str(1 << 31)), "maxReconsumeTimes": ("", "16", "z"),
           "batch": ("", "true", "TRUE", "1", "0"), "defaultTopicQueueNums": ("", "8")}
    properties = _plain_texts()[::5] + _odd_texts(rng)[:300] + [
        "DELAY\x013\x02WAIT\x01true\x02", "TRAN_MSG\x01true\x02WAIT\x01true\x02", "TIMER_DELAY_SEC\x015\x02",
        "_SYS_MSG_PRIORITY_\x012\x02WAIT\x01true\x02", "__SHARDINGKEY\x01k\x02WAIT\x01false\x02", "a\x01\x00\x02"]
    for text in properties:
        for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE):
            yield _header(code, **base, properties=text), code
    for _ in range(1500):
        fields = dict(base, properties=rng.choice(properties))
        for name in rng.sample(sorted(odd), rng.randrange(1, 3)):
            fields[name] = rng.choice(odd[name])
        if rng.random() < 0.1:
            del fields[rng.choice(sorted(fields))]
        code = rng.choice((RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_MESSAGE, RequestCode.SEND_BATCH_MESSAGE))
        yield _header(RequestCode.SEND_MESSAGE_V2 if code == RequestCode.SEND_BATCH_MESSAGE else code,
                      **fields), code


def _checked(request: Command):
    try:
        return send_module._parse_checked(request, lambda: 42)
    except ProtocolError as exc:
        return exc


def test_a_plain_send_is_read_and_stored_as_the_checked_path_reads_and_stores_it(tmp_path):
    broker = InProcessBroker(tmp_path / "store")
    sender = broker.service.sender
    sender.topics.create_on_send("Fast", 4)
    taken = 0
    try:
        for fields, code in _headers(random.Random(331)):
            request = Command(code, fields, b"body", peer_address="127.0.0.1", peer_port=4242)
            checked = _checked(request)
            try:
                fast = send_module._parse_plain(request, lambda: 42)
            except (KeyError, ValueError):
                fast = None
            if fast is None:
                continue
            taken += 1
            assert isinstance(checked, send_module.SendRequest), (fields, checked)
            # The same send, but for how its properties are held (decoded, or WAIT already cut).
            assert [getattr(fast, slot) for slot in fast.__slots__ if slot not in ("properties", "stored_text")] == \
                [getattr(checked, slot) for slot in checked.__slots__ if slot not in ("properties", "stored_text")]
            assert sender._route(fast, 0) == sender._route(checked, 0), fields
    finally:
        broker.close()
    assert taken > 1000


JAVA_SEND = (b'{"code":310,"extFields":{"a":"PG","b":"T","c":"TBW102","d":"4","e":"1","f":"0","g":"1700000000000",'
             b'"h":"0","i":"UNIQ_KEY\\u0001ab\\u0002WAIT\\u0001true\\u0002","j":"0","k":"false","m":"false"},"flag":0,'
             b'"language":"JAVA","opaque":17,"serializeTypeCurrentRPC":"JSON","version":395}')


def _json_headers(rng: random.Random):
    header = orjson.loads(JAVA_SEND)
    odd = {"code": (None, "310", 1 << 31, -(1 << 31), 1.0, True, [1]), "opaque": (None, -1, "7", 1 << 40, False),
           "flag": (None, 1, 2, "0", 0.5), "version": (None, -5, "395", 1 << 33),
           "language": (None, "CPP", "GO", "NOPE", 3, "3", [], True), "remark": (None, "", "r", 5, {"a": 1}),
           "extFields": (None, {}, [], "x", {"n": 1}, {"b": True}, {"f": 1.5}, {"f": 2.0}, {"z": None}, {"l": [1]})}
    yield JAVA_SEND
    for _ in range(3000):
        one = dict(header)
        for name in rng.sample(sorted(odd), rng.randrange(1, 3)):
            value = rng.choice(odd[name])
            if value is None and rng.random() < 0.5:
                one.pop(name, None)
            else:
                one[name] = value
        yield orjson.dumps(one)
    yield b"[1]"
    yield b'"text"'
    yield b"17"


def _decoded(call, raw: bytes):
    try:
        return call(raw)
    except FrameError as exc:
        return f"FrameError: {exc}"


@pytest.mark.parametrize("seed", [0, 1])
def test_a_json_header_decodes_as_the_full_checks_decode_it(seed, monkeypatch):
    full_checks = rf._decode_json_object
    checked = []
    monkeypatch.setattr(rf, "_decode_json_object", lambda header: checked.append(1) or full_checks(header))
    headers = list(_json_headers(random.Random(seed)))
    for raw in headers:
        full = _decoded(lambda data: full_checks(orjson.loads(data)), raw)
        assert _decoded(rf.decode_json_header, raw) == full, raw
    assert 100 < len(headers) - len(checked) < len(headers) - 1000   # both paths ran, many times each
