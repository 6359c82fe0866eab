"""Screenshots of the console's main pages for docs/ (``make console-screenshots``): a small
cluster (a master and its slave) with a little traffic, a consumer group with lag, one online,
dead letters and a chart of the last minute, shot in headless Chromium (tests/console/browser.py).

    python -m tests.console.screenshots [OUT_DIR]        (default docs/console)
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

from rocketbox.cluster import Admin, Message, Producer
from rocketbox.cluster.testing import LocalCluster, wait_until
from tests.conftest import client_config
from tests.console.browser import open_browser
from tests.console.conftest import LEVELS
from tests.console.consumers import Collector

PAGES = [("cluster", "cluster"), ("topics", "topics"), ("topic", "topics/Orders"), ("groups", "groups"),
         ("group", "groups/Shipping"), ("messages", "messages?by=key&topic=Orders&key=order-1"), ("message", None),
         ("dlq", "dlq?group=Ledger"), ("charts", "charts")]
# The chart needs points: traffic for this long before the shots.
TRAFFIC_S = 40


def _traffic(cfg, admin) -> str:
    """Topics of several types, a group with lag, dead letters; the offset msg id of one order."""
    admin.create_topic("Orders", 4, message_type="NORMAL")
    admin.create_topic("Shipments", 2, message_type="FIFO")
    admin.create_topic("Payments", 1)
    with Producer("DocsProducer", config=cfg) as producer:
        with Collector(cfg, "Billing", "Orders"):
            first = producer.send(Message("Orders", b'{"order": 1, "total": 42.5}', tags="paid", keys="order-1"))
            deadline = time.monotonic() + TRAFFIC_S
            n = 1
            while time.monotonic() < deadline:
                producer.send(Message("Orders", f'{{"order": {n}}}'.encode(), keys=f"order-{n}"))
                producer.send(Message("Shipments", f"ship {n}".encode()))
                n += 1
                time.sleep(0.02)
        for i in range(200):   # Billing has stopped: lag
            producer.send(Message("Orders", f'{{"order": {n + i}}}'.encode()))
        with Collector(cfg, "Ledger", "Payments", fail=True, max_reconsume_times=0):
            for i in range(3):
                producer.send(Message("Payments", f"charge {i}".encode()))
            wait_until(lambda: len(admin.dead_letters("Ledger")) == 3, 30, what="dead letters")
    return first.offset_msg_id


def _keep_sending(cfg, stop: threading.Event) -> None:
    """Traffic while the pages are shot: the topic page's TPS and the chart's last points move, and
    the group Shipping has a member online (its client version on the group page)."""
    with Producer("DocsLiveProducer", config=cfg) as producer, Collector(cfg, "Shipping", "Shipments"):
        n = 0
        while not stop.wait(0.02):
            producer.send(Message("Orders", b'{"order": "live"}'))
            n += 1
            if n % 5 == 0:
                producer.send(Message("Shipments", f"ship live {n}".encode()))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = os.path.abspath(argv[0] if argv else os.path.join("docs", "console"))
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as data_dir:
        with LocalCluster(os.path.join(data_dir, "cluster"), slaves=1, console=True,
                          store_overrides={"message_delay_levels": LEVELS}) as cluster:
            cfg = client_config(cluster)
            with Admin(config=cfg) as admin:
                message = _traffic(cfg, admin)
            stop = threading.Event()
            sender = threading.Thread(target=_keep_sending, args=(cfg, stop), daemon=True)
            sender.start()
            try:
                with open_browser() as browser:
                    page = browser.new_page()
                    for name, path in PAGES:
                        page.goto(cluster.console_url + (path or f"messages/{message}"))
                        if name == "charts":
                            page.wait_for_function("Number(document.getElementById('throughput-chart')"
                                                   ".dataset.points || 0) >= 2")
                        if name == "group":   # the live refresh shows the member once it has joined
                            page.wait_for_selector("#members td.version")
                        if name == "topic":   # a refresh a second or more after the first reading: TPS
                            page.wait_for_function("[...document.querySelectorAll('#queues tbody tr td:nth-child(5)')]"
                                                   ".every(td => td.textContent.trim() !== '\u2026')")
                        target = os.path.join(out, f"{name}.png")
                        page.screenshot(path=target, full_page=True)
                        print(target)
            finally:
                stop.set()
                sender.join(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
