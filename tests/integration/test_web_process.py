"""The web process (``procs/web.py``): the console and the metrics endpoint in one child, each turned
off on its own, each door isolated from the other (a page waiting on the cluster holds no scrape),
a taken port of either a boot error."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from rocketbox.cluster.console.settings import ConsoleSettings
from rocketbox.cluster.metrics.settings import ExporterSettings
from rocketbox.cluster.supervision.lifecycle import EXIT_BOOT_ERROR
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.topology import WEB_CHILD, build_topology, child_specs, free_ports, web_config_json

pytestmark = pytest.mark.timeout(120)


def _web_doors(**options) -> dict | None:
    """The web child's two doors' settings in the child table of a topology built with ``options``."""
    specs = [spec for spec in child_specs(build_topology("/nonexistent/web", **options)) if spec.role == "web"]
    assert not {"console", "metrics"} & {spec.name for spec in child_specs(build_topology("/nonexistent/web",
                                                                                           **options))}
    if not specs:
        return None
    assert [spec.name for spec in specs] == [WEB_CHILD]
    return json.loads(specs[0].args[specs[0].args.index("--config-json") + 1])


def test_one_child_serves_what_is_on_and_none_runs_when_both_are_off():
    """cluster up's --no-console (console_port None) and --no-metrics (metricsExporterType DISABLE)
    each take their door out of the one web child; both off, no web child."""
    both = _web_doors(console_port=8082)
    assert (both["console"]["port"], both["metrics"]["port"]) == (8082, 5557)
    assert both["console"]["host"] == both["metrics"]["host"] == "127.0.0.1"
    only_metrics = _web_doors()
    assert only_metrics["console"] is None and only_metrics["metrics"]["port"] == 5557
    only_console = _web_doors(console_port=8082, broker_overrides={"metrics_exporter_type": "DISABLE"})
    assert only_console["metrics"] is None and only_console["console"]["port"] == 8082
    assert _web_doors(broker_overrides={"metrics_exporter_type": "DISABLE"}) is None


def _start_web(console: ConsoleSettings | None, metrics: ExporterSettings | None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "rocketbox.cluster.procs.web", "--config-json",
                             web_config_json(console.to_json() if console else None,
                                             metrics.to_json() if metrics else None)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _get(url: str, timeout_s: float = 30) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _serves(url: str) -> bool:
    try:
        return _get(url, 5)[0] == 200
    except OSError:
        return False


def test_a_console_page_waiting_on_the_cluster_does_not_hold_a_scrape(tmp_path):
    """The console's NameServer accepts connections and never answers, so a page waits its request
    time-out (60 s); while one waits, scrapes of the same process are answered."""
    silent = socket.create_server(("127.0.0.1", 0))   # accepts (the kernel's backlog), never speaks
    console_port, metrics_port = free_ports(2)
    console = ConsoleSettings(port=console_port, namesrv_endpoints=(f"tcp://127.0.0.1:{silent.getsockname()[1]}",),
                              state_path=str(tmp_path / "cluster.json"), request_timeout_ms=60_000)
    metrics = ExporterSettings(host="127.0.0.1", port=metrics_port, cluster_name="DefaultCluster", brokers=(),
                               state_path=str(tmp_path / "cluster.json"))
    web = _start_web(console, metrics)
    try:
        wait_until(lambda: _serves(metrics.url) and _serves(console.url + "static/console.js"), 60,
                   interval_s=0.05, what="both doors")
        with socket.create_connection(("127.0.0.1", console_port), timeout=30) as page:
            page.sendall(b"GET /topics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            for _ in range(5):
                assert _get(metrics.url)[0] == 200
            page.setblocking(False)
            with pytest.raises(BlockingIOError):   # the page still waits on its NameServer
                page.recv(1)
    finally:
        web.terminate()
        web.wait(30)
        silent.close()


def test_a_taken_metrics_port_fails_the_boot_of_a_process_that_serves_the_console_too(tmp_path):
    console = ConsoleSettings(port=free_ports(1)[0], namesrv_endpoints=("tcp://127.0.0.1:1",),
                              state_path=str(tmp_path / "cluster.json"))
    with socket.create_server(("127.0.0.1", 0)) as holder:
        metrics = ExporterSettings(host="127.0.0.1", port=holder.getsockname()[1], cluster_name="DefaultCluster",
                                   brokers=(), state_path=str(tmp_path / "cluster.json"))
        web = _start_web(console, metrics)
        out, _ = web.communicate(timeout=60)
    assert web.returncode == EXIT_BOOT_ERROR and "Address already in use" in out, out
