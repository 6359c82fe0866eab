"""Filtering with real processes: tags (broker hash match, client string re-check) and SQL92."""

from __future__ import annotations

import threading

import pytest

from rocketbox.cluster import Admin, BrokerError, Message, MessageSelector, Producer, PullConsumer, PullStatus, PushConsumer
from rocketbox.cluster.client import broker_api
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.message.tags import java_string_hash
from rocketbox.cluster.testing import wait_until
from tests.conftest import await_group_caught_up, client_config

PROPERTY_FILTER = {"enable_property_filter": True}


def _send(cfg, messages: list[Message]) -> None:
    with Producer("PG", config=cfg) as producer:
        for message in messages:
            producer.send(message)


def _push_consumer(cfg, group: str, topic: str, selector) -> tuple[PushConsumer, list]:
    received: list = []
    lock = threading.Lock()

    def listener(messages):
        with lock:
            received.extend(messages)

    consumer = PushConsumer(group, config=cfg)
    consumer.subscribe(topic, selector)
    consumer.register_listener(listener)
    return consumer, received


def test_tag_hash_collision_is_rechecked_on_the_client(start_cluster):
    assert java_string_hash("Aa") == java_string_hash("BB")
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Collide", 1)
    tags = ["Aa", "BB", "C", "Aa", "D", "BB", "Aa"]
    _send(cfg, [Message("Collide", f"m{i}".encode(), tags=tag) for i, tag in enumerate(tags)])
    with PullConsumer("CG", config=cfg) as consumer:
        mq = consumer.queues("Collide")[0]
        wait_until(lambda: consumer.max_offset(mq) == len(tags), 10, what="dispatch")
        # What the broker answers, before the client's re-check: "BB" shares "Aa"'s hash, "C" and "D" do not.
        endpoint = consumer._endpoint(mq)
        raw = consumer.rpc.call(endpoint, broker_api.pull_request("CG", mq, 0, 32, "Aa", 0))
        from_broker = broker_api.pull_result(raw, mq, endpoint, None)
        assert [m.tags for m in from_broker.messages] == ["Aa", "BB", "Aa", "BB", "Aa"]
        # The client drops the collision.
        result = consumer.pull(mq, 0, 32, "Aa")
        assert [m.body for m in result.messages] == [b"m0", b"m3", b"m6"]
        assert result.next_begin_offset == len(tags)
        assert [m.tags for m in consumer.pull(mq, 0, 32, MessageSelector.by_tag("C || D")).messages] == ["C", "D"]
        # Nothing matches: the broker moves the consumer past what it scanned.
        nothing = consumer.pull(mq, 0, 32, "E")
        assert nothing.status == PullStatus.NO_MATCHED_MSG and nothing.next_begin_offset == len(tags)

    push, received = _push_consumer(cfg, "PushTags", "Collide", "Aa || D")
    push.start()
    try:
        wait_until(lambda: len(received) >= 4, 20, what="the four Aa and D messages")
        await_group_caught_up(cfg, "Collide", "PushTags")
        assert sorted(m.body for m in received) == [b"m0", b"m3", b"m4", b"m6"]
    finally:
        push.shutdown()


def _sql_messages(topic: str) -> list[Message]:
    colors = ["red", "green", "blue"]
    messages = []
    for i in range(60):
        properties = {"color": colors[i % 3]}
        if i % 10 != 7:  # some messages lack "a" entirely
            properties["a"] = str(i)
        messages.append(Message(topic, f"m{i}".encode(), tags=f"T{i % 4}", properties=properties))
    return messages


def _expected(messages: list[Message], predicate) -> list[bytes]:
    return sorted(m.body for m in messages if predicate(m.properties, m.tags))


def _sql_cluster(start_cluster, topic: str, queues: int):
    """A cluster with the property filter on, and ``topic`` holding ``_sql_messages``: (client config, messages)."""
    cfg = client_config(start_cluster(broker_overrides=PROPERTY_FILTER))
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, queues)
    messages = _sql_messages(topic)
    _send(cfg, messages)
    return cfg, messages


