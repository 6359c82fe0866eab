"""Logs an operator can read: `cluster logs NAME [-n N] [-f]`, and each process's
log rotated by size with a cap."""

from __future__ import annotations

import glob
import os
import socket
import subprocess
import sys

import pytest

from rocketbox.cluster.testing import LocalCluster, wait_until
from tests.cli_helpers import run_cli

pytestmark = pytest.mark.timeout(120)

MAX_BYTES = 2048
BACKUPS = 2


def _bad_frame(port: int) -> None:
    """A remoting frame whose header length is past its frame: the broker warns (rate-limited)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall((16).to_bytes(4, "big") + (1000).to_bytes(4, "big") + b"x" * 12)
        sock.recv(4096)


def test_logs_rotate_with_a_cap_and_cluster_logs_reads_and_follows_them(tmp_path, monkeypatch):
    monkeypatch.setenv("ROCKETBOX_LOG_MAX_BYTES", str(MAX_BYTES))
    monkeypatch.setenv("ROCKETBOX_LOG_BACKUPS", str(BACKUPS))
    with LocalCluster(str(tmp_path / "logs")) as cluster:
        data_dir = cluster.data_dir
        remoting_port = int(cluster.child("broker-a")["ready_info"]["remoting"].rsplit(":", 1)[1])
        logs = os.path.join(data_dir, "logs")
        follower = subprocess.Popen([sys.executable, "-m", "rocketbox.cluster.cli", "--data-dir", data_dir, "logs",
                                     "broker-a", "-n", "1", "-f", "--follow-s", "60"],
                                    stdout=subprocess.PIPE, text=True)
        try:
            assert follower.stdout.readline()   # the last line: the follower is reading
            # Every kind of bad frame warns a few times per 10 s: enough lines to rotate several times.
            for _ in range(60):
                _bad_frame(remoting_port)
            wait_until(lambda: len(glob.glob(os.path.join(logs, "broker-a.log.*"))) == BACKUPS, 30,
                       what="broker-a's log rotated")
            # -f goes on in the file that replaced the one it began with (bounded by --follow-s).
            followed = next(line for line in follower.stdout if "malformed frame" in line)
        finally:
            follower.terminate()
            follower.communicate(timeout=10)
        files = glob.glob(os.path.join(logs, "broker-a.log*"))
        assert len(files) == BACKUPS + 1   # the cap: the current file and BACKUPS rotated ones
        assert all(os.path.getsize(f) <= 2 * MAX_BYTES for f in files)
        assert "header length 1000" in followed

        everything = run_cli("logs", "broker-a", "-n", "-1", data_dir=data_dir).stdout.splitlines()
        assert len(everything) >= 2
        assert run_cli("logs", "broker-a", "-n", "1", data_dir=data_dir).stdout.splitlines() == everything[-1:]
        missing = run_cli("logs", "broker-z", data_dir=data_dir, check=False)
        assert missing.returncode == 1 and "broker-a-reput" in missing.stderr


def test_a_flood_of_bad_frames_writes_a_bounded_log(tmp_path):
    """Thousands of malformed frames on both doors (the issue saw 1.4 M fuzzed frames write 133 MB):
    each kind of warning is written a few times per 10 s with a count of what was held back, and the
    broker serves on."""
    import random

    import zmq

    from rocketbox.cluster import Message, Producer
    from tests.conftest import client_config

    rng = random.Random(13)
    with LocalCluster(str(tmp_path / "flood")) as cluster:
        log_path = os.path.join(cluster.data_dir, "logs", "broker-a.log")
        before = os.path.getsize(log_path)
        info = cluster.child("broker-a")["ready_info"]
        remoting_port = int(info["remoting"].rsplit(":", 1)[1])
        context = zmq.Context.instance()
        dealer = context.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(info["endpoint"])
        try:
            for _ in range(5000):
                dealer.send_multipart([rng.randbytes(rng.randint(1, 64)), rng.randbytes(rng.randint(0, 64))])
            for _ in range(300):
                _bad_frame(remoting_port)
            with Producer("FloodPG", config=client_config(cluster)) as producer:   # still serving
                assert producer.send(Message("AfterFlood", b"ok")).queue_offset == 0
        finally:
            dealer.close(0)
        grown = os.path.getsize(log_path) - before
        text = open(log_path).read()
        assert text.count("malformed frame") <= 40, text[-2000:]
        assert grown < 32 * 1024, grown

        def counted() -> bool:
            """The first warning of a new window says how many were held back (a window is 10 s)."""
            _bad_frame(remoting_port)
            return "held back in the last 10 s" in open(log_path).read()
        wait_until(counted, 30, interval_s=0.5, what="a held-back count in the log")


def test_up_on_a_busy_port_names_the_cluster_holding_it(tmp_path):
    with LocalCluster(str(tmp_path / "first")) as first:
        namesrv_port = int(first.namesrv.rsplit(":", 1)[1])
        second = run_cli("up", "--detach", "--namesrv-port", str(namesrv_port), "--no-metrics", "--no-remoting", "--no-proxy", "--no-console",
                         data_dir=str(tmp_path / "second"), check=False)
        assert second.returncode == 1
        assert f"namesrv-0's port {namesrv_port} is in use by rocketbox: namesrv-0" in second.stderr
        assert f"of the cluster in {first.data_dir}" in second.stderr and "cluster down --data-dir" in second.stderr
        assert not os.path.exists(os.path.join(tmp_path, "second", "cluster.json"))   # nothing started
