"""The web console in a real browser: headless Chromium (Debian's package, driven
by Playwright) against a live cluster. Every page renders with real data and its script runs (live
refresh, the chart); a test message sent from the page reaches a native consumer; a reset offset
made on the page reaches a running group; a dead-letter resend made on the page arrives.

Skipped, with the reason printed, where chromium is missing or does not start (make browser)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import datetime

import pytest

from rocketbox.cluster import Message, Producer
from rocketbox.cluster.testing import wait_until
from tests.conftest import await_group_caught_up
from tests.console.browser import BrowserUnavailable, open_browser
from tests.console.consumers import Collector

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def browser():
    try:
        with open_browser() as context:
            yield context
    except BrowserUnavailable as exc:
        print(f"browser tests skipped: {exc}")
        pytest.skip(str(exc))


@pytest.fixture
def page(browser, console_cluster):
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    yield tab
    tab.close()
    assert not errors, f"script errors on the page: {errors}"


def _go(page, selector: str) -> None:
    """Click what loads a page (a link, a form's button: a POST answered by a redirect) and await that
    page: a count read at once after a bare click met the old page or none (fresh-clone runs)."""
    with page.expect_navigation(timeout=30_000):
        page.click(selector)


def _text(page, selector: str) -> str:
    return page.locator(selector).inner_text().strip()


def test_every_page_renders_real_data_and_its_script_runs(page, console_cluster, admin, cfg):
    url, topic, group = console_cluster.console_url, "BrowserOrders", "BrowserOrdersGroup"
    admin.create_topic(topic, 2, message_type="NORMAL")
    with Collector(cfg, group, topic) as reader, Producer("BrowserOrdersProducer", config=cfg) as producer:
        sent = [producer.send(Message(topic, f"order {i}".encode(), keys=f"order-{i}")) for i in range(8)]
        wait_until(lambda: len(reader.bodies()) == 8, 30, what="the group consuming the orders")
        await_group_caught_up(cfg, topic, group)

        page.goto(url + "cluster")
        assert _text(page, '#brokers tr[data-broker="broker-a/0"] td.role') == "MASTER"
        assert _text(page, '#brokers tr[data-broker="broker-a/1"] td.role') == "SLAVE"
        assert page.locator("#processes tbody tr").count() == len(console_cluster.state()["children"])
        # The script replaced the live region at least once (fetch + setInterval).
        page.wait_for_function("document.querySelector('[data-live]').dataset.refreshed !== undefined")
        assert _text(page, '#processes tr[data-process="web"] td.state') == "running"

        page.goto(url + "topics")
        assert _text(page, f'#topics tr[data-topic="{topic}"] td.kind') == "NORMAL"
        page.select_option("#topic-filter select[name=kind]", "DLQ")   # submits on change
        page.wait_for_url(re.compile(r"/topics\?.*kind=DLQ"))
        assert page.locator(f'#topics tr[data-topic="{topic}"]').count() == 0
        page.select_option("#topic-filter select[name=kind]", "NORMAL")
        page.wait_for_url(re.compile(r"/topics\?.*kind=NORMAL"))
        _go(page, f'#topics tr[data-topic="{topic}"] a')
        page.wait_for_url(f"**/topics/{topic}")
        maxima = [int(t) for t in page.locator("#queues td.max-offset").all_inner_texts()]
        assert sum(maxima) == 8 and len(maxima) == 2
        page.wait_for_function("document.querySelector('[data-live]').dataset.refreshed !== undefined")
        assert page.locator("#queues td.max-offset").count() == 2   # still there after the refresh

        page.goto(url + "groups")
        _go(page, f'#groups tr[data-group="{group}"] a')
        assert _text(page, "#members tbody tr td >> nth=0") == reader.consumer.client_id
        assert _text(page, "#total-lag") == "0"

        page.goto(url + "messages")
        page.fill("#by-unique input[name=topic]", topic)
        page.fill("#by-unique input[name=key]", sent[3].msg_id)
        _go(page, "#by-unique button")
        _go(page, f"#found a:text('{sent[3].msg_id}')")
        assert _text(page, "#body") == "order 3"
        assert _text(page, f'#tracks tr[data-group="{group}"] td.track') == "CONSUMED"

        page.goto(url + "charts")
        page.wait_for_function("Number(document.getElementById('throughput-chart').dataset.points || 0) >= 2",
                               timeout=60_000)
        assert page.locator("#throughput-chart polyline.series-in").count() == 1


def test_a_test_message_sent_from_the_page_reaches_a_native_consumer(page, console_cluster, admin, cfg):
    url, topic = console_cluster.console_url, "BrowserSend"
    admin.create_topic(topic, 1)
    with Collector(cfg, "BrowserSendReader", topic) as reader:
        page.goto(url + f"topics/{topic}")
        page.fill("#send-form input[name=tags]", "from-browser")
        page.fill("#send-form input[name=keys]", "b-1")
        page.fill("#send-form textarea[name=body]", "typed in chromium")
        _go(page, "#send-form button")
        assert _text(page, "#sent .status") == "SEND_OK"
        msg_id = _text(page, "#sent .msg-id")
        got = wait_until(lambda: reader.by_msg_id(msg_id), 30, what="the page's message at the consumer")
    assert (got[0].body, got[0].tags, got[0].keys) == (b"typed in chromium", "from-browser", ["b-1"])


def test_a_reset_offset_made_on_the_page_reaches_a_running_group(page, console_cluster, admin, cfg):
    url, topic, group = console_cluster.console_url, "BrowserReset", "BrowserResetGroup"
    admin.create_topic(topic, 1)
    with Producer("BrowserResetProducer", config=cfg) as producer:
        first = producer.send(Message(topic, b"b0"))
        for i in range(1, 4):
            producer.send(Message(topic, f"b{i}".encode()))
    stored_s = admin.view_message(first.offset_msg_id).store_timestamp_ms // 1000
    expected = [f"b{i}".encode() for i in range(4)]
    with Collector(cfg, group, topic) as reader:
        wait_until(lambda: sorted(reader.bodies()) == expected, 30, what="the first reading")
        await_group_caught_up(cfg, topic, group)
        page.goto(url + f"groups/{group}")
        page.select_option("#reset-form select[name=topic]", topic)
        # A browser's datetime-local value (seconds): the second the first message was stored in.
        page.fill("#reset-form input[name=time]", datetime.fromtimestamp(stored_s).strftime("%Y-%m-%dT%H:%M:%S"))
        _go(page, "#reset-form button:text('Reset to the time')")
        assert page.locator("#reset-result tbody tr").count() == 1
        wait_until(lambda: sorted(reader.bodies()) == sorted(expected * 2), 30,
                   what="the running group reading again from the page's reset")


def test_a_dead_letter_resend_made_on_the_page_arrives(page, console_cluster, admin, cfg):
    url, topic, group = console_cluster.console_url, "BrowserPayments", "BrowserLedger"
    admin.create_topic(topic, 1)
    with Collector(cfg, group, topic, fail=True, max_reconsume_times=0) as ledger:
        with Producer("BrowserPaymentsProducer", config=cfg) as producer:
            sent = [producer.send(Message(topic, f"pay {i}".encode())) for i in range(2)]
        wait_until(lambda: len(admin.dead_letters(group)) == 2, 30, what="two dead letters")
        ledger.fail = False   # the bug is fixed: the group now takes what is resent

        page.goto(url + "dlq")
        page.fill("#dlq-group input[name=group]", group)
        _go(page, "#dlq-group button")
        assert page.locator("#dead-letters tbody tr").count() == 2
        _go(page, f'#dead-letters tr[data-msg-id="{sent[1].msg_id}"] button')
        assert _text(page, "#resend-result td.status") == "RESENT"
        wait_until(lambda: len(ledger.by_msg_id(sent[1].msg_id)) == 2, 30,
                   what="the resent letter at the group")
        assert _text(page, f'#dead-letters tr[data-msg-id="{sent[1].msg_id}"] td.resent') == "yes"

        page.check("#resend-all input[name=force]")
        _go(page, "#resend-all button")
        statuses = sorted(page.locator("#resend-result td.status").all_inner_texts())
        assert statuses == ["RESENT", "RESENT"]
        wait_until(lambda: len(ledger.by_msg_id(sent[0].msg_id)) == 2 and len(ledger.by_msg_id(sent[1].msg_id)) == 3,
                   30, what="every letter resent once more")


# A newcomer's walk through the console: message keys, lookups by either id, forms that redirect.

def _cli_send(cluster, topic: str, body: str, keys: str) -> dict:
    """What `cluster send --json` prints: the ids a user copies from the terminal."""
    done = subprocess.run([sys.executable, "-m", "rocketbox.cluster.cli", "--data-dir", cluster.data_dir,
                           "--namesrv", cluster.namesrv, "send", topic, body, "--keys", keys, "--json"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[0])


def _look_up(page, form: str, **fields) -> None:
    for name, value in fields.items():
        page.fill(f"#{form} input[name={name}]", value)
    _go(page, f"#{form} button")
    page.wait_for_selector("#found, #error-message")


def test_every_lookup_shows_the_messages_keys(page, console_cluster, admin, cfg):
    url, topic = console_cluster.console_url, "BrowserKeys"
    admin.create_topic(topic, 1)
    with Producer("BrowserKeysProducer", config=cfg) as producer:
        sent = producer.send(Message(topic, b"keyed", keys=["order-7", "vip"]))
    lookups = [("by-id", {"msg_id": sent.offset_msg_id}), ("by-unique", {"topic": topic, "key": sent.msg_id}),
               ("by-key", {"topic": topic, "key": "vip"}),
               ("by-offset", {"topic": topic, "broker": "broker-a", "queue": "0", "offset": "0"})]
    for form, fields in lookups:
        page.goto(url + "messages")
        _look_up(page, form, **fields)
        keys_column = page.locator("#found tbody tr td:nth-child(5)")   # msg id, topic, queue, tags, keys
        assert keys_column.all_inner_texts() == ["order-7 vip"], form


def test_the_by_message_id_form_takes_every_id_the_console_and_the_cli_show(page, console_cluster, admin, cfg):
    url, topic = console_cluster.console_url, "BrowserIds"
    admin.create_topic(topic, 2)
    printed = _cli_send(console_cluster, topic, "from the terminal", "terminal-1")
    with Producer("BrowserIdsProducer", config=cfg) as producer:
        producer.send(Message(topic, b"from a program", keys="program-1"))
    # The ids as the console's own table shows them: msg id as the row's text, offset msg id in its link.
    page.goto(url + "messages")
    _look_up(page, "by-key", topic=topic, key="program-1")
    shown_msg_id = page.locator("#found tbody td:nth-child(1)").inner_text().strip()
    shown_offset_id = page.locator("#found tbody td:nth-child(1) a").get_attribute("href").rsplit("/", 1)[1]
    pasted = [(printed["msgId"], "from the terminal"), (printed["offsetMsgId"], "from the terminal"),
              (shown_msg_id, "from a program"), (shown_offset_id, "from a program")]
    for msg_id, body in pasted:
        page.goto(url + "messages")
        _look_up(page, "by-id", msg_id=msg_id)
        assert page.locator("#found tbody a").count() == 1, (msg_id, page.locator("main").inner_text()[:300])
        _go(page, "#found tbody a")
        assert _text(page, "#body") == body, msg_id


def test_a_topics_first_page_shows_each_queues_rate_at_once(page, console_cluster, admin, cfg):
    url, topic = console_cluster.console_url, "BrowserRates"
    admin.create_topic(topic, 2)
    with Producer("BrowserRatesProducer", config=cfg) as producer:
        for i in range(30):
            producer.send(Message(topic, f"r{i}".encode()))
    wait_until(lambda: sum(q["maxOffset"] for q in admin.queue_offsets(topic)) == 30, 30, what="all 30 dispatched")
    page.goto(url + f"topics/{topic}")   # the console's first reading of these queues
    shown = page.locator("#queues tbody tr td:nth-child(5)").all_inner_texts()
    assert len(shown) == 2 and all(re.fullmatch(r"\d+(\.\d+)?", t) for t in shown), shown
    assert 0 < sum(float(t) for t in shown) <= 1.02   # 30 messages over the last 30 s: 1 a second at most


def test_the_charts_ticks_are_round_numbers(page, console_cluster):
    page.goto(console_cluster.console_url + "charts")
    page.wait_for_function("typeof drawChart === 'function'")
    for peak, step in ((50, 10), (37.5, 10), (801, 200), (3.7, 1), (1.2, 0.5), (0.3, 0.1), (0, 0.2), (1234, 500)):
        labels = page.evaluate("""peak => {
            const svg = document.getElementById('throughput-chart');
            drawChart(svg, {window_s: 600, points: [{t: Date.now(), in: peak, out: 0, by: {}}]});
            return [...svg.querySelectorAll('text.axis[text-anchor=end]')].map(t => t.textContent);
        }""", peak)
        values = [float(label) for label in labels]
        assert values == [pytest.approx(step * i) for i in range(len(values))], (peak, labels)
        assert values[-1] >= peak and all(label == f"{v:g}" for label, v in zip(labels, values)), (peak, labels)


def test_the_look_up_buttons_are_as_big_as_their_text(page, console_cluster):
    page.goto(console_cluster.console_url + "messages")
    for form in ("by-id", "by-unique", "by-key", "by-offset"):
        sizes = page.evaluate("""selector => {
            const button = document.querySelector(selector), style = getComputedStyle(button);
            const range = document.createRange();
            range.selectNodeContents(button);
            const text = range.getBoundingClientRect(), box = button.getBoundingClientRect();
            return {width: box.width, height: box.height,
                    textWidth: text.width + parseFloat(style.paddingLeft) + parseFloat(style.paddingRight),
                    textHeight: text.height + parseFloat(style.paddingTop) + parseFloat(style.paddingBottom)};
        }""", f"#{form} button")
        # Its text and padding, give or take a rounding: not stretched to the tallest form beside it.
        assert sizes["height"] <= sizes["textHeight"] + 4 and sizes["width"] <= sizes["textWidth"] + 4, (form, sizes)


def test_reloading_the_page_after_a_test_message_sends_nothing_again(page, console_cluster, admin):
    url, topic = console_cluster.console_url, "BrowserReload"
    admin.create_topic(topic, 1)
    page.goto(url + f"topics/{topic}")
    page.fill("#send-form textarea[name=body]", "only once")
    _go(page, "#send-form button")
    assert _text(page, "#sent .status") == "SEND_OK"
    assert "/send" not in page.url   # POST/redirect/GET: the page shown is a GET of the topic
    page.reload()
    assert page.locator("#sent").count() == 0   # the flash is shown once
    assert sum(q["maxOffset"] for q in admin.queue_offsets(topic)) == 1