def test_push_consumer_with_an_sql_selector_gets_exactly_the_matching_messages(start_cluster):
    cfg, messages = _sql_cluster(start_cluster, "Sql", 2)
    expression = "a >= 10 AND a < 40 AND color IN ('red', 'blue') OR TAGS = 'T3' AND a IS NULL"
    expected = _expected(messages, lambda p, tag: ("a" in p and 10 <= int(p["a"]) < 40 and p["color"] in ("red", "blue"))
                         or (tag == "T3" and "a" not in p))
    assert 10 < len(expected) < 40
    push, received = _push_consumer(cfg, "PushSql", "Sql", MessageSelector.by_sql(expression))
    push.start()
    try:
        wait_until(lambda: len(received) >= len(expected), 20, what=f"{len(expected)} matching messages")
        await_group_caught_up(cfg, "Sql", "PushSql")
        assert sorted(m.body for m in received) == expected
        # A later message is filtered the same way, through the long poll.
        _send(cfg, [Message("Sql", b"late-no", properties={"a": "50", "color": "red"}),
                    Message("Sql", b"late-yes", properties={"a": "20", "color": "blue"})])
        wait_until(lambda: any(m.body == b"late-yes" for m in received), 20, what="the late matching message")
        await_group_caught_up(cfg, "Sql", "PushSql")
        assert b"late-no" not in {m.body for m in received}
    finally:
        push.shutdown()


def test_pull_consumer_sql_selector_and_offsets(start_cluster):
    cfg, messages = _sql_cluster(start_cluster, "SqlPull", 1)
    with PullConsumer("CG", config=cfg) as consumer:
        mq = consumer.queues("SqlPull")[0]
        wait_until(lambda: consumer.max_offset(mq) == 60, 10, what="dispatch")
        selector = MessageSelector.by_sql("color = 'green' AND a BETWEEN 0 AND 30")
        result = consumer.pull(mq, 0, 32, selector)
        green = _expected(messages, lambda p, _: p["color"] == "green" and "a" in p and 0 <= int(p["a"]) <= 30)
        assert result.status == PullStatus.FOUND
        assert sorted(m.body for m in result.messages) == green
        assert result.next_begin_offset == 60  # everything was scanned
        # At most maxMsgNums matches; the next pull starts right after the last one returned.
        first_two = consumer.pull(mq, 0, 2, selector)
        assert [m.queue_offset for m in first_two.messages] == [1, 4]
        assert first_two.next_begin_offset == 5
        # Nothing matches: PULL_RETRY_IMMEDIATELY, and the consumer moves past the scanned range.
        nothing = consumer.pull(mq, 0, 32, MessageSelector.by_sql("color = 'purple'"))
        assert nothing.status == PullStatus.NO_MATCHED_MSG and nothing.messages == []
        assert nothing.next_begin_offset == 60
        with pytest.raises(BrokerError) as refused:
            consumer.pull(mq, 0, 32, MessageSelector.by_sql("color = "))
        assert refused.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "unexpected end of the expression at position 8" in str(refused.value)


def _refused_at_start(cfg, group: str, topic: str, selector: MessageSelector) -> BrokerError:
    """What start() of a push consumer with ``selector`` raises (it must raise)."""
    with Admin(config=cfg) as admin:
        admin.create_topic(topic, 1)
    consumer, _ = _push_consumer(cfg, group, topic, selector)
    try:
        with pytest.raises(BrokerError) as refused:
            consumer.start()
    finally:
        consumer.shutdown()
    return refused.value


def test_an_invalid_sql_expression_is_refused_at_start(start_cluster):
    cluster = start_cluster(broker_overrides=PROPERTY_FILTER)
    cfg = client_config(cluster)
    refused = _refused_at_start(cfg, "PushBad", "SqlBad", MessageSelector.by_sql("a > 'x'"))
    assert refused.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "topic SqlBad" in refused.remark
    assert "'x' cannot be compared with > (numbers only) at position 2" in refused.remark
    with Admin(config=cfg) as admin:  # the refused consumer never joined the group
        endpoint = f"tcp://{cluster.topology.brokers[0].address}"
        with pytest.raises(BrokerError):
            broker_api.consumer_ids(admin.rpc, endpoint, "PushBad")


def test_sql_subscriptions_are_refused_when_the_property_filter_is_off(start_cluster):
    cluster = start_cluster()  # enable_property_filter defaults to False, as RocketMQ's enablePropertyFilter
    cfg = client_config(cluster)
    refused = _refused_at_start(cfg, "PushOff", "SqlOff", MessageSelector.by_sql("a > 1"))
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert "does not filter messages by SQL92" in refused.remark and "enable_property_filter" in refused.remark
    _send(cfg, [Message("SqlOff", b"x", properties={"a": "2"})])
    with PullConsumer("CG", config=cfg) as puller:
        mq = puller.queues("SqlOff")[0]
        with pytest.raises(BrokerError, match="enable_property_filter"):
            puller.pull(mq, 0, 32, MessageSelector.by_sql("a > 1"))
        # Tag subscriptions are unaffected.
        wait_until(lambda: puller.max_offset(mq) == 1, 10, what="dispatch")
        assert [m.body for m in puller.pull(mq, 0, 32, "*").messages] == [b"x"]
