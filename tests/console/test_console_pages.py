"""The web console's pages over HTTP against a live cluster: each page shows the
cluster's real state, each form's action reaches the brokers through the Admin API, and bad input
gets an error page with the reason while the console goes on serving."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime

import pytest

from rocketbox.cluster import Message, Producer
from rocketbox.cluster.protocol import MessageQueue
from rocketbox.cluster.testing import wait_until
from tests.conftest import await_group_caught_up
from tests.console.consumers import Collector
from tests.console.pages import fetch, fetch_json, quoted

pytestmark = pytest.mark.timeout(240)


def _iso(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000).isoformat(timespec="milliseconds")


def test_the_cluster_page_shows_every_process_and_each_brokers_role_epoch_lag_and_disk(console_cluster):
    url = console_cluster.console_url
    page = fetch(url, "/cluster")
    assert page.status == 200, page.text[:500]
    processes = {row["attrs"]["data-process"]: row["cells"] for row in page.table("processes")}
    state = console_cluster.state()
    assert set(processes) == {child["name"] for child in state["children"]}
    for child in state["children"]:
        name, role, pid, run, restarts = processes[child["name"]][:5]
        assert (role, pid, run, restarts) == (child["role"], str(child["pid"]), child["state"], str(child["restarts"]))
    assert processes["web"][1] == "web"   # the console's own process, which serves the metrics too

    brokers = {row["attrs"]["data-broker"]: row["cells"] for row in page.table("brokers")}
    assert set(brokers) == {"broker-a/0", "broker-a/1"}
    master, slave = brokers["broker-a/0"], brokers["broker-a/1"]
    assert (master[1], master[2], slave[1], slave[2]) == ("0", "MASTER", "1", "SLAVE")
    assert master[3].isdigit() and slave[3].isdigit()
    assert slave[6].endswith("B") and re.fullmatch(r"\d+\.\d %", master[8]), (master, slave)
    assert master[11] == slave[11] == "yes"

    # The live part (what the page's script fetches) follows the supervisor: a restarted worker.
    old = console_cluster.kill("broker-a-reput")
    console_cluster.await_running("broker-a-reput", not_pid=old)

    def restarted():
        rows = {r["attrs"]["data-process"]: r["cells"] for r in fetch(url, "/cluster?fragment=1").table("processes")}
        return rows["broker-a-reput"][4] == "1" and rows["broker-a-reput"][2] != str(old)
    wait_until(restarted, 30, interval_s=0.2, what="the restart on the cluster page")
    api = fetch_json(url, "/api/cluster")
    assert {p["name"]: p["pid"] for p in api["processes"]} == {c["name"]: c["pid"] for c in console_cluster.state()["children"]}


def test_topics_are_created_filtered_by_type_updated_and_deleted(console_cluster, admin):
    url = console_cluster.console_url
    saved = fetch(url, "/topics", form={"topic": "ConsoleFifo", "queues": "3", "perm": "6", "message_type": "FIFO"})
    assert saved.status == 200 and "topic ConsoleFifo saved" in saved.text
    config = admin.topic_configs("ConsoleFifo")["broker-a"]
    assert (config["writeQueueNums"], config["attributes"]) == (3, {"message.type": "FIFO"})
    admin.create_topic("ConsolePlain", 1)

    def listed(kind: str) -> dict:
        return {r["attrs"]["data-topic"]: r["attrs"]["data-kind"] for r in fetch(url, f"/topics?kind={kind}").table("topics")}
    assert listed("FIFO").get("ConsoleFifo") == "FIFO"
    assert "ConsolePlain" not in listed("FIFO") and "ConsolePlain" in listed("NORMAL")
    assert all(kind == "SYSTEM" for kind in listed("SYSTEM").values()) and "TBW102" in listed("SYSTEM")

    updated = fetch(url, "/topics", form={"topic": "ConsoleFifo", "queues": "5", "perm": "4", "message_type": ""})
    assert updated.status == 200, updated.text[:500]
    config = admin.topic_configs("ConsoleFifo")["broker-a"]
    assert (config["writeQueueNums"], config["perm"], config["attributes"]) == (5, 4, {"message.type": "FIFO"})

    unconfirmed = fetch(url, "/topics/ConsoleFifo/delete", form={"confirm": "ConsoleFif"})
    assert unconfirmed.status == 400 and "to confirm its deletion" in unconfirmed.by_id("error-message")
    assert admin.topic_configs("ConsoleFifo")
    deleted = fetch(url, "/topics/ConsoleFifo/delete", form={"confirm": "ConsoleFifo"})
    assert deleted.status == 200 and "topic ConsoleFifo deleted" in deleted.text
    assert admin.topic_configs("ConsoleFifo") == {}
    wait_until(lambda: "ConsoleFifo" not in listed(""), 10, what="the topic gone from the list")


def test_a_topic_page_shows_queue_offsets_and_tps_and_its_test_message_reaches_a_consumer(console_cluster, admin, cfg):
    url = console_cluster.console_url
    admin.create_topic("ConsoleOrders", 2)
    with Producer("ConsoleOrdersProducer", config=cfg) as producer:
        for i in range(6):
            producer.send(Message("ConsoleOrders", f"order {i}".encode()))
        wait_until(lambda: sum(q["maxOffset"] for q in admin.queue_offsets("ConsoleOrders")) == 6, 10,
                   what="the six messages dispatched")
        page = fetch(url, "/topics/ConsoleOrders")
        assert page.status == 200, page.text[:500]
        shown = {r["attrs"]["data-queue"]: r["cells"] for r in page.table("queues")}
        expected = {f"{q['broker']}:{q['queueId']}": [str(q["minOffset"]), str(q["maxOffset"])]
                    for q in admin.queue_offsets("ConsoleOrders")}
        assert {k: v[2:4] for k, v in shown.items()} == expected
        assert sum(int(v[1]) for v in expected.values()) == 6

        def tps_shown():
            producer.send(Message("ConsoleOrders", b"more"))
            rows = fetch(url, "/topics/ConsoleOrders?fragment=1").cells("queues")
            return any(re.fullmatch(r"\d+\.\d+", row[4]) and float(row[4]) > 0 for row in rows)
        wait_until(tps_shown, 20, interval_s=0.3, what="a queue's TPS on the topic page")

    with Collector(cfg, "ConsoleOrdersReader", "ConsoleOrders") as reader:
        sent = fetch(url, "/topics/ConsoleOrders/send", form={"body": "hello from the console", "tags": "console",
                                                              "keys": "k-1 k-2"})
        assert sent.status == 200 and "SEND_OK" in sent.by_id("sent"), sent.text[:800]
        msg_id = re.search(r'class="msg-id">([0-9A-F]+)<', sent.text).group(1)
        got = wait_until(lambda: reader.by_msg_id(msg_id), 30, what="the test message at a native consumer")
        assert (got[0].body, got[0].tags, got[0].keys) == (b"hello from the console", "console", ["k-1", "k-2"])

    unknown = fetch(url, "/topics/NoSuchTopic/send", form={"body": "x"})
    assert unknown.status == 404 and "NoSuchTopic" in unknown.by_id("error-message")
    assert "NoSuchTopic" not in admin.topic_list()   # no test message creates a topic


def test_a_group_page_shows_members_subscriptions_and_lag_and_resets_its_offsets(console_cluster, admin, cfg):
    url, topic, group = console_cluster.console_url, "ConsoleReset", "ConsoleResetGroup"
    admin.create_topic(topic, 1)
    with Producer("ConsoleResetProducer", config=cfg) as producer:
        first = producer.send(Message(topic, b"r0"))
        for i in range(1, 5):
            producer.send(Message(topic, f"r{i}".encode()))
    first_stored = admin.view_message(first.offset_msg_id).store_timestamp_ms
    with Collector(cfg, group, topic) as reader:
        wait_until(lambda: len(reader.bodies()) == 5, 30, what="five deliveries")
        await_group_caught_up(cfg, topic, group)
        page = wait_until(lambda: (p := fetch(url, f"/groups/{group}")).cells("members") and p, 20,
                          what="the member on the group page")
        assert [row[0] for row in page.cells("members")] == [reader.consumer.client_id]
        assert [row[:2] for row in page.cells("subscriptions") if row[0] == topic] == [[topic, "*"]]
        queues = {r["attrs"]["data-queue"]: r["cells"] for r in page.table("group-queues")}
        assert queues[f"{topic}/broker-a:0"][3:6] == ["5", "5", "0"]
        assert group in {r["attrs"]["data-group"] for r in fetch(url, "/groups").table("groups")}
        assert f"%RETRY%{group}" in {r["attrs"]["data-topic"] for r in fetch(url, "/topics?kind=RETRY").table("topics")}

        reset = fetch(url, f"/groups/{group}/reset", form={"topic": topic, "time": str(first_stored)})
        assert reset.status == 200 and "moved to the chosen time" in reset.text, reset.text[:800]
        assert reset.cells("reset-result") == [["broker-a", "0", "0"]]
        wait_until(lambda: sorted(reader.bodies()) == sorted([f"r{i}".encode() for i in range(5)] * 2), 30,
                   what="the group reading the topic again from the reset")
    with Producer("ConsoleResetProducer", config=cfg) as producer:
        for i in range(3):
            producer.send(Message(topic, f"late {i}".encode()))
    wait_until(lambda: fetch(url, f"/groups/{group}?fragment=1").by_id("total-lag") == "3", 20, what="lag 3 shown")
    skipped = fetch(url, f"/groups/{group}/reset", form={"topic": topic, "skip": "1"})
    assert skipped.status == 200 and "accumulation skipped" in skipped.text
    assert [row["lag"] for row in admin.queue_offsets(topic, group)] == [0]
    assert fetch(url, f"/groups/{group}").by_id("total-lag") == "0"


def test_messages_are_found_four_ways_with_properties_body_consume_state_and_retries(console_cluster, admin, cfg):
    url, topic = console_cluster.console_url, "ConsoleLookup"
    admin.create_topic(topic, 1)
    with Producer("ConsoleLookupProducer", config=cfg) as producer:
        text = producer.send(Message(topic, b"order seven", tags="paid", keys="order-7", properties={"tenant": "acme"}))
        binary = producer.send(Message(topic, bytes(range(256)), keys="blob"))
    stored = admin.view_message(text.offset_msg_id).store_timestamp_ms

    def found(query: str) -> list[list[str]]:
        page = fetch(url, "/messages?" + query)
        assert page.status == 200, page.text[:500]
        return [row for row in page.cells("found") if len(row) > 1]
    assert [row[0] for row in found(f"by=id&msg_id={text.offset_msg_id}")] == [text.msg_id]
    assert [row[0] for row in found(f"by=unique&topic={topic}&key={text.msg_id}")] == [text.msg_id]
    window = f"by=key&topic={topic}&key=order-7&begin={quoted(_iso(stored - 1000))}&end={quoted(_iso(stored + 1000))}"
    assert [row[0] for row in found(window)] == [text.msg_id]
    later = f"by=key&topic={topic}&key=order-7&begin={stored + 60_000}"
    assert found(later) == []
    assert [row[0] for row in found(f"by=offset&topic={topic}&broker=broker-a&queue=0&offset=1")] == [binary.msg_id]

    with Collector(cfg, "ConsoleLookupOk", topic) as ok, Collector(cfg, "ConsoleLookupFails", topic, fail=True,
                                                                  max_reconsume_times=1) as failing:
        wait_until(lambda: len(ok.bodies()) == 2 and len(failing.by_msg_id(text.msg_id)) == 2, 30,
                   what="deliveries to both groups, the failing one twice")
        await_group_caught_up(cfg, topic, "ConsoleLookupOk")

        def detail_with_retries():
            page = fetch(url, f"/messages/{text.offset_msg_id}")
            retries = page.cells("retries")
            return page if any(r[0] == "%DLQ%ConsoleLookupFails" for r in retries) else None
        page = wait_until(detail_with_retries, 30, interval_s=0.3, what="the retry and dead-letter copies listed")
    properties = dict(page.cells("properties"))
    assert (properties["KEYS"], properties["TAGS"], properties["tenant"], properties["UNIQ_KEY"]) == \
        ("order-7", "paid", "acme", text.msg_id)
    assert page.by_id("body") == "order seven"
    tracks = {r["attrs"]["data-group"]: r["cells"][1] for r in page.table("tracks")}
    assert tracks["ConsoleLookupOk"] == "CONSUMED"
    retries = page.cells("retries")
    assert [r[:2] for r in retries] == [["%RETRY%ConsoleLookupFails", "1"], ["%DLQ%ConsoleLookupFails", "2"]]

    hex_page = fetch(url, f"/messages/{binary.offset_msg_id}")
    assert hex_page.by_id("body").startswith("00000000  00 01 02 03") and "body-hex" in hex_page.text


def test_dead_letters_are_listed_and_resent_from_the_page(console_cluster, admin, cfg):
    url, topic, group = console_cluster.console_url, "ConsolePayments", "ConsoleLedger"
    admin.create_topic(topic, 1)
    with Collector(cfg, group, topic, fail=True, max_reconsume_times=0):
        with Producer("ConsolePaymentsProducer", config=cfg) as producer:
            sent = [producer.send(Message(topic, f"charge {i}".encode())) for i in range(3)]
        wait_until(lambda: len(admin.dead_letters(group)) == 3, 30, what="three dead letters")
    page = fetch(url, f"/dlq?group={group}")
    rows = {r["attrs"]["data-msg-id"]: r["cells"] for r in page.table("dead-letters")}
    assert set(rows) == {s.msg_id for s in sent}
    assert all(cells[1] == topic and cells[4] == "no" for cells in rows.values())

    one = fetch(url, f"/dlq/{group}/resend", form={"msg_id": sent[0].msg_id})
    assert one.status == 200 and one.cells("resend-result") == [[sent[0].msg_id, topic, "RESENT"]]
    again = fetch(url, f"/dlq/{group}/resend", form={"msg_id": sent[0].msg_id})
    assert again.cells("resend-result") == [[sent[0].msg_id, topic, "ALREADY_RESENT"]]
    everything = fetch(url, f"/dlq/{group}/resend", form={"all": "1"})
    assert sorted(r[2] for r in everything.cells("resend-result")) == ["ALREADY_RESENT", "RESENT", "RESENT"]
    assert sum(row["maxOffset"] for row in admin.queue_offsets(topic)) == 6   # three originals, three copies
    assert fetch(url, f"/dlq/{group}/resend", form={"msg_id": "F" * 32}).status == 400


def test_the_throughput_history_follows_the_traffic(console_cluster, cfg):
    url = console_cluster.console_url
    admin_topic = "ConsoleLoad"
    with Producer("ConsoleLoadProducer", config=cfg) as producer:
        def busy_point():
            for _ in range(20):
                producer.send(Message(admin_topic, b"load"))
            points = fetch_json(url, "/api/throughput")["points"]
            return any(p["in"] > 0 and "broker-a/0" in p["by"] for p in points)
        wait_until(busy_point, 30, interval_s=0.2, what="a throughput point with messages in")
    chart = fetch(url, "/charts")
    assert chart.status == 200 and 'data-chart="/api/throughput"' in chart.text


def test_a_form_action_redirects_to_its_page_which_shows_the_result_once(console_cluster, admin):
    # POST/redirect/GET: reloading the page a form led to repeats nothing.
    url, topic = console_cluster.console_url, "ConsolePrg"
    admin.create_topic(topic, 1)
    posted = fetch(url, f"/topics/{topic}/send", form={"body": "once"}, follow=False)
    assert posted.status == 303, (posted.status, posted.text[:300])
    location = posted.header("location")
    assert location.startswith(f"/topics/{topic}?flash="), location
    shown = fetch(url, location)
    assert shown.status == 200 and "SEND_OK" in shown.by_id("sent")
    again = fetch(url, location)   # the reload: the same page, the message sent once, told once
    assert again.status == 200 and again.by_id("sent") == ""
    stored = lambda: sum(q["maxOffset"] for q in admin.queue_offsets(topic))   # noqa: E731
    wait_until(lambda: stored() >= 1, 30, what="the message in its queue (dispatch follows SEND_OK)")
    assert stored() == 1
    deleted = fetch(url, f"/topics/{topic}/delete", form={"confirm": topic}, follow=False)
    assert deleted.status == 303 and "topic ConsolePrg deleted" in fetch(url, deleted.header("location")).text


def test_the_group_list_hides_system_groups_behind_a_toggle_and_filters_and_sorts(console_cluster, admin, cfg):
    # rocketmq-dashboard lists the tools' and brokers' own groups only when asked.
    url, topic = console_cluster.console_url, "ConsoleVisibleOrders"
    admin.create_topic(topic, 1)
    with Producer("ConsoleVisibleProducer", config=cfg) as producer:
        for i in range(3):
            producer.send(Message(topic, f"v{i}".encode()))
    admin.message_at(MessageQueue(topic, "broker-a", 0), 0)   # the Admin reads as TOOLS_CONSUMER
    consumed = subprocess.run([sys.executable, "-m", "rocketbox.cluster.cli", "--data-dir", console_cluster.data_dir,
                               "--namesrv", console_cluster.namesrv, "consume", topic, "--max", "1"],
                              capture_output=True, text=True, timeout=60)
    assert consumed.returncode == 0, consumed.stderr   # as CLI_CONSUMER, the CLI's default group
    with Collector(cfg, "ConsoleVisibleGroup", topic) as reader, Collector(cfg, "ConsoleOtherGroup", topic):
        wait_until(lambda: len(reader.bodies()) == 3, 30, what="the visible group's deliveries")
        page = fetch(url, "/groups")
        listed = [r["attrs"]["data-group"] for r in page.table("groups")]
        assert "ConsoleVisibleGroup" in listed and not {"TOOLS_CONSUMER", "CLI_CONSUMER"} & set(listed), listed
        hidden = " ".join(page.by_id("hidden-groups").split())
        assert re.match(r"\d+ system groups hidden \(", hidden) and "CLI_CONSUMER" in hidden, hidden
        every = fetch(url, "/groups?system=1")
        tagged = {r["attrs"]["data-group"]: r["cells"][0] for r in every.table("groups")}
        assert tagged["TOOLS_CONSUMER"] == "TOOLS_CONSUMER system" and tagged["CLI_CONSUMER"] == "CLI_CONSUMER system"
        assert tagged["ConsoleVisibleGroup"] == "ConsoleVisibleGroup"
        assert [r["attrs"]["data-group"] for r in fetch(url, "/groups?q=consolevisible").table("groups")] == \
            ["ConsoleVisibleGroup"]
        by_name = [r["attrs"]["data-group"] for r in fetch(url, "/groups?q=Console&sort=group").table("groups")]
        assert by_name == sorted(by_name) and {"ConsoleVisibleGroup", "ConsoleOtherGroup"} <= set(by_name)
        assert fetch(url, "/groups?sort=sideways").status == 400
        # A member's version as RocketMQ's tools name it (MQVersion.getVersionDesc), not its number.
        members = fetch(url, "/groups/ConsoleVisibleGroup").table("members")
        assert [m["cells"][3] for m in members] == ["V4_9_4"]
    assert [r["attrs"]["data-topic"] for r in fetch(url, "/topics?q=visibleorders").table("topics")] == [topic]


def test_a_message_is_found_by_either_of_its_ids_with_or_without_its_topic(console_cluster, admin, cfg):
    # The "By message id" form and the message page take the msgId (UNIQ_KEY) too.
    url, topic = console_cluster.console_url, "ConsoleEitherId"
    admin.create_topic(topic, 2)
    admin.create_topic("ConsoleEitherOther", 1)
    with Producer("ConsoleEitherProducer", config=cfg) as producer:
        sent = producer.send(Message(topic, b"either way", keys="either-1"))
    # A msg id (UNIQ_KEY) is found through the IndexFile, which the reput worker writes a few ms after
    # the send (woken at most every 10 ms): the page is asked once the index has it.
    wait_until(lambda: admin.query_by_unique_key(topic, sent.msg_id), 10, interval_s=0.01,
               what="the message in the IndexFile")

    def found(query: str) -> list[str]:
        page = fetch(url, "/messages?by=id&" + query)
        assert page.status == 200, page.text[:500]
        return [r["attrs"]["data-offset-msg-id"] for r in page.table("found") if len(r["cells"]) > 1]
    for msg_id in (sent.msg_id, sent.offset_msg_id):
        assert found(f"msg_id={msg_id}") == [sent.offset_msg_id], msg_id
        assert found(f"msg_id={msg_id}&topic={topic}") == [sent.offset_msg_id], msg_id
        assert found(f"msg_id={msg_id}&topic=ConsoleEitherOther") == [], msg_id
        detail = fetch(url, f"/messages/{msg_id}")
        assert detail.status == 200 and detail.by_id("body") == "either way", msg_id
    assert found("msg_id=" + "0" * 32) == []


BAD_REQUESTS = [
    ("/topics", {"topic": "Bad", "queues": "many"}, 400, "queues must be a whole number"),
    ("/topics", {"topic": "Bad", "queues": "0"}, 400, "queues must lie in [1, 1024]"),
    ("/topics", {"topic": "bad name!", "queues": "1"}, 400, "topic"),
    ("/topics", {"topic": "Bad", "message_type": "WEIRD"}, 400, "message type must be one of"),
    ("/topics", {"topic": "%DLQ%Bad"}, 400, "retry or dead-letter topic"),
    ("/topics", {"queues": "1"}, 400, "topic is required"),
    ("/topics?kind=ODD", None, 400, "unknown topic type"),
    ("/topics/NoSuchTopic", None, 404, "NoSuchTopic"),
    ("/groups/NoSuchGroup", None, 404, "NoSuchGroup"),
    ("/groups/NoSuchGroup/reset", {"topic": "NoSuchTopic", "time": "yesterday"}, 400, "neither epoch milliseconds"),
    ("/messages?by=id&msg_id=" + "0" * 65, None, 400, "msg id is longer than 64 characters"),
    ("/messages/" + "0" * 32, None, 404, "no message has the id " + "0" * 32),
    ("/messages?by=offset&topic=T&broker=broker-a&queue=-1&offset=0", None, 400, "queue must lie in"),
    ("/messages?by=sideways", None, 400, "look up by one of"),
    ("/messages/" + "Z" * 40 + "?topic=NoSuchTopic", None, 404, "topic NoSuchTopic has no route"),
    ("/messages/" + "Z" * 65, None, 400, "a message id is at most 64 characters"),
    ("/dlq/NoSuchGroup/resend", {}, 400, "msg id is required"),
    ("/no/such/page", None, 404, "no page at /no/such/page"),
]


@pytest.mark.parametrize("path, form, status, reason", BAD_REQUESTS, ids=[f"{p} {f}" for p, f, _, _ in BAD_REQUESTS])
def test_bad_input_gets_an_error_page_with_the_reason(console_cluster, path, form, status, reason):
    pid = console_cluster.pid("web")
    page = fetch(console_cluster.console_url, path, form=form)
    assert page.status == status, page.text[:800]
    assert reason in page.by_id("error-message"), page.by_id("error-message")
    assert fetch(console_cluster.console_url, "/cluster").status == 200 and console_cluster.pid("web") == pid


def test_a_refusal_of_the_broker_shows_its_reason(console_cluster):
    # The schedule's topic is the broker's own: it refuses, and says why.
    page = fetch(console_cluster.console_url, "/topics", form={"topic": "SCHEDULE_TOPIC_XXXX", "queues": "1"})
    assert page.status == 502, page.text[:800]
    assert "conflict with system topic" in page.by_id("error-message")
    assert page.by_id("error-message").startswith("NO_PERMISSION (16) from tcp://")


# Names an attacker's DNS may point at 127.0.0.1 (DNS rebinding): the browser sends them as the Host.
REBOUND_HOSTS = ("127.0.0.1.evil.example", "127.evil", "localhost.evil", "127.1", "evil.example")


def test_requests_another_site_could_make_are_refused(console_cluster, admin):
    url = console_cluster.console_url
    port = url.rstrip("/").rsplit(":", 1)[1]
    forged = fetch(url, "/topics", form={"topic": "ConsoleForged", "queues": "1"},
                   headers={"Origin": "http://evil.example"})
    assert forged.status == 403 and "ConsoleForged" not in admin.topic_list()
    cross_site = fetch(url, "/topics", form={"topic": "ConsoleForged", "queues": "1"},
                       headers={"Origin": url.rstrip("/"), "Sec-Fetch-Site": "cross-site"})
    assert cross_site.status == 403 and "ConsoleForged" not in admin.topic_list()
    for name in REBOUND_HOSTS:
        for host in (name, f"{name}:{port}"):
            rebound = fetch(url, "/cluster", headers={"Host": host})
            assert rebound.status == 403 and "DNS rebinding" in rebound.text, (host, rebound.status)
            topic = f"ConsoleRebound{REBOUND_HOSTS.index(name)}"
            posted = fetch(url, "/topics", form={"topic": topic, "queues": "1"},
                           headers={"Host": host, "Origin": f"http://{host}"})
            assert posted.status == 403, (host, posted.status)
            assert topic not in admin.topic_list()
    for n, host in enumerate((f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "localhost", "127.0.0.5")):
        assert fetch(url, "/cluster", headers={"Host": host}).status == 200, host
        posted = fetch(url, "/topics", form={"topic": f"ConsoleLoopback{n}", "queues": "1"},
                       headers={"Host": host, "Origin": f"http://{host}"})
        assert posted.status == 200, (host, posted.status, posted.text[:300])
    other_loopback = fetch(url, "/topics", form={"topic": "ConsoleForged", "queues": "1"},
                           headers={"Host": f"127.0.0.1:{port}", "Origin": f"http://localhost:{port}"})
    assert other_loopback.status == 403 and "ConsoleForged" not in admin.topic_list()
    same_site = fetch(url, "/topics", form={"topic": "ConsoleSameSite", "queues": "1"},
                      headers={"Origin": url.rstrip("/"), "Sec-Fetch-Site": "same-origin"})
    assert same_site.status == 200
    huge = fetch(url, "/topics/ConsoleSameSite/send", form={"body": "x" * 300_000})
    assert huge.status == 413


def test_a_flood_of_bad_requests_is_answered_and_logged_within_bounds(console_cluster):
    url = console_cluster.console_url
    log_path = f"{console_cluster.data_dir}/logs/web.log"
    pid = console_cluster.pid("web")
    with open(log_path, "rb") as f:
        before = len(f.read())
    statuses = {fetch(url, path, form=form).status for _ in range(20) for path, form, _, _ in BAD_REQUESTS}
    assert statuses == {400, 404}
    with open(log_path, "rb") as f:
        grown = f.read()[before:]
    assert len(grown) < 32 * 1024, len(grown)
    assert b"more like this held back" in grown or grown.count(b"\n") <= 60
    assert fetch(url, "/cluster").status == 200 and console_cluster.pid("web") == pid
