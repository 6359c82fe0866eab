"""ACK_MESSAGES' bodies (cluster/ack_batch_format.py): golden bytes both ways, and what does not parse."""

from __future__ import annotations

import pytest

from rocketbox.cluster import ack_batch_format as f

HANDLES = ["v1 12 1700000000000 60000 0 1 42 9876 broker-a", "v1 12 1700000000000 60000 0 1 43 10012 broker-a"]
HANDLES_BODY = (b"v1 12 1700000000000 60000 0 1 42 9876 broker-a\n"
                b"v1 12 1700000000000 60000 0 1 43 10012 broker-a\n")
OUTCOMES = [(0, ""), (208, "no message to ack for G")]
OUTCOMES_BODY = b'[[0,""],[208,"no message to ack for G"]]'


def test_the_handles_body_is_each_handle_and_a_newline():
    assert f.encode_handles(HANDLES) == HANDLES_BODY
    assert f.decode_handles(HANDLES_BODY) == HANDLES


def test_the_outcomes_body_is_a_json_array_of_code_and_remark():
    assert f.encode_outcomes(OUTCOMES) == OUTCOMES_BODY
    assert f.decode_outcomes(OUTCOMES_BODY, 2) == OUTCOMES


@pytest.mark.parametrize("body", [b"", b"no newline", b"\xff\xfe\n", b"a\n" * (f.HANDLES_MAX + 1)])
def test_a_handles_body_that_is_not_one_is_refused(body):
    with pytest.raises(ValueError):
        f.decode_handles(body)


def test_a_handle_with_a_newline_cannot_be_encoded():
    with pytest.raises(ValueError):
        f.encode_handles(["v1 1\n2"])


@pytest.mark.parametrize("body,count", [(OUTCOMES_BODY, 3), (b"{}", 0), (b"[[0]]", 1), (b'[["0",""]]', 1),
                                        (b"[[0,1]]", 1), (b"\xff", 1), (b"[[true,\"\"]]", 1)])
def test_outcomes_that_are_not_the_asked_pairs_are_refused(body, count):
    with pytest.raises(ValueError):
        f.decode_outcomes(body, count)
