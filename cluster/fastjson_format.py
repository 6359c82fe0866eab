"""The JSON dialect of RocketMQ's admin bodies: maps keyed by objects.

RocketMQ serializes its bodies with fastjson, which writes a ``HashMap<MessageQueue, X>``
with the key object itself in the key's place::

    {"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"maxOffset":5,...}}}

That is not JSON, so neither ``json.dumps`` nor ``json.loads`` can carry it. mqadmin's
topicStatus (TopicStatsTable), consumerProgress (ConsumeStats) and resetOffset answers
use it. Integer keys (a ``Map<Integer, Long>``: delay levels, queue ids) are written bare, ``{1:5}``. Here, an object key is a ``ObjectKey`` (a sorted tuple of its fields); fastjson
writes fields in name order, and so does ``dumps``. Pure format code: no I/O.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring


class ObjectKey(tuple):
    """A map key that is itself an object: ((field, value), ...) in field-name order."""

    @classmethod
    def of(cls, **fields) -> "ObjectKey":
        return cls(sorted(fields.items()))

    def as_dict(self) -> dict:
        return dict(self)


def message_queue_key(topic: str, broker_name: str, queue_id: int) -> ObjectKey:
    """RocketMQ's MessageQueue as a map key."""
    return ObjectKey.of(topic=topic, brokerName=broker_name, queueId=queue_id)


def dumps(value) -> str:
    """Compact JSON, except that ``ObjectKey`` keys are written as objects (fastjson's form)."""
    if isinstance(value, dict):
        items = (f"{_key(k)}:{dumps(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, (list, tuple)) and not isinstance(value, ObjectKey):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _key(key) -> str:
    if isinstance(key, ObjectKey):
        return dumps(key.as_dict())
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)   # fastjson writes a Map<Integer, ...>'s keys bare: {1:5}
    return json.dumps(str(key), ensure_ascii=False)


class FastjsonError(ValueError):
    pass


_WHITESPACE = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


def loads(text: str | bytes):
    """Parse fastjson's dialect; object keys come back as ``ObjectKey``. FastjsonError when it is not."""
    try:
        if isinstance(text, (bytes, bytearray, memoryview)):
            text = bytes(text).decode("utf-8")
        value, end = _value(text, _skip(text, 0))
    except FastjsonError:
        raise
    except UnicodeDecodeError as exc:
        raise FastjsonError(f"not UTF-8: {exc}") from None
    except ValueError as exc:   # json's string scanner; int() past its 4300 digits
        raise FastjsonError(str(exc)) from None
    except RecursionError:      # one Python frame per nesting level
        raise FastjsonError("nests too deep") from None
    if _skip(text, end) != len(text):
        raise FastjsonError(f"extra data at character {end}")
    return value


def body_json(body: bytes | str):
    """A body a RocketMQ peer answered, as plain JSON values: RocketBox writes JSON, Apache's
    brokers and NameServers fastjson, whose maps keyed by numbers (a route's ``brokerAddrs``
    ``{0:"host:port"}``) are no JSON. Numeric keys come back as strings, as JSON would have
    them; object keys stay ``ObjectKey``. ValueError (FastjsonError) when it is neither."""
    try:
        return json.loads(body)
    except ValueError:
        return _string_keys(loads(body))


def _string_keys(value):
    if isinstance(value, dict):
        return {(k if isinstance(k, (str, ObjectKey)) else _plain_key(k)): _string_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_string_keys(v) for v in value]
    return value


def _plain_key(key) -> str:
    if key is None or isinstance(key, bool):
        return json.dumps(key)
    return str(key)


def _skip(text: str, pos: int) -> int:
    return _WHITESPACE.match(text, pos).end()


def _value(text: str, pos: int):
    if pos >= len(text):
        raise FastjsonError("unexpected end of data")
    char = text[pos]
    if char == "{":
        return _object(text, pos + 1)
    if char == "[":
        return _array(text, pos + 1)
    if char == '"':
        return scanstring(text, pos + 1)
    for word, literal in _LITERALS.items():
        if text.startswith(word, pos):
            return literal, pos + len(word)
    match = _NUMBER.match(text, pos)
    if match is None:
        raise FastjsonError(f"unexpected character {char!r} at {pos}")
    number = match.group(0)
    is_float = match.group(1) or match.group(2)
    return (float(number) if is_float else int(number)), match.end()


def _object(text: str, pos: int):
    result = {}
    pos = _skip(text, pos)
    if text.startswith("}", pos):
        return result, pos + 1
    while True:
        key, pos = _value(text, pos)
        if isinstance(key, dict):
            if any(isinstance(v, (dict, list)) for v in key.values()):
                raise FastjsonError(f"an object key may hold only plain values (at {pos})")
            if any(not isinstance(k, str) for k in key):
                raise FastjsonError(f"an object key's own keys must be strings (at {pos})")
            key = ObjectKey(sorted(key.items()))
        elif not isinstance(key, (str, int, float, bool)) and key is not None:
            raise FastjsonError(f"a key must be a string, a number or an object (at {pos})")
        pos = _skip(text, pos)
        if not text.startswith(":", pos):
            raise FastjsonError(f"expected ':' at {pos}")
        value, pos = _value(text, _skip(text, pos + 1))
        result[key] = value
        pos, closed = _after_item(text, pos, "}")
        if closed:
            return result, pos


def _array(text: str, pos: int):
    result = []
    pos = _skip(text, pos)
    if text.startswith("]", pos):
        return result, pos + 1
    while True:
        value, pos = _value(text, pos)
        result.append(value)
        pos, closed = _after_item(text, pos, "]")
        if closed:
            return result, pos


def _after_item(text: str, pos: int, closer: str) -> tuple[int, bool]:
    """Past the ',' before the next item, or past ``closer``: (position, whether it closed)."""
    pos = _skip(text, pos)
    if text.startswith(",", pos):
        return _skip(text, pos + 1), False
    if text.startswith(closer, pos):
        return pos + 1, True
    raise FastjsonError(f"expected ',' or {closer!r} at {pos}")
