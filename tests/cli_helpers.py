"""Running the ``cluster`` command as a user does, for the tests that drive it: one ``run_cli``
(every option the tests need), the JSON Lines it prints, and ``cluster up`` on free ports."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from collections.abc import Sequence

CLI = (sys.executable, "-m", "rocketbox.cluster.cli")


def port_taken(data_dir: str) -> bool:
    """A child of the cluster in ``data_dir`` found its port taken (another xdist worker's)."""
    logs = pathlib.Path(data_dir) / "logs"
    return any("Address already in use" in log.read_text(errors="replace") for log in logs.glob("*.log"))


def run_cli(*args: str, data_dir: str | None = None, namesrv: str | None = None, check: bool = True,
            timeout_s: float = 120, env: dict | None = None, stdin: str | None = None,
            command: Sequence[str] = CLI, cwd: str | None = None) -> subprocess.CompletedProcess:
    """``cluster ARGS`` as a user runs it (in ``data_dir``, against ``namesrv`` when given; with
    ``env``, else ROCKETBOX_NAMESRV unset, so only what the command says counts; ``command``: how
    ``cluster`` is started, e.g. the console script or under ``ip netns exec``); AssertionError with
    its output when it fails and ``check``."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "ROCKETBOX_NAMESRV"}
    where = ("--data-dir", data_dir) if data_dir else ()
    server = ("--namesrv", namesrv) if namesrv else ()
    proc = subprocess.run([*command, *where, *server, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout_s, env=env, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"cluster {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


# Ports this test process has handed out: two blocks picked one after the other are each free when
# picked, yet may overlap (a NameServer's controller at + 50 on a slave's remoting door at + 2 failed
# a CI run); a block is never picked over one handed out before.
_HANDED_OUT: set[int] = set()


def free_port_block(offsets, tries: int = 50) -> int:
    """A base port whose base + each offset is free now and was not handed out by this process before
    (the CLI derives ports from its base)."""
    import socket

    from rocketbox.cluster.topology import free_ports
    for _ in range(tries):
        base = free_ports(1)[0]
        ports = [base + offset for offset in offsets]
        if max(ports) >= 65536 or _HANDED_OUT.intersection(ports):
            continue
        try:
            for port in ports:
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
        except OSError:
            continue
        _HANDED_OUT.update(ports)
        return base
    raise RuntimeError("no free block of ports")


def free_port() -> int:
    """One free port, never one handed out by this process before."""
    return free_port_block([0])


def free_remoting_ports() -> tuple[str, ...]:
    """``up``'s RocketMQ remoting ports on free ones (two groups, slave 1 at + 2 each): the defaults,
    9876 and 10911, are shared by every xdist worker's cluster."""
    return ("--namesrv-remoting-port", str(free_port_block([0, 1])),
            "--broker-remoting-port", str(free_port_block([0, 2, 10, 12])))


# How many free ports ``port_flags`` takes.
PORT_FLAGS_COUNT = 5


def port_flags(ports: list[int]) -> list[str]:
    """``up``'s flags for a cluster of one NameServer and one broker on ``ports`` (PORT_FLAGS_COUNT
    free ones: NameServer, broker, their remoting doors, metrics), without proxy and console."""
    namesrv_port, broker_port, namesrv_remoting, broker_remoting, metrics = ports
    return ["--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port),
            "--namesrv-remoting-port", str(namesrv_remoting), "--broker-remoting-port", str(broker_remoting),
            "--metrics-port", str(metrics), "--no-proxy", "--no-console"]


def json_lines(proc: subprocess.CompletedProcess) -> list:
    """The records a ``--json`` command printed (JSON Lines)."""
    return [json.loads(line) for line in proc.stdout.splitlines()]


def up_on_free_ports(count: int, up_args, *, data_dir: str, timeout_s: float = 180,
                     attempts: int = 3, env: dict | None = None) -> tuple[list[int], subprocess.CompletedProcess]:
    """``cluster up`` with ``up_args(ports)`` on ``count`` freshly picked free ports: again on fresh
    ones when a port another xdist worker's cluster took after it was picked (a derived port, the HA
    port at broker + 1, is not among the picked ones) was refused by ``up``'s check, or was taken
    between that check and a child's bind (a log says so, ``port_taken``); nothing else is
    retried. ``env``: as run_cli's."""
    from rocketbox.cluster.topology import free_ports

    attempt = 1
    while True:
        ports = free_ports(count)
        proc = run_cli(*up_args(ports), data_dir=data_dir, check=False, timeout_s=timeout_s, env=env)
        if proc.returncode == 0:
            return ports, proc
        if ("is in use" not in proc.stdout + proc.stderr and not port_taken(data_dir)) or attempt == attempts:
            raise AssertionError(f"cluster up failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        attempt += 1
