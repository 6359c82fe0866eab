"""Scaling out: ``cluster up --role namesrv|broker`` on several hosts.

Each role runs under a supervisor of its own, in its own data directory, as it would on its own
host: the NameServer in one, a broker group (and a slave of it) in another, registering with the
NameServer over the network. First on 127.0.0.1, then across two network namespaces this test
creates (two "hosts" joined by a veth pair), when the machine lets it create them.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from rocketbox.cluster import Admin, Message, Producer, PullConsumer
from rocketbox.cluster.supervision.run_state import read_state_file
from rocketbox.cluster.testing import SMALL_STORE, read_topic, wait_until
from rocketbox.cluster.topology import free_ports
from tests.cli_helpers import run_cli

PYTHON = sys.executable
# A broker registers at start and again every 30 s (register_interval_ms): a first registration
# lost on a loaded machine is repeated within this wait.
REGISTERED_WITHIN_S = 45
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Small CommitLog segments, as every test cluster has: the 1 GiB default, fallocated and preheated
# twice per broker (current and next), made a busy machine's disk refuse sends (DISK_FULL).
SMALL_SEGMENTS = ("--commitlog-file-size-bytes", str(SMALL_STORE["commitlog_file_size_bytes"]))


def _env() -> dict:
    # The NameServers come from the command line only: a stray ROCKETBOX_NAMESRV must not decide.
    env = {k: v for k, v in os.environ.items() if k != "ROCKETBOX_NAMESRV"}
    env["PYTHONPATH"] = REPO
    return env


def _run(argv: list[str], timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=_env(), cwd=REPO)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def _cli(data_dir: str, *args, prefix: tuple[str, ...] = (), check: bool = True) -> subprocess.CompletedProcess:
    """``cluster --data-dir data_dir args...``, run under ``prefix`` (``ip netns exec NAME``) if given."""
    return run_cli(*args, data_dir=data_dir, command=(*prefix, PYTHON, "-m", "rocketbox.cluster.cli"), env=_env(),
                   cwd=REPO, check=check)


def _port_with_next_free() -> int:
    """A master's port: it and the next (its HA port, port + 1 by default) are free now."""
    for _ in range(50):
        port = free_ports(1)[0]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no free pair of ports")


def _stop(data_dir: str) -> None:
    """``cluster down``; a supervisor that outlives it is SIGKILLed (its children die with it:
    PR_SET_PDEATHSIG), so no process of the test is left behind even after a failure."""
    _cli(data_dir, "down", "--timeout-s", "20", check=False)
    pid = (read_state_file(data_dir) or {}).get("supervisor_pid")
    if pid:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _all_or_none(messages: list, count: int) -> list | None:
    return messages if len(messages) == count else None


def _children(data_dir: str) -> dict[str, dict]:
    return {c["name"]: c for c in (read_state_file(data_dir) or {}).get("children", [])}


# ---------------------------------------------------------------- on one host (127.0.0.1)

