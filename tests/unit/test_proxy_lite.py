"""Lite topics' bookkeeping in the proxy (proxy/lite_subscriptions.py), the lite queue names
(message/lite_topics.py) and Apache's lite topic name rule (proxy/validation.py), without a cluster:
tests/grpc/test_grpc_lite.py drives them with the real client."""

from __future__ import annotations

import pytest

from rocketbox.cluster.clock import ManualClock
from rocketbox.cluster.message.lite_topics import lite_topic_of, lmq_name, split_lmq_name
from rocketbox.cluster.proxy import validation
from rocketbox.cluster.proxy.lite_subscriptions import LiteSubscriptions, notify_unsubscribe
from rocketbox.cluster.proxy.protos import Code, pb
from rocketbox.cluster.proxy.status import ProxyError

pytestmark = pytest.mark.timeout(60)


def test_lite_queue_names_are_apaches():
    assert lmq_name("Parent", "session-1") == "%LMQ%$Parent$session-1"
    assert split_lmq_name("%LMQ%$Parent$session-1") == ("Parent", "session-1")
    for not_lite in (None, "", "%LMQ%plain", "%LMQ%$Parent", "%LMQ%$$x", "%LMQ%$P$a$b", "Parent"):
        assert split_lmq_name(not_lite) is None, not_lite
    assert lite_topic_of({"INNER_MULTI_DISPATCH": "%LMQ%$P$x"}) == "x"
    assert lite_topic_of({}) is None


@pytest.mark.parametrize("name, reason", [
    ("   ", "whitespace"), ("x" * 65, "exceed the max size 64"), ("a$b", "alphanumeric"), ("é", "alphanumeric"),
    ("a b", "alphanumeric")])
def test_lite_topic_names_follow_apaches_validator(name, reason):
    with pytest.raises(ProxyError, match=reason) as refused:
        validation.lite_topic(name, 64)
    assert refused.value.code == Code.ILLEGAL_LITE_TOPIC
    assert validation.lite_topic("Agent_7-session", 64) == "Agent_7-session"
    assert validation.lite_topic("x" * 64, 64) == "x" * 64


def test_partial_and_complete_actions():
    subs = LiteSubscriptions(per_client=10, total=100, max_topics=100)
    subs.sync("c1", pb.PARTIAL_ADD, "G", "T", {"a", "b"})
    subs.sync("c2", pb.PARTIAL_ADD, "G", "T", {"b"})
    assert subs.lite_topics_of("c1") == {"a", "b"} and len(subs) == 3
    assert subs.subscribers("G", "T", "b") == {"c1", "c2"} and subs.subscribers("H", "T", "b") == set()
    subs.sync("c1", pb.PARTIAL_REMOVE, "G", "T", {"b", "never"})
    assert subs.lite_topics_of("c1") == {"a"} and subs.subscribers("G", "T", "b") == {"c2"}
    subs.sync("c1", pb.COMPLETE_ADD, "G", "T", {"x", "y"})   # the whole set: "a" goes
    assert subs.lite_topics_of("c1") == {"x", "y"} and subs.subscribers("G", "T", "a") == set()
    subs.sync("c1", pb.COMPLETE_REMOVE, "G", "T", set())
    assert subs.lite_topics_of("c1") == frozenset() and len(subs) == 1
    subs.drop_client("c2")
    assert len(subs) == 0 and subs.subscribers("G", "T", "b") == set()


def test_a_client_rebinding_another_group_or_topic_leaves_the_old_one():
    subs = LiteSubscriptions(per_client=10, total=100, max_topics=100)
    subs.sync("c1", pb.PARTIAL_ADD, "G", "T", {"a"})
    subs.sync("c1", pb.PARTIAL_ADD, "G", "U", {"b"})
    assert subs.subscribers("G", "T", "a") == set() and subs.lite_topics_of("c1") == {"b"} and len(subs) == 1


def test_subscription_quotas_per_client_and_in_all():
    subs = LiteSubscriptions(per_client=3, total=5, max_topics=100)
    with pytest.raises(ProxyError, match="quota exceeded 3") as refused:
        subs.sync("c1", pb.COMPLETE_ADD, "G", "T", {"a", "b", "c", "d"})
    assert refused.value.code == Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    assert len(subs.lite_topics_of("c1")) == 3   # what fitted stays, as Apache's loop leaves it
    subs.sync("c2", pb.PARTIAL_ADD, "G", "T", {"a", "b"})
    with pytest.raises(ProxyError, match="quota exceeded 5") as refused:
        subs.sync("c3", pb.PARTIAL_ADD, "G", "T", {"a"})
    assert refused.value.code == Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    subs.sync("c2", pb.PARTIAL_ADD, "G", "T", {"a"})   # held already: no new subscription, no refusal
    subs.drop_client("c1")
    subs.sync("c3", pb.PARTIAL_ADD, "G", "T", {"a"})
    assert len(subs) == 3


def test_lite_topic_quota_counts_live_lite_topics():
    clock = ManualClock()
    subs = LiteSubscriptions(per_client=10, total=100, max_topics=2, clock=clock.monotonic)
    subs.note_send("T", "a")
    subs.note_send("T", "b")
    subs.note_send("T", "a")   # known: a send to it is no new lite topic
    with pytest.raises(ProxyError, match="lite topic quota exceeded 2") as refused:
        subs.note_send("T", "c")
    assert refused.value.code == Code.LITE_TOPIC_QUOTA_EXCEEDED
    clock.advance(61)
    subs.note_send("T", "b")
    assert [(t, lite) for t, lite, _ in subs.expire(lambda topic: 60.0)] == [("T", "a")]
    subs.note_send("T", "c")   # room again
    assert subs.lite_topic_count == 2


def test_an_idle_lite_topic_is_forgotten_with_its_subscriptions():
    clock = ManualClock()
    subs = LiteSubscriptions(per_client=10, total=100, max_topics=100, clock=clock.monotonic)
    subs.sync("c1", pb.PARTIAL_ADD, "G", "T", {"a", "b"})
    subs.sync("c2", pb.PARTIAL_ADD, "H", "T", {"a"})
    subs.note_send("T", "a")
    subs.note_send("T", "b")
    subs.note_send("Forever", "z")
    clock.advance(30)
    subs.note_send("T", "b")
    clock.advance(31)
    gone = subs.expire(lambda topic: 60.0 if topic == "T" else None)   # "Forever": -1, never
    assert gone == [("T", "a", {"c1", "c2"})]
    assert subs.lite_topics_of("c1") == {"b"} and subs.lite_topics_of("c2") == frozenset()
    assert subs.lite_topic_count == 2 and len(subs) == 1
    command = notify_unsubscribe("a")
    assert command.WhichOneof("command") == "notify_unsubscribe_lite_command"
    assert command.notify_unsubscribe_lite_command.lite_topic == "a"
