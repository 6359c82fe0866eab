"""The README's "Using it" blocks (access control among them), then its high-availability blocks,
run in order as written, from a directory outside the checkout, in one data dir, as a newcomer runs them: the shell blocks by bash with ``set -e``, the Python blocks by the venv's python, in a
home of their own so ``~/.rocketbox`` is fresh. The README cannot drift from what works."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from rocketbox.cluster.config import (BROKER_PORT_DEFAULT, BROKER_REMOTING_PORT_DEFAULT, METRICS_PORT_DEFAULT,
                                      NAMESRV_PORT_DEFAULT, NAMESRV_REMOTING_PORT_DEFAULT)
from rocketbox.cluster.proxy.settings import PROXY_PORT_DEFAULT
from rocketbox.cluster.console.settings import CONSOLE_PORT_DEFAULT

CHECKOUT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(sh|python)\n(.*?)^```$", re.S | re.M)


def section_blocks(title: str) -> list[tuple[str, str]]:
    """(language, code) of every sh and python block of one section of the README, in order."""
    text = (CHECKOUT / "README.md").read_text()
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return FENCE.findall(section)


def using_it_blocks() -> list[tuple[str, str]]:
    return section_blocks("Using it")


HIGH_AVAILABILITY = "High availability: slaves and automatic failover"


def walked_blocks() -> list[tuple[str, str]]:
    """What the walk runs: "Using it", then the high-availability section's first block, in the same
    data dir (its failover to watch is tests/integration/test_cli_failover.py's, on free ports)."""
    return using_it_blocks() + section_blocks(HIGH_AVAILABILITY)[:1]


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        # As the servers bind (ZeroMQ, the remoting door, the metrics HTTP server): a connection of
        # an earlier run left in TIME_WAIT does not keep them from binding.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_readme_blocks_are_the_ones_this_test_runs():
    kinds = [kind for kind, _ in using_it_blocks()]
    assert kinds == ["sh", "python", "python", "sh", "sh", "python", "sh", "sh"], kinds
    access_control = using_it_blocks()[4][1]
    assert "--acl-file plain_acl.yml" in access_control and "--account orders-app" in access_control
    assert "for_account" in using_it_blocks()[5][1]
    assert "cluster down" in using_it_blocks()[-1][1]
    (kind, high_availability), (_, watch) = section_blocks(HIGH_AVAILABILITY)
    assert "cluster pause broker-a" in watch and "cluster resume broker-a" in watch
    assert kind == "sh" and "--slaves 1" in high_availability and "--failover" in high_availability
    assert high_availability.rstrip().endswith("cluster down")


# The walk starts a cluster five times (plain, access control, broker.conf, master and slave, failover):
# ~2 min on an idle two-core machine, 4.5 on a loaded one; the script's own limit plus the final down.
@pytest.mark.timeout(780)
def test_using_it_runs_as_written_from_outside_the_checkout(tmp_path):
    # The README uses the default ports, as a newcomer would.
    ports = [NAMESRV_PORT_DEFAULT, BROKER_PORT_DEFAULT, BROKER_PORT_DEFAULT + 1, NAMESRV_REMOTING_PORT_DEFAULT,
             BROKER_REMOTING_PORT_DEFAULT, METRICS_PORT_DEFAULT, PROXY_PORT_DEFAULT,
             CONSOLE_PORT_DEFAULT]
    busy = [port for port in ports if not _port_free(port)]
    if busy:
        pytest.skip(f"the README's default ports {busy} are in use on this machine")
    if not (CHECKOUT / ".venv" / "bin" / "activate").exists():
        pytest.skip("no .venv in the checkout (the README's first line activates it): run make install")
    home = tmp_path / "home"
    home.mkdir()
    script = ["set -euo pipefail", "trap 'echo \"README line failed: $BASH_COMMAND\" >&2' ERR"]
    for number, (kind, code) in enumerate(walked_blocks()):
        if kind == "sh":
            script.append(code)
        else:
            path = tmp_path / f"example_{number}.py"
            path.write_text(code)
            script.append(f"python {shlex.quote(str(path))}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("ROCKETBOX_NAMESRV", "ROCKETBOX_DATA_DIR", "VIRTUAL_ENV", "PYTHONPATH")}
    env["HOME"] = str(home)
    try:
        run = subprocess.run(["bash", "-c", "\n".join(script)], cwd=CHECKOUT, env=env, capture_output=True,
                             text=True, timeout=600)
    finally:
        # Whatever happened, nothing of the README's cluster outlives the test.
        subprocess.run([sys.executable, "-m", "rocketbox.cluster.cli", "--data-dir", str(home / ".rocketbox"), "down"],
                       capture_output=True, timeout=120, env=env)
    assert run.returncode == 0, f"stdout:\n{run.stdout[-4000:]}\nstderr:\n{run.stderr[-4000:]}"
    consumed = re.search(r"^(\d+) messages consumed$", run.stdout, re.M)
    assert consumed and int(consumed.group(1)) >= 100, run.stdout[-2000:]
    assert "SEND_OK" in run.stdout and run.stdout.rstrip().endswith("cluster stopped")
    # The access-control block: the account sends, is refused the topic it has no right to, says why.
    assert "refused, exit 1" in run.stdout
    assert "accessKey=orders-app needs PUB, has DENY" in run.stderr and "access control refused it" in run.stderr
