"""A failover as the README shows it, through the ``cluster`` command: ``cluster pause`` a master,
watch ``cluster controller`` and ``cluster status`` name every broker by the same replica id before
and after, send on the new master (SEND_OK: the SyncStateSet is the new master alone), and
``cluster resume`` the old one, which rejoins as a slave."""

from __future__ import annotations

import json
import os
import time

from tests.cli_helpers import free_port, free_port_block, free_remoting_ports, json_lines, run_cli

DEADLINE_S = 60.0


def _cli(data_dir, *args, check=True):
    env = {k: v for k, v in os.environ.items() if k != "ROCKETBOX_NAMESRV"}
    return run_cli(*args, data_dir=data_dir, env=env, check=check, timeout_s=120)


def _await(what: str, probe):
    deadline = time.monotonic() + DEADLINE_S
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {DEADLINE_S} s")
        time.sleep(0.2)


def _group(data_dir) -> dict:
    nodes = json.loads(_cli(data_dir, "controller", "--json", check=False).stdout or "[]")
    leader = next((n for n in nodes if n.get("isLeader")), {})
    return (leader.get("groups") or [{}])[0]


def _brokers(data_dir) -> dict[str, tuple]:
    """process name -> (id, role) as ``cluster status`` prints them."""
    status = json.loads(_cli(data_dir, "status", "--json").stdout)
    return {b["name"]: (b["brokerId"], b["role"]) for b in status["brokers"]}


def test_pause_a_master_and_watch_the_failover_with_one_id_scheme(tmp_path):
    data_dir = str(tmp_path / "fo")
    namesrv_port = free_port_block([0, 50])   # the controller listens on the NameServer port + 50
    broker_port = free_port_block([0, 1, 2, 3])
    _cli(data_dir, "up", "--detach", "--slaves", "1", "--failover", "--broker-role", "sync",
         "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port),
         "--commitlog-file-size-bytes", str(16 * 1024 * 1024), "--metrics-port", str(free_port()),
         *free_remoting_ports(), "--no-proxy", "--no-console")
    try:
        _await("both replicas in the SyncStateSet", lambda: _group(data_dir).get("syncStateSet") == [1, 2])
        assert _brokers(data_dir) == {"broker-a": (1, "MASTER"), "broker-a-s1": (2, "SLAVE")}
        shown = _cli(data_dir, "controller").stdout
        assert "1 (broker-a)" in shown and "(broker-a-s1)" in shown, shown

        paused = _cli(data_dir, "pause", "broker-a")
        assert "paused" in paused.stdout
        try:
            _await("replica 2 elected", lambda: _group(data_dir).get("masterId") == 2)
            assert _group(data_dir)["syncStateSet"] == [2]
            # The same ids after the failover: broker-a-s1 is replica 2, now master (routes list it under 0).
            _await("broker-a-s1 serving as master",
                   lambda: _brokers(data_dir).get("broker-a-s1") == (2, "MASTER"))
            sent = _await("a send on the new master", lambda: _sent_ok(data_dir))
            assert sent["status"] == "SEND_OK"
        finally:
            _cli(data_dir, "resume", "broker-a", check=False)
        _await("broker-a back as a slave", lambda: _brokers(data_dir).get("broker-a") == (1, "SLAVE"))
        _await("broker-a back in the SyncStateSet", lambda: _group(data_dir).get("syncStateSet") == [1, 2])
        assert _cli(data_dir, "pause", "broker-z", check=False).returncode == 2
    finally:
        down = _cli(data_dir, "down", check=False)
    assert down.returncode == 0, down.stderr


def _sent_ok(data_dir) -> dict | None:
    """One `cluster send`'s record once it exits 0 (the client may still be following the route)."""
    proc = _cli(data_dir, "send", "FoCliPaused", "during", "--json", check=False)
    records = json_lines(proc) if proc.returncode == 0 else []
    return records[0] if records else None
