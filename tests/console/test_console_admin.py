"""The Admin calls the console added (cluster/client/admin.py), against the console's cluster."""

from __future__ import annotations

import pytest

from rocketbox.cluster import Message, Producer
from rocketbox.cluster.testing import wait_until
from tests.console.consumers import Collector

pytestmark = pytest.mark.timeout(120)


def test_all_topic_configs_gives_every_topic_with_its_attributes(admin):
    admin.create_topic("AdminTyped", 2, message_type="DELAY")
    configs = admin.all_topic_configs(admin.master_endpoints()["broker-a"])
    assert configs["AdminTyped"]["attributes"] == {"message.type": "DELAY"}
    assert configs["AdminTyped"]["writeQueueNums"] == 2 and "TBW102" in configs


def test_consumer_groups_and_a_messages_retries(admin, cfg):
    admin.create_topic("AdminRetries", 1)
    with Producer("AdminRetriesProducer", config=cfg) as producer:
        sent = producer.send(Message("AdminRetries", b"fails twice"))
        untouched = producer.send(Message("AdminRetries", b"never retried", keys="plain"))
    with Collector(cfg, "AdminRetriesGroup", "AdminRetries", fail=True, max_reconsume_times=1):
        wait_until(lambda: len(admin.dead_letters("AdminRetriesGroup")) == 2, 30, what="both dead")
    assert "AdminRetriesGroup" in admin.consumer_groups()
    message = admin.view_message(sent.offset_msg_id)
    retries = admin.message_retries(message, ["AdminRetriesGroup", "NoSuchGroup"])
    assert [(m.topic, m.reconsume_times, m.body) for m in retries] == \
        [("%RETRY%AdminRetriesGroup", 1, b"fails twice"), ("%DLQ%AdminRetriesGroup", 2, b"fails twice")]
    other = admin.message_retries(admin.view_message(untouched.offset_msg_id), ["NoSuchGroup"])
    assert other == []
