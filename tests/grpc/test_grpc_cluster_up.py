"""``cluster up`` starts the gRPC proxy as a supervised child, as a newcomer would use it."""

from __future__ import annotations

import json
import subprocess

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.topology import free_ports
from tests.grpc.grpc_client import received, run_grpc, sent
from tests.cli_helpers import run_cli, up_on_free_ports


def _cli(data_dir: str, *args, check: bool = True) -> subprocess.CompletedProcess:
    return run_cli(*args, data_dir=data_dir, check=check, timeout_s=180)


@pytest.mark.timeout(300)
def test_cluster_up_serves_rocketmq5_clients_through_its_proxy(tmp_path):
    data_dir = str(tmp_path / "up")
    ports, up = up_on_free_ports(6, lambda p: (
        "up", "--detach", "--namesrv-port", str(p[0]), "--broker-port", str(p[1]),
        "--namesrv-remoting-port", str(p[2]), "--broker-remoting-port", str(p[3]),
        "--metrics-port", str(p[4]), "--proxy-port", str(p[5]), "--commitlog-file-size-bytes", str(16 * 1024 * 1024)),
        data_dir=data_dir)
    namesrv, broker, namesrv_remoting, broker_remoting, metrics, proxy = ports
    try:
        endpoint = f"127.0.0.1:{proxy}"
        assert f"RocketMQ 5 clients (gRPC): endpoints {endpoint}" in " ".join(up.stdout.split()), up.stdout
        status = json.loads(_cli(data_dir, "status", "--json").stdout)
        child = next(c for c in status["children"] if c["name"] == "proxy")
        assert child["role"] == "proxy" and child["state"] == "running"
        assert child["ready_info"]["endpoint"] == f"grpc://{endpoint}"
        with open(f"/proc/{child['pid']}/cmdline", "rb") as f:
            assert f.read().replace(b"\0", b" ").strip().startswith(b"rocketbox: proxy")
        with Admin(f"127.0.0.1:{namesrv}") as admin:
            admin.create_topic("UpGrpc", 2)
        lines = run_grpc("produce", {"endpoint": endpoint, "topic": "UpGrpc",
                                     "messages": [{"body": f"up-{i}"} for i in range(5)]}, tmp_path / "p")
        assert len(sent(lines)) == 5, lines
        got = received(run_grpc("simple", {"endpoint": endpoint, "group": "UpGrpcCG", "topic": "UpGrpc",
                                           "expect": 5, "max_s": 60}, tmp_path / "c"))
        assert sorted(r["body"] for r in got) == [f"up-{i}" for i in range(5)]
        # Another cluster on the same proxy port is refused before it starts, naming the holder.
        others = [str(p) for p in free_ports(5)]
        busy = _cli(str(tmp_path / "second"), "up", "--detach", "--namesrv-port", others[0], "--broker-port",
                    others[1], "--namesrv-remoting-port", others[2], "--broker-remoting-port", others[3],
                    "--metrics-port", others[4], "--proxy-port", str(proxy), check=False)
        assert busy.returncode == 1
        assert f"proxy's gRPC port {proxy} is in use by rocketbox: proxy" in busy.stderr, busy.stderr
    finally:
        _cli(data_dir, "down")


@pytest.mark.timeout(300)
def test_cluster_up_grpc_front_native_serves_through_the_c_front_end(tmp_path):
    import socket
    import struct
    data_dir = str(tmp_path / "native")
    ports, _ = up_on_free_ports(6, lambda p: (
        "up", "--detach", "--namesrv-port", str(p[0]), "--broker-port", str(p[1]),
        "--namesrv-remoting-port", str(p[2]), "--broker-remoting-port", str(p[3]),
        "--metrics-port", str(p[4]), "--proxy-port", str(p[5]), "--grpc-front", "native",
        "--commitlog-file-size-bytes", str(16 * 1024 * 1024)), data_dir=data_dir)
    namesrv, proxy = ports[0], ports[5]
    try:
        with socket.create_connection(("127.0.0.1", proxy), timeout=10) as sock:
            sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(3) + b"\x04" + bytes(5))
            head = sock.recv(9 + 18)
        # The native front end's SETTINGS: MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE 1 MiB, MAX_HEADER_LIST_SIZE
        assert head[3] == 4 and struct.unpack(">HI", head[15:21]) == (4, 1 << 20), head
        with Admin(f"127.0.0.1:{namesrv}") as admin:
            admin.create_topic("UpNative", 2)
        lines = run_grpc("produce", {"endpoint": f"127.0.0.1:{proxy}", "topic": "UpNative",
                                     "messages": [{"body": f"n-{i}"} for i in range(5)]}, tmp_path / "p")
        assert len(sent(lines)) == 5, lines
    finally:
        _cli(data_dir, "down")
