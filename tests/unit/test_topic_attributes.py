"""Topic attributes: RocketMQ's modification strings, the rules of a change, the message-type rules,
and topics.json keeping attributes (and loading files from before them)."""

from __future__ import annotations

import json
import os

import pytest

from rocketbox.cluster.broker.topics import TopicConfig, TopicConfigManager
from rocketbox.cluster.shm import paths
from rocketbox.cluster.topic_attributes import (AttributeProblem, accepted_types, apply_modification,
                                                format_modification, lite_expiration_ms, message_type_of,
                                                parse_modification)

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("text, parsed", [
    ("", {}),
    (None, {}),
    ("  ", {}),
    ("+message.type=FIFO", {"+message.type": "FIFO"}),
    ("+message.type=FIFO,-queue.type", {"+message.type": "FIFO", "-queue.type": ""}),
    ("+a=1, +b=2", {"+a": "1", "+b": "2"}),
    ("+message.type=FIFO,", {"+message.type": "FIFO"}),
    (",", {}),        # as Java's split: no entries (found by tests/fuzz: an IndexError)
    (", ,", {}),
])
def test_parse_modification_golden(text, parsed):
    assert parse_modification(text) == parsed
    if parsed:
        assert parse_modification(format_modification(parsed)) == parsed


def test_format_modification_is_what_mqadmin_sends():
    assert format_modification({"+message.type": "DELAY"}) == "+message.type=DELAY"
    assert format_modification({"+message.type": "FIFO", "-x": ""}) == "+message.type=FIFO,-x"


@pytest.mark.parametrize("text, reason", [
    ("message.type=FIFO", "add/alter attribute format is wrong"),
    ("message.type", "delete attribute format is wrong"),
    ("+message.type=", "has no value"),
    ("+message.type=FIFO,+message.type=DELAY", "key duplication"),
    ("+message.type=FIFO,,-x", "delete attribute format is wrong"),
])
def test_parse_modification_refuses(text, reason):
    with pytest.raises(AttributeProblem, match=reason):
        parse_modification(text)


def test_creating_takes_additions_only():
    assert apply_modification({}, {"+message.type": "FIFO"}, creating=True) == {"message.type": "FIFO"}
    with pytest.raises(AttributeProblem, match="only add attribute is supported while creating"):
        apply_modification({}, {"-message.type": ""}, creating=True)


def test_update_keeps_unmentioned_changes_and_deletes():
    current = {"message.type": "FIFO"}
    assert apply_modification(current, {}, creating=False) == {"message.type": "FIFO"}
    assert apply_modification(current, {"+message.type": "MIXED"}, creating=False) == {"message.type": "MIXED"}
    assert apply_modification(current, {"-message.type": ""}, creating=False) == {}
    assert current == {"message.type": "FIFO"}, "the current attributes are not changed in place"
    with pytest.raises(AttributeProblem, match="attempt to delete a nonexistent key: message.type"):
        apply_modification({}, {"-message.type": ""}, creating=False)


@pytest.mark.parametrize("changes, reason", [
    ({"+color": "red"}, "unsupported key: color"),
    ({"+queue.type": "BatchCQ"}, "unsupported key: queue.type"),
    ({"+message.type": "fifo"}, "message.type=fifo is not one of"),
    ({"+lite.topic.expiration": "43201"}, "out of range"),
    ({"+lite.topic.expiration": "soon"}, "is not a number"),
    ({"+message-type": "FIFO"}, "key format is wrong"),
    ({"+message.type": "FIFO", "-message.type": ""}, "alter duplication key"),
])
def test_bad_changes_are_refused_with_the_reason(changes, reason):
    with pytest.raises(AttributeProblem, match=reason):
        apply_modification({"message.type": "NORMAL"}, changes, creating=False)


def test_every_rocketmq_value_is_taken():
    for value in ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED", "UNSPECIFIED", "PRIORITY", "LITE"):
        assert apply_modification({}, {"+message.type": value}, creating=True) == {"message.type": value}


def test_a_lite_topic_declares_its_expiration_in_minutes():
    changes = {"+message.type": "LITE", "+lite.topic.expiration": "30"}
    attributes = apply_modification({}, changes, creating=True)
    assert attributes == {"message.type": "LITE", "lite.topic.expiration": "30"}
    assert lite_expiration_ms(attributes) == 30 * 60_000
    assert lite_expiration_ms({"message.type": "LITE"}) is None            # -1, Apache's default: never
    assert lite_expiration_ms({"lite.topic.expiration": "-1"}) is None


