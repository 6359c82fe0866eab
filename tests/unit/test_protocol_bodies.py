"""JSON request bodies (``protocol.json_body``): an object, or a ProtocolError the handler answers."""

from __future__ import annotations

import pytest

from rocketbox.cluster.protocol import ProtocolError, json_body
from rocketbox.cluster.wire_format import Command


def test_an_object_body_is_read_and_an_empty_one_is_empty():
    assert json_body(Command(34, {}, b'{"clientID":"c"}')) == {"clientID": "c"}
    assert json_body(Command(34, {}, b"")) == {}


# A body nested 2000 deep escaped as RecursionError (found by tests/fuzz), past answers_refusals
# to the dispatcher's catch-all, which logs a traceback per request.
@pytest.mark.parametrize("body, reason", [(b"[1]", "must be a JSON object"), (b"{", "not JSON"),
                                          (b"\xff", "not JSON"), (b"[" * 2000 + b"]" * 2000, "nests too deep"),
                                          (b'{"a":' * 2000 + b"1" + b"}" * 2000, "nests too deep")])
def test_a_body_that_is_not_an_object_is_refused_with_the_reason(body, reason):
    with pytest.raises(ProtocolError, match=reason):
        json_body(Command(34, {}, body))
