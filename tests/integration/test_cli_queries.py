"""`cluster query` in each form (offset msg id, msg id, key and time range, queue and offset) with every
group's consume status, and `cluster dlq list | show | resend`, against real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import datetime

from rocketbox.cluster import Admin, ConsumeStatus, Message, MessageQueue, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.testing import read_topic, wait_until
from tests.conftest import client_config

# Short delay levels so retries take a second (tests/integration/test_delay_retry.py).
LEVELS = "300ms 600ms 900ms 1200ms 1500ms 1800ms"


def _run(cluster, *args, expect: int = 0):
    """``cluster --namesrv ... args``; the records with --json (JSON Lines), else the finished process."""
    proc = subprocess.run([sys.executable, "-m", "rocketbox.cluster.cli", "--data-dir", cluster.data_dir,
                           "--namesrv", cluster.namesrv, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == expect, f"cluster {' '.join(args)}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return [json.loads(line) for line in proc.stdout.splitlines()] if "--json" in args else proc


def _tracks(row: dict) -> dict[str, str]:
    return {t["consumerGroup"]: t["trackType"] for t in row["tracks"]}


def test_every_query_form_finds_the_message_and_shows_who_consumed_it(start_cluster):
    cluster = start_cluster()
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Orders", 1)
    with Producer("QueryProducer", config=cfg) as producer, Admin(config=cfg) as admin:
        first = producer.send(Message("Orders", b"first order", tags="new", keys="order-1"))
        stored_first = admin.view_message(first.offset_msg_id).store_timestamp_ms
        wait_until(lambda: time.time() * 1000 > stored_first + 5, 5, what="a later millisecond")
        second = producer.send(Message("Orders", b"second order", tags="new", keys=["order-1", "vip"]))
        stored_second = admin.view_message(second.offset_msg_id).store_timestamp_ms

    by_offset_id = _run(cluster, "query", "--id", first.offset_msg_id, "--json")
    assert [(m["msgId"], m["broker"], m["queueOffset"]) for m in by_offset_id] == [(first.msg_id, "broker-a", 0)]
    by_msg_id = _run(cluster, "query", "--msg-id", second.msg_id, "--topic", "Orders", "--json")
    assert [m["body"] for m in by_msg_id] == ["second order"]
    assert by_msg_id[0]["keys"] == ["order-1", "vip"] and by_msg_id[0]["tracks"] == []   # no group yet
    _run(cluster, "query", "--msg-id", "0" * 32, "--topic", "Orders", expect=1)

    def bodies(*args) -> list[str]:
        return sorted(m["body"] for m in _run(cluster, "query", "--key", "order-1", "--topic", "Orders", "--json",
                                              *args))
    assert bodies() == ["first order", "second order"]
    assert bodies("--begin", str(stored_second)) == ["second order"]
    assert bodies("--end", str(stored_first)) == ["first order"]
    iso_second = datetime.fromtimestamp(stored_second / 1000).astimezone().isoformat(timespec="milliseconds")
    assert bodies("--begin", iso_second) == ["second order"]
    assert len(bodies("--max", "1")) == 1

    at = _run(cluster, "query", "--topic", "Orders", "--broker", "broker-a", "--queue", "0", "--offset", "1", "--json")
    assert [m["msgId"] for m in at] == [second.msg_id]
    assert _run(cluster, "query", "--topic", "Orders", "--queue", "0", "--offset", "0", "--json")[0]["body"] == \
        "first order"   # one broker: --broker may be left out
    _run(cluster, "query", "--topic", "Orders", "--queue", "0", "--offset", "7", expect=1)
    assert "--offset needs --queue" in _run(cluster, "query", "--topic", "Orders", "--offset", "0", expect=2).stderr

    # A group that has committed offset 1 has consumed the first message, not the second.
    with PullConsumer("Billing", config=cfg) as billing:
        billing.commit_offset(MessageQueue("Orders", "broker-a", 0), 1)
    assert _tracks(_run(cluster, "query", "--msg-id", first.msg_id, "--topic", "Orders", "--json")[0]) == \
        {"Billing": "CONSUMED"}
    assert _tracks(_run(cluster, "query", "--msg-id", second.msg_id, "--topic", "Orders", "--json")[0]) == \
        {"Billing": "NOT_CONSUME_YET"}
    # The group reads on from its offset and commits: now the second is consumed too (and shown in text).
    _run(cluster, "consume", "Orders", "--group", "Billing", "--from-committed", "--commit")
    text = _run(cluster, "query", "--topic", "Orders", "--queue", "0", "--offset", "1").stdout
    assert "second order" in text and "group Billing: CONSUMED (committed offset 2)" in text


def _dead_letters(cfg, group: str) -> list:
    with Admin(config=cfg) as admin:
        return admin.dead_letters(group)


def test_dead_letters_are_listed_shown_and_resent_once(start_cluster):
    cluster = start_cluster(store_overrides={"message_delay_levels": LEVELS})
    cfg = client_config(cluster)
    with Admin(config=cfg) as admin:
        admin.create_topic("Payments", 1)
    failing = PushConsumer("Ledger", config=cfg, consume_batch_max=1, max_reconsume_times=1)
    failing.subscribe("Payments")
    failing.register_listener(lambda messages: ConsumeStatus.RECONSUME_LATER)
    failing.start()
    try:
        with Producer("PaymentProducer", config=cfg) as producer:
            sent = producer.send(Message("Payments", b"charge 42", tags="card", keys="pay-42",
                                         properties={"tenant": "acme"}))
        wait_until(lambda: _dead_letters(cfg, "Ledger"), 30, what="the dead letter")
        # The group moved past the message once it gave up on it: the original shows as consumed.
        wait_until(lambda: _tracks(_run(cluster, "query", "--msg-id", sent.msg_id, "--topic", "Payments",
                                        "--json")[0]).get("Ledger") == "CONSUMED", 30, what="Ledger's commit")
    finally:
        failing.shutdown()   # else the resent copy would fail again and die a second time

    listed = _run(cluster, "dlq", "list", "Ledger", "--json")
    assert len(listed) == 1
    letter = listed[0]
    assert letter["msgId"] == sent.msg_id and letter["originTopic"] == "Payments"
    assert letter["reconsumeTimes"] == 2 and letter["bodyPreview"] == "charge 42" and letter["resent"] is False
    assert f"{sent.msg_id} topic=Payments reconsumeTimes=2" in _run(cluster, "dlq", "list", "Ledger").stdout
    shown = _run(cluster, "dlq", "show", "Ledger", sent.msg_id, "--json")
    assert [(m["body"], m["topic"], m["properties"]["RETRY_TOPIC"]) for m in shown] == \
        [("charge 42", "%DLQ%Ledger", "Payments")]
    _run(cluster, "dlq", "show", "Ledger", "F" * 32, expect=1)

    first = _run(cluster, "dlq", "resend", "Ledger", "--all", "--json")
    assert [(r["status"], r["msgId"], r["topic"]) for r in first] == [("RESENT", sent.msg_id, "Payments")]
    with PullConsumer("PaymentsCheck", config=cfg) as reader:
        arrived = wait_until(lambda: [m for m in read_topic(reader, "Payments") if m.queue_offset > 0], 10,
                             what="the resent copy in Payments")
        copy = arrived[0]
        assert (copy.body, copy.msg_id, copy.tags, copy.keys) == (b"charge 42", sent.msg_id, "card", ["pay-42"])
        assert copy.reconsume_times == 0 and copy.properties["tenant"] == "acme"
        assert "RETRY_TOPIC" not in copy.properties and "ORIGIN_MESSAGE_ID" not in copy.properties

        again = _run(cluster, "dlq", "resend", "Ledger", "--all", "--json")
        assert [r["status"] for r in again] == ["ALREADY_RESENT"]
        by_id = _run(cluster, "dlq", "resend", "Ledger", "--msg-id", sent.msg_id)
        assert by_id.stdout.startswith("ALREADY_RESENT") and "0 resent, 1 not" in by_id.stderr
        assert len(read_topic(reader, "Payments")) == 2   # the original and one copy
        assert _run(cluster, "dlq", "list", "Ledger", "--json")[0]["resent"] is True
        forced = _run(cluster, "dlq", "resend", "Ledger", "--msg-id", letter["offsetMsgId"], "--force", "--json")
        assert [r["status"] for r in forced] == ["RESENT"]
        wait_until(lambda: len(read_topic(reader, "Payments")) == 3, 10, what="the forced copy")
    _run(cluster, "dlq", "resend", "Ledger", "--msg-id", "F" * 32, expect=1)
    nobody = _run(cluster, "dlq", "list", "NobodyFails", expect=1)   # a group the cluster does not know
    assert nobody.stdout == "" and "consumer group NobodyFails is not known" in nobody.stderr
