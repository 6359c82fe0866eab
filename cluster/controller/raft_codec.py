"""The bytes of PySyncObj's messages, commands, journal and dumps: tagged JSON, never a pickle.

PySyncObj serialises everything through ``pysyncobj.pickle`` (``dumps``/``loads``/``dump``/
``load``, looked up at each call); ``install`` points those four here, so no controller ever
unpickles bytes, from a peer or a file. What a controller's Raft carries is plain data (collected
from a live three-node cluster with journal, compaction and a dump sent to a node that lost its
data) plus four classes, rebuilt from their fields and nothing else: PySyncObj's ``TCPNode`` and the
controller state's three dataclasses. Anything else is refused with ``ValueError`` when written
and ``RaftDecodeError`` when read.

Layout: JSON in UTF-8. ``None``, booleans, ints, floats, strings and lists are themselves; every
other value is a one-key object: ``{"b": base64}`` bytes, ``{"a": base64}`` bytearray, ``{"t":
[...]}`` tuple, ``{"s": [...]}`` set, ``{"f": [...]}`` frozenset, ``{"d": [[key, value], ...]}``
dict (keys of any type above), ``{"o": [class name, {field: value}]}`` one of the four classes.
A dump file from before this codec (a pickle) is not read; a journal's meta file from before it
is taken as absent (PySyncObj's own fallback for an unreadable one).
"""

from __future__ import annotations

import base64
import json

import pysyncobj.journal
import pysyncobj.node
import pysyncobj.pickle

from rocketbox.cluster.controller.state import ControllerState, GroupState, Replica

_CLASSES = {cls.__name__: cls for cls in (pysyncobj.node.TCPNode, ControllerState, GroupState, Replica)}
_DEPTH_MAX = 64


class RaftDecodeError(ValueError):
    """Bytes that are not a value this codec wrote."""


def _encode(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    kind = type(value)
    if kind is list:
        return [_encode(v) for v in value]
    if kind is bytes:
        return {"b": base64.b64encode(value).decode()}
    if kind is bytearray:
        return {"a": base64.b64encode(value).decode()}
    if kind is tuple:
        return {"t": [_encode(v) for v in value]}
    if kind is set:
        return {"s": [_encode(v) for v in value]}
    if kind is frozenset:
        return {"f": [_encode(v) for v in value]}
    if kind is dict:
        return {"d": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if _CLASSES.get(kind.__name__) is kind:
        return {"o": [kind.__name__, {k: _encode(v) for k, v in vars(value).items()}]}
    raise ValueError(f"the controller's Raft does not carry a {kind.__module__}.{kind.__qualname__}")


def _decode(node, depth: int = 0):
    if depth > _DEPTH_MAX:
        raise RaftDecodeError("nested too deep")
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(v, depth + 1) for v in node]
    if not isinstance(node, dict) or len(node) != 1:
        raise RaftDecodeError("not a tagged value")
    (tag, body), = node.items()
    try:
        if tag == "b":
            return base64.b64decode(body, validate=True)
        if tag == "a":
            return bytearray(base64.b64decode(body, validate=True))
        items = [_decode(v, depth + 1) for v in body] if tag in ("t", "s", "f") else None
        if tag == "t":
            return tuple(items)
        if tag == "s":
            return set(items)
        if tag == "f":
            return frozenset(items)
        if tag == "d":
            return {_decode(k, depth + 1): _decode(v, depth + 1) for k, v in body}
        if tag == "o":
            name, fields = body
            cls = _CLASSES.get(name)
            if cls is None:
                raise RaftDecodeError(f"the controller does not take a {name!r}")
            obj = object.__new__(cls)
            obj.__dict__.update({str(k): _decode(v, depth + 1) for k, v in fields.items()})
            return obj
    except (TypeError, ValueError, AttributeError) as exc:
        if isinstance(exc, RaftDecodeError):
            raise
        raise RaftDecodeError(f"malformed {tag!r} value: {exc}") from None
    raise RaftDecodeError(f"unknown tag {tag!r}")


def dumps(obj, protocol=None) -> bytes:
    return json.dumps(_encode(obj), separators=(",", ":")).encode()


def loads(data):
    try:
        node = json.loads(bytes(data))
    except (ValueError, RecursionError) as exc:
        raise RaftDecodeError(f"not the controller's JSON: {exc}") from None
    return _decode(node)


def dump(obj, file, protocol=None) -> None:
    file.write(dumps(obj))


def load(file):
    return loads(file.read())


def install() -> None:
    """PySyncObj's modules look these four up on ``pysyncobj.pickle`` at each call; its journal took
    its own ``loads``/``dumps`` (the journal's meta file) at import."""
    # These replace pickle: from here on PySyncObj reads a peer's bytes as tagged JSON, never a pickle.
    pysyncobj.pickle.dumps = dumps
    pysyncobj.pickle.loads = loads
    pysyncobj.pickle.dump = dump
    pysyncobj.pickle.load = load
    pysyncobj.journal.dumps = dumps
    pysyncobj.journal.loads = loads
