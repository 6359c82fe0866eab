"""``cluster up`` starts the web console and the metrics endpoint in one supervised child (``web``);
the console refuses to listen beyond loopback; the web process itself refuses a non-loopback
console address and a taken port at boot."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import psutil
import pytest

from rocketbox.cluster.console.settings import ConsoleSettings, loopback_problem
from rocketbox.cluster.supervision.lifecycle import EXIT_BOOT_ERROR
from rocketbox.cluster.supervision.run_state import read_state_file
from rocketbox.cluster.testing import wait_until
from rocketbox.cluster.topology import free_ports, web_config_json
from tests.cli_helpers import run_cli, up_on_free_ports
from tests.console.pages import fetch

pytestmark = pytest.mark.timeout(240)


def _cli(data_dir: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    return run_cli(*args, data_dir=data_dir, check=check, timeout_s=180)


def _web_child(data_dir: str) -> dict:
    return next(c for c in (read_state_file(data_dir) or {}).get("children", []) if c["name"] == "web")


def _listening_ports(pid: int) -> set[int]:
    return {c.laddr.port for c in psutil.Process(pid).net_connections("tcp") if c.status == psutil.CONN_LISTEN}


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read().decode()


def _ports_args(ports) -> list[str]:
    namesrv, broker, metrics = ports
    return ["--namesrv-port", str(namesrv), "--broker-port", str(broker), "--metrics-port", str(metrics),
            "--no-remoting", "--no-proxy", "--commitlog-file-size-bytes", str(16 * 1024 * 1024)]


def test_cluster_up_serves_the_console_and_the_metrics_from_one_process_and_a_second_cluster_on_its_port_is_refused(
        tmp_path):
    data_dir = str(tmp_path / "up")
    ports, up = up_on_free_ports(4, lambda p: ("up", "--detach", *_ports_args(p[:3]), "--console-port", str(p[3])),
                                 data_dir=data_dir)
    metrics, console = ports[2], ports[3]
    try:
        url, metrics_url = f"http://127.0.0.1:{console}/", f"http://127.0.0.1:{metrics}/metrics"
        assert f"web console: {url}" in " ".join(up.stdout.split()), up.stdout
        assert f"Prometheus metrics: {metrics_url}" in " ".join(up.stdout.split()), up.stdout
        status = json.loads(_cli(data_dir, "status", "--json").stdout)
        assert not {"console", "metrics"} & {c["name"] for c in status["children"]}
        child = next(c for c in status["children"] if c["name"] == "web")
        assert (child["role"], child["state"]) == ("web", "running")
        assert (child["ready_info"]["console"], child["ready_info"]["metrics"]) == (url, metrics_url)
        with open(f"/proc/{child['pid']}/cmdline", "rb") as f:
            assert f.read().replace(b"\0", b" ").strip().startswith(b"rocketbox: web")
        # One process listens on both ports, each where it was told, and says which is which in its log.
        assert _listening_ports(child["pid"]) == {console, metrics}
        with open(os.path.join(data_dir, "logs", "web.log"), encoding="utf-8") as f:
            log = f.read()
        assert f"console on {url}" in log and f"metrics on {metrics_url}" in log, log[-2000:]
        page = fetch(url, "/cluster")
        assert page.status == 200 and "web" in {r["attrs"]["data-process"] for r in page.table("processes")}
        assert "rocketbox_broker_up{" in _scrape(metrics_url)

        # A killed web process is restarted by the supervisor, both doors on the same ports.
        os.kill(child["pid"], signal.SIGKILL)
        wait_until(lambda: (c := _web_child(data_dir))["state"] == "running" and c["pid"] != child["pid"], 60,
                   interval_s=0.1, what="the web process restarted")
        assert fetch(url, "/topics").status == 200
        assert 'rocketbox_process_restarts_total{' in _scrape(metrics_url)
        assert _listening_ports(_web_child(data_dir)["pid"]) == {console, metrics}

        busy = _cli(str(tmp_path / "second"), "up", "--detach", *_ports_args(free_ports(3)),
                    "--console-port", str(console), check=False)
        assert busy.returncode == 1
        assert f"console's web console port {console} is in use by rocketbox: web" in busy.stderr, busy.stderr
    finally:
        _cli(data_dir, "down")


def test_cluster_up_refuses_a_console_beyond_loopback_before_starting_anything(tmp_path):
    refused = _cli(str(tmp_path / "open"), "up", "--detach", *_ports_args(free_ports(3)),
                   "--console-host", "0.0.0.0", check=False)
    assert refused.returncode == 1
    assert "the console refuses to listen on 0.0.0.0 without access control" in refused.stderr, refused.stderr
    assert "--acl-file" in refused.stderr
    assert not (tmp_path / "open" / "cluster.json").exists()


@pytest.mark.parametrize("host", ["0.0.0.0", "10.77.0.1", "::", "example.org"])
def test_only_loopback_addresses_are_accepted(host):
    assert loopback_problem(host)
    with pytest.raises(ValueError, match="console"):
        ConsoleSettings(host=host, namesrv_endpoints=("tcp://127.0.0.1:9871",)).validate()
    for loopback in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert loopback_problem(loopback) is None


def _run_console(settings: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocketbox.cluster.procs.web", "--config-json",
                           web_config_json(json.dumps(settings), None)], capture_output=True, text=True, timeout=60)


def test_the_console_process_refuses_a_wide_address_and_a_taken_port_at_boot():
    base = {"namesrv_endpoints": ["tcp://127.0.0.1:1"], "state_path": "/nonexistent/cluster.json"}
    wide = _run_console({**base, "host": "0.0.0.0", "port": free_ports(1)[0]})
    assert wide.returncode == EXIT_BOOT_ERROR and "refuses to listen on 0.0.0.0" in wide.stderr, wide.stderr
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = _run_console({**base, "host": "127.0.0.1", "port": holder.getsockname()[1]})
    assert taken.returncode == EXIT_BOOT_ERROR and "Address already in use" in taken.stderr, taken.stderr


ACL = """
accounts:
  - accessKey: operator1
    secretKey: operator1-secret
    admin: true
"""


def test_cluster_up_console_trust_loopback_serves_loopback_without_credentials_and_is_remembered(tmp_path):
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    data_dir = str(tmp_path / "trusting")
    ports, up = up_on_free_ports(4, lambda p: ("up", "--detach", "--acl-file", str(acl_file), *_ports_args(p[:3]),
                                               "--console-port", str(p[3]), "--console-trust-loopback"),
                                 data_dir=data_dir)
    url = f"http://127.0.0.1:{ports[3]}/"
    try:
        assert f"web console: {url}" in " ".join(up.stdout.split()) and "log in" not in up.stdout, up.stdout
        assert fetch(url, "/cluster").status == 200
        assert fetch(url, "/cluster", headers={"Host": f"127.0.0.1.evil.example:{ports[3]}"}).status == 403
    finally:
        _cli(data_dir, "down")
    again = _cli(data_dir, "up", "--detach")   # the data dir remembers the flag with the rest
    try:
        assert f"web console: {url}" in " ".join(again.stdout.split()), again.stdout
        assert fetch(url, "/topics").status == 200
    finally:
        _cli(data_dir, "down")
    refused = _cli(str(tmp_path / "no-acl"), "up", "--detach", *_ports_args(free_ports(3)), "--console-trust-loopback",
                   check=False)
    assert refused.returncode == 1 and "without an ACL file" in refused.stderr, refused.stderr
