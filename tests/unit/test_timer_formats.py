"""Golden tests of the timer's formats (issue 34 items 1 and 4): the recall handle
(message/recall_handle.py, RocketMQ 5.3.2's RecallMessageHandle v1) and a timed message's times
(shm/schedule_format.py, RocketMQ's HookUtils.transformTimerMessage)."""

from __future__ import annotations

import base64

import pytest

from rocketbox.cluster.message import recall_handle
from rocketbox.cluster.shm.schedule_format import (is_timed, parked_due_ms, requested_deliver_ms, timer_out_ms)

# Java: Base64.getUrlEncoder().encodeToString("v1 TopicA broker-a 1700000000001 7F0000010001".getBytes(UTF_8))
GOLDEN = "djEgVG9waWNBIGJyb2tlci1hIDE3MDAwMDAwMDAwMDEgN0YwMDAwMDEwMDAx"


def test_a_handle_is_the_url_safe_base64_of_five_space_separated_fields():
    assert recall_handle.build("TopicA", "broker-a", 1_700_000_000_001, "7F0000010001") == GOLDEN
    assert recall_handle.decode(GOLDEN) == recall_handle.RecallHandle("TopicA", "broker-a", "1700000000001",
                                                                      "7F0000010001")
    # URL-safe alphabet and padding, as Java's encoder writes them; read back without the padding too.
    odd = recall_handle.build("T?>", "b", 1, "id")
    assert odd == base64.urlsafe_b64encode(b"v1 T?> b 1 id").decode() and odd.endswith("=")
    assert recall_handle.decode(odd.rstrip("=")).topic == "T?>"


@pytest.mark.parametrize("handle", [
    "", "v1 a b c d",   # not Base64 (RocketMQ's RecallMessageHandleTest cases)
    base64.urlsafe_b64encode(b"v1 a b c").decode(), base64.urlsafe_b64encode(b"v2 a b c d").decode(),
    base64.b64encode(b"v1 t?? b 1 id>>").decode(),   # the standard alphabet's + and /
    "\u00e9t\u00e9",
])
def test_handles_rocketmq_refuses_are_refused_with_its_reason(handle):
    with pytest.raises(ValueError, match="^recall handle is invalid$"):
        recall_handle.decode(handle)


def test_the_handle_time_is_read_as_java_long():
    assert [recall_handle.parse_timestamp(t) for t in ("1700000000001", "+5", "-3", "1_0", " 1", "x", "9" * 20)] \
        == [1700000000001, 5, -3, -1, -1, -1, -1]


def test_a_timed_message_s_time_slot_and_due_time():
    assert timer_out_ms(1_700_000_000_500) == 1_700_000_000_000
    assert timer_out_ms(1_700_000_000_000) == 1_699_999_999_000   # a slot's edge goes one slot earlier
    now = 1_000_000
    assert requested_deliver_ms({"TIMER_DELAY_SEC": "3", "TIMER_DELIVER_MS": "5"}, now) == now + 3000
    assert requested_deliver_ms({"TIMER_DELAY_MS": "250"}, now) == now + 250
    assert requested_deliver_ms({"TIMER_DELIVER_MS": "1234567"}, now) == 1234567
    assert parked_due_ms({"TIMER_DELIVER_MS": "1234567", "TIMER_OUT_MS": "1234000"}) == 1234567
    # A relative delay is due at its handle's time, never while a recall could still be taken.
    assert parked_due_ms({"TIMER_DELAY_SEC": "3", "TIMER_OUT_MS": "1234000"}) == 1234001
    assert is_timed({"TIMER_DELAY_MS": "1"}) and not is_timed({"DELAY": "2"})
    with pytest.raises(ValueError):
        requested_deliver_ms({"TIMER_DELAY_SEC": "soon"}, now)
