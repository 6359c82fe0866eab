"""Do console pages slow the metrics scrapes? ``python -m rocketbox.perf.web_scrapes [--seconds 10] [--loaders 4]``.

A ``LocalCluster`` with the console and the metrics endpoint (one process, ``procs/web.py``; two on
trees before it), a topic of 8 queues with a few messages. One scraper scrapes ``/metrics`` back to
back, first alone, then while ``--loaders`` threads load the console's heaviest pages (/cluster,
/topics, /groups: each asks every broker and renders a template) as fast as they are answered. Prints
the scrapes' p50/p90/p99/max and count in each phase, and the pages served (perf/RESULTS.md "Start
and footprint": the console and the metrics endpoint in one process).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import urllib.request

from rocketbox.cluster import Message, Producer
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster

PAGES = ("cluster", "topics", "groups")
REQUEST_TIMEOUT_S = 30


def _get(url: str) -> None:
    with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT_S) as response:
        response.read()


def scrapes_ms(url: str, seconds: float) -> list[float]:
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        t0 = time.perf_counter()
        _get(url)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def load_pages(base: str, stop: threading.Event, served: list[int]) -> None:
    i = 0
    while not stop.is_set():
        _get(base + PAGES[i % len(PAGES)])
        served[0] += 1
        i += 1


def summary(label: str, values: list[float]) -> str:
    ordered = sorted(values)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]   # noqa: E731
    return (f"{label:<28} scrapes {len(values):5d}  p50 {statistics.median(values):7.1f} ms  p90 {pick(0.9):7.1f}  "
            f"p99 {pick(0.99):7.1f}  max {ordered[-1]:7.1f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rocketbox.perf.web_scrapes", description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--loaders", type=int, default=4)
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="web-scrapes-") as tmp, \
            LocalCluster(f"{tmp}/cluster", console=True) as cluster:
        with Admin(config=cluster.client_config()) as admin:
            admin.create_topic("WebScrapes", 8)
        with Producer("WebScrapesProducer", config=cluster.client_config()) as producer:
            for i in range(64):
                producer.send(Message("WebScrapes", f"m{i}".encode()))
        scrapes_ms(cluster.metrics_url, 1.0)   # warm: the first scrape and page import what they use
        _get(cluster.console_url + "topics")
        print(summary("alone", scrapes_ms(cluster.metrics_url, options.seconds)))
        stop, served = threading.Event(), [0]
        loaders = [threading.Thread(target=load_pages, args=(cluster.console_url, stop, served), daemon=True)
                   for _ in range(options.loaders)]
        for thread in loaders:
            thread.start()
        try:
            loaded = scrapes_ms(cluster.metrics_url, options.seconds)
        finally:
            stop.set()
            for thread in loaders:
                thread.join(REQUEST_TIMEOUT_S)
        print(summary(f"with {options.loaders} page loaders", loaded))
        print(f"console pages served meanwhile: {served[0]} ({served[0] / options.seconds:.1f}/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
