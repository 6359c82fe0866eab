"""``python -m rocketbox.perf --only metrics``: what Prometheus metrics cost the send path, so that
leaving them on is a measured choice. Two clusters run side by side, one with metrics on (every
broker request timed, the exporter process up and scraped every ``SCRAPE_INTERVAL_S`` by another
process, harder than Prometheus's usual 15 s) and one off (metricsExporterType DISABLE: no exporter, no timing); the
runs alternate between them (on first in even runs, off first in odd ones) so drift in the machine
falls on both. Batched sends show the cost per message, single sync sends the cost per request."""

from __future__ import annotations

import multiprocessing
import os
import time
import urllib.request

from rocketbox.cluster.testing import LocalCluster
from rocketbox.perf.harness import BATCH_SIZE, Settings, client_config, create_topic, run_producers
from rocketbox.perf.report import Report, Row, percentile

SCRAPE_INTERVAL_S = 1.0
SENDS = ((BATCH_SIZE, f"batched {BATCH_SIZE}"), (1, "single sync"))


def _scrape_loop(url: str, interval_s: float, conn) -> None:
    """Another process's GET of ``url`` at once (then "ready"), and every ``interval_s`` until told to
    stop; sends back each scrape's duration (s) and the failures' reasons."""
    durations, failures = [], []

    def scrape() -> None:
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
            durations.append(time.perf_counter() - started)
        except OSError as exc:
            failures.append(str(exc))
    scrape()
    conn.send("ready")
    while not conn.poll(interval_s):
        scrape()
    conn.send((durations, failures))


class Scraper:
    """``_scrape_loop`` in a process of its own: no GIL shared with the producers it watches."""

    def __init__(self, url: str, interval_s: float):
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_scrape_loop, args=(url, interval_s, child), daemon=True)

    def start(self) -> "Scraper":
        self._process.start()
        if not self._conn.poll(60) or self._conn.recv() != "ready":
            raise RuntimeError("the scraper did not start")
        return self

    def stop(self) -> tuple[list[float], list[str]]:
        try:
            self._conn.send("stop")
            if not self._conn.poll(30):
                raise RuntimeError("the scraper did not report")
            return self._conn.recv()
        finally:
            self._process.join(5)
            if self._process.is_alive():
                self._process.terminate()


def scenario_metrics(s: Settings, report: Report, tmp: str) -> None:
    values: dict[tuple[str, str], list[float]] = {}
    with LocalCluster(os.path.join(tmp, "metrics-on")) as on, \
            LocalCluster(os.path.join(tmp, "metrics-off"), metrics=False) as off:
        scraper = Scraper(on.metrics_url, SCRAPE_INTERVAL_S).start()
        try:
            for run in range(s.runs):
                order = (("on", on), ("off", off)) if run % 2 == 0 else (("off", off), ("on", on))
                for label, cluster in order:
                    cfg = client_config(cluster.namesrv)
                    for batch, kind in s.variants(SENDS):
                        topic = f"Metrics{label}{batch}r{run}"
                        create_topic(cfg, topic)
                        total = s.messages if batch > 1 else s.single_sends()
                        sent, elapsed = run_producers(cfg, topic, total, 100, batch, s.producer_threads,
                                                      s.measure_s_max)
                        values.setdefault((kind, label), []).append(sent / elapsed)
        finally:
            durations, failures = scraper.stop()
    if failures or not durations:
        raise RuntimeError(f"scrapes: {len(durations)} answered, failures {failures[:3]}")
    for _batch, kind in s.variants(SENDS):
        for label, how in (("on", f"scraped every {SCRAPE_INTERVAL_S:g} s, requests timed"),
                           ("off", "metricsExporterType DISABLE")):
            report.add(Row("metrics", f"{kind}, 100 B, async flush, metrics {label}", "msg/s",
                           values[(kind, label)],
                           note=f"{how}; {s.producer_threads} producer threads, runs alternate on/off"))
    report.add(Row("metrics", "one scrape of the endpoint (1 broker) under load", "ms",
                   [percentile([d * 1000 for d in durations], 0.5)],
                   note=f"p50 of {len(durations)} scrapes; p99 {percentile(durations, 0.99) * 1000:.1f} ms"))