def test_namesrv_and_broker_group_started_apart(tmp_path):
    """One ``up --role namesrv``, one ``up --role broker --broker-name broker-b``, one remote-master
    slave of it: routes show broker-b's master and slave, and messages go through."""
    ns_dir, master_dir, slave_dir = (str(tmp_path / d) for d in ("namesrv-host", "broker-host", "slave-host"))
    # Three "hosts" on one machine: each part needs remoting ports of its own, as its native ones.
    namesrv_port, slave_port, ns_remoting, master_remoting, slave_remoting, master_metrics = free_ports(6)
    master_port = _port_with_next_free()
    namesrv = f"127.0.0.1:{namesrv_port}"
    try:
        up = _cli(ns_dir, "up", "--role", "namesrv", "--namesrv-port", str(namesrv_port),
                  "--namesrv-remoting-port", str(ns_remoting), "--detach")
        assert f"export ROCKETBOX_NAMESRV='{namesrv}'" in up.stdout
        assert sorted(_children(ns_dir)) == ["namesrv-0"]
        up = _cli(master_dir, "--namesrv", namesrv, "up", "--role", "broker", "--broker-name", "broker-b",
                  "--broker-port", str(master_port), "--broker-remoting-port", str(master_remoting),
                  "--metrics-port", str(master_metrics), *SMALL_SEGMENTS, "--detach")
        assert f"export ROCKETBOX_NAMESRV='{namesrv}'" in up.stdout
        # Each broker host exports its own brokers' metrics.
        assert sorted(_children(master_dir)) == ["broker-b", "broker-b-flush", "broker-b-reput",
                                                 "web"]
        _cli(slave_dir, "--namesrv", namesrv, "up", "--role", "broker", "--broker-name", "broker-b",
             "--slave-id", "1", "--master-address", f"127.0.0.1:{master_port}", "--broker-port", str(slave_port),
             "--broker-remoting-port", str(slave_remoting), "--no-metrics", *SMALL_SEGMENTS, "--detach")
        assert sorted(_children(slave_dir)) == ["broker-b-s1", "broker-b-s1-flush",
                                                "broker-b-s1-reput"]
        status = json.loads(_cli(master_dir, "status", "--json").stdout)
        assert status["supervisor_alive"] and all(c["state"] == "running" for c in status["children"])

        with Admin(namesrv=namesrv) as admin:
            wait_until(lambda: "broker-b" in admin.master_endpoints(), REGISTERED_WITHIN_S,
                       what="broker-b registered")
            admin.create_topic("ScaleOut", 2)
            wait_until(lambda: len(admin.route("ScaleOut")["brokerDatas"][0]["brokerAddrs"]) == 2,
                       REGISTERED_WITHIN_S, what="broker-b's slave in the route")
            route = admin.route("ScaleOut")
        assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-b"]
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": f"127.0.0.1:{master_port}",
                                                          "1": f"127.0.0.1:{slave_port}"}
        with Producer("ScaleOutProducer", namesrv=namesrv) as producer:
            sent = [producer.send(Message("ScaleOut", f"m{i}".encode())) for i in range(10)]
        assert {r.queue.broker_name for r in sent} == {"broker-b"}
        with PullConsumer("ScaleOutConsumer", namesrv=namesrv) as consumer:
            got = wait_until(lambda: _all_or_none(read_topic(consumer, "ScaleOut"), 10), 20, what="10 messages")
        assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(10))
        with Admin(namesrv=namesrv) as admin:
            master_end = admin.broker_runtime_info(f"tcp://127.0.0.1:{master_port}")["writePos"]
            wait_until(lambda: admin.broker_runtime_info(f"tcp://127.0.0.1:{slave_port}")["writePos"] == master_end,
                       30, what="the slave caught up with its master")
    finally:
        for data_dir in (slave_dir, master_dir, ns_dir):
            _stop(data_dir)
    for data_dir in (slave_dir, master_dir, ns_dir):
        assert (read_state_file(data_dir) or {}).get("state") in (None, "stopped")
        assert _cli(data_dir, "status", check=False).returncode == 1   # nothing runs there now


def test_role_options_are_checked_before_anything_starts(tmp_path):
    data_dir = str(tmp_path / "nothing")
    no_namesrv = _cli(data_dir, "up", "--role", "broker", "--detach", check=False)
    assert no_namesrv.returncode == 2 and "--namesrv" in no_namesrv.stderr
    half_slave = _cli(data_dir, "--namesrv", "127.0.0.1:1", "up", "--role", "broker", "--slave-id", "1", check=False)
    assert half_slave.returncode == 2 and "--master-address" in half_slave.stderr
    named_namesrv = _cli(data_dir, "up", "--role", "namesrv", "--broker-name", "broker-b", check=False)
    assert named_namesrv.returncode == 2
    assert not os.path.exists(data_dir)


# ---------------------------------------------------------------- two hosts in network namespaces

SUBNET_HOST_A, SUBNET_HOST_B = "10.77.0.1", "10.77.0.2"


def _netns_problem() -> str | None:
    """Why this machine cannot give the test two network namespaces and a veth pair between them,
    probed now by trying it (None: it can)."""
    if os.geteuid() != 0:
        return f"not root (euid {os.geteuid()}): ip netns and veth pairs need CAP_NET_ADMIN and CAP_SYS_ADMIN"
    name = f"rbxprobe{os.getpid()}{secrets.token_hex(2)}"
    veth = f"rbxp{secrets.token_hex(3)}"
    steps = [["ip", "netns", "add", name],
             ["ip", "link", "add", veth, "type", "veth", "peer", "name", veth + "x"],
             ["ip", "link", "set", veth, "netns", name]]
    try:
        for step in steps:
            try:
                proc = subprocess.run(step, capture_output=True, text=True, timeout=20)
            except FileNotFoundError:
                return f"no {step[0]} command on this machine"
            if proc.returncode != 0:
                return f"`{' '.join(step)}` failed ({proc.returncode}): {proc.stderr.strip()}"
        return None
    finally:
        subprocess.run(["ip", "link", "del", veth + "x"], capture_output=True, timeout=20)
        subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=20)