def test_message_type_and_what_a_topic_takes():
    assert TopicConfig("T", 1, 1).message_type is None
    assert TopicConfig("T", 1, 1, attributes={"message.type": "UNSPECIFIED"}).message_type is None
    assert TopicConfig("T", 1, 1, attributes={"message.type": "FIFO"}).message_type == "FIFO"
    every = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")
    assert accepted_types(None) == every, "undeclared takes every type (RocketBox's topics always did)"
    assert accepted_types("MIXED") == every
    assert accepted_types("DELAY") == ("DELAY",)
    assert accepted_types("PRIORITY") == ("PRIORITY",)   # only a declared PRIORITY topic takes them
    assert accepted_types("LITE") == ("LITE",)           # and only a LITE topic takes Lite messages
    assert accepted_types("bogus") == ()


@pytest.mark.parametrize("properties, kind", [
    ({}, "NORMAL"),
    ({"TAGS": "a"}, "NORMAL"),
    ({"TRAN_MSG": "true", "DELAY": "3"}, "TRANSACTION"),
    ({"TRAN_MSG": "false"}, "NORMAL"),
    ({"DELAY": "3"}, "DELAY"),
    ({"TIMER_DELIVER_MS": "1700000000000"}, "DELAY"),
    ({"TIMER_DELAY_SEC": "5"}, "DELAY"),
    ({"TIMER_DELAY_MS": "5000"}, "DELAY"),
    ({"__SHARDINGKEY": "order-1"}, "FIFO"),
    ({"DELAY": "1", "__SHARDINGKEY": "g"}, "DELAY"),
    ({"_SYS_MSG_PRIORITY_": "3"}, "PRIORITY"),
    ({"_SYS_MSG_PRIORITY_": "3", "__SHARDINGKEY": "g"}, "FIFO"),   # Apache's order: FIFO before PRIORITY
    ({"_SYS_MSG_PRIORITY_": "3", "TIMER_DELIVER_MS": "1"}, "DELAY"),
    ({"INNER_MULTI_DISPATCH": "%LMQ%$parent$session-1"}, "LITE"),
    ({"INNER_MULTI_DISPATCH": "%LMQ%plain-lmq"}, "NORMAL"),        # an LMQ that is not a lite topic
])
def test_message_type_of_properties(properties, kind):
    assert message_type_of(properties) == kind


def _manager(store_dir):
    return TopicConfigManager(str(store_dir), auto_create_enabled=False, queue_count_default=4)


def test_topics_json_round_trip_keeps_attributes(tmp_path):
    topics = _manager(tmp_path)
    topics.upsert(TopicConfig("Fifo", 2, 2, attributes={"message.type": "FIFO"}))
    topics.upsert(TopicConfig("Plain", 3, 3))
    with open(paths.config_path(str(tmp_path), "topics")) as f:
        stored = json.load(f)["topicConfigTable"]
    assert stored["Fifo"]["attributes"] == {"message.type": "FIFO"}
    assert stored["Plain"]["attributes"] == {}
    again = _manager(tmp_path)
    assert again.topics == topics.topics
    assert again.get("Fifo").message_type == "FIFO" and again.get("Plain").message_type is None


def test_topics_json_from_before_attributes_and_from_rocketmq_loads(tmp_path):
    path = paths.config_path(str(tmp_path), "topics")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"topicConfigTable": {
            "Old": {"topicName": "Old", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0,
                    "order": False},
            "Java": {"topicName": "Java", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6,
                     "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
                     "attributes": {"message.type": "TRANSACTION"}}}}, f)
    topics = _manager(tmp_path)
    assert topics.get("Old") == TopicConfig("Old", 4, 4, 6, 0, False, {})
    assert topics.get("Java").message_type == "TRANSACTION"


def test_config_of_a_bad_shape_is_refused():
    with pytest.raises(ValueError, match="attributes must be an object"):
        TopicConfig.from_json({"topicName": "T", "readQueueNums": 1, "writeQueueNums": 1, "attributes": ["x"]})