class TwoHosts:
    """Network namespaces ``a`` and ``b`` joined by a veth pair: 10.77.0.1/24 in a, 10.77.0.2/24 in b.
    Only these two namespaces carry the test's traffic; the root namespace is not touched."""

    def __init__(self):
        tag = f"{os.getpid()}{secrets.token_hex(2)}"
        self.a, self.b = f"rbx{tag}a", f"rbx{tag}b"
        self.veth = f"rbxv{secrets.token_hex(3)}"   # interface names stay under 16 bytes
        self.created: list[str] = []

    def exec_prefix(self, ns: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", ns)

    def create(self) -> "TwoHosts":
        for ns in (self.a, self.b):
            _run(["ip", "netns", "add", ns])
            self.created.append(ns)
        _run(["ip", "link", "add", self.veth + "a", "netns", self.a, "type", "veth",
              "peer", "name", self.veth + "b", "netns", self.b])
        for ns, address in ((self.a, SUBNET_HOST_A), (self.b, SUBNET_HOST_B)):
            _run([*self.exec_prefix(ns), "ip", "addr", "add", f"{address}/24", "dev", self.veth + ns[-1]])
            _run([*self.exec_prefix(ns), "ip", "link", "set", self.veth + ns[-1], "up"])
            _run([*self.exec_prefix(ns), "ip", "link", "set", "lo", "up"])
        return self

    def delete(self) -> None:
        # Deleting a namespace removes its end of the veth pair, and with it the other end.
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self.created.clear()


@pytest.fixture
def two_hosts():
    problem = _netns_problem()
    if problem:
        pytest.skip(f"cannot create network namespaces here: {problem}")
    hosts = TwoHosts()
    try:
        yield hosts.create()
    finally:
        hosts.delete()


CLIENT_SCRIPT = textwrap.dedent("""
    import json, sys
    from rocketbox.cluster import Admin, Message, Producer, PullConsumer
    from rocketbox.cluster.testing import read_topic, wait_until
    namesrv, master, slave = sys.argv[1:4]
    with Admin(namesrv=namesrv) as admin:
        wait_until(lambda: "broker-b" in admin.master_endpoints(), 45, what="broker-b registered")
        admin.create_topic("TwoHosts", 2)
        wait_until(lambda: len(admin.route("TwoHosts")["brokerDatas"][0]["brokerAddrs"]) == 2, 45,
                   what="the slave in the route")
        route = admin.route("TwoHosts")
    with Producer("TwoHostsProducer", namesrv=namesrv) as producer:
        sent = [producer.send(Message("TwoHosts", f"m{i}".encode())) for i in range(20)]
    with PullConsumer("TwoHostsConsumer", namesrv=namesrv) as consumer:
        got = wait_until(lambda: (lambda ms: ms if len(ms) == 20 else None)(read_topic(consumer, "TwoHosts")),
                         20, what="20 messages")
    with Admin(namesrv=namesrv) as admin:
        end = admin.broker_runtime_info("tcp://" + master)["writePos"]
        wait_until(lambda: admin.broker_runtime_info("tcp://" + slave)["writePos"] == end, 30,
                   what="the slave caught up")
    print(json.dumps({"route": route, "sentTo": sorted({r.queue.broker_name for r in sent}),
                      "bodies": sorted(m.body.decode() for m in got), "replicated": end}))
""")


def test_two_hosts_in_network_namespaces(tmp_path, two_hosts):
    """Host a (10.77.0.1): the NameServer and a slave of broker-b; host b (10.77.0.2): broker-b's
    master. A client on host a sends and consumes through the NameServer; the slave replicates
    from the master across the veth pair. Each host uses RocketBox's default ports: it has its own."""
    on_a, on_b = two_hosts.exec_prefix(two_hosts.a), two_hosts.exec_prefix(two_hosts.b)
    ns_dir, master_dir, slave_dir = (str(tmp_path / d) for d in ("a-namesrv", "b-broker", "a-slave"))
    namesrv = f"{SUBNET_HOST_A}:9871"
    master, slave = f"{SUBNET_HOST_B}:10811", f"{SUBNET_HOST_A}:10821"
    try:
        # Namespaces of this test only: no access control needed (--insecure).
        _cli(ns_dir, "up", "--role", "namesrv", "--host", SUBNET_HOST_A, "--insecure", "--detach", prefix=on_a)
        _cli(master_dir, "--namesrv", namesrv, "up", "--role", "broker", "--host", SUBNET_HOST_B, "--insecure",
             "--broker-name", "broker-b", *SMALL_SEGMENTS, "--detach", prefix=on_b)
        _cli(slave_dir, "--namesrv", namesrv, "up", "--role", "broker", "--host", SUBNET_HOST_A, "--insecure",
             "--broker-name", "broker-b", "--slave-id", "1", "--master-address", master,
             "--broker-port", "10821", *SMALL_SEGMENTS, "--detach", prefix=on_a)
        assert _children(master_dir)["broker-b"]["ready_info"]["endpoint"] == f"tcp://{master}"
        client = _run([*on_a, PYTHON, "-c", CLIENT_SCRIPT, namesrv, master, slave], timeout=240)
        outcome = json.loads(client.stdout.strip().splitlines()[-1])
        assert outcome["route"]["brokerDatas"][0]["brokerAddrs"] == {"0": master, "1": slave}
        assert outcome["sentTo"] == ["broker-b"]
        assert outcome["bodies"] == sorted(f"m{i}" for i in range(20))
        assert outcome["replicated"] > 0
    finally:
        for data_dir in (slave_dir, master_dir, ns_dir):
            _stop(data_dir)
    for data_dir in (slave_dir, master_dir, ns_dir):
        assert (read_state_file(data_dir) or {}).get("state") in (None, "stopped")
