"""The door table of ``python -m rocketbox.perf --compare`` (perf/door_table.py) and where the Apache
RocketMQ peer is looked for (perf/peers/apache_rocketmq.py): the pure parts, no process started.
The rows measured for real are tests/test_perf_quick.py's quick comparison."""

from __future__ import annotations

import pathlib

import pytest

from rocketbox.perf.door_table import (APACHE, DOOR_MEASURES, GRPC, NATIVE, REMOTING, add_cpp_result, add_node_result,
                                       cpp_client_missing, door_counts, door_entry, door_markdown, door_rows,
                                       native_values, node_client_missing, remoting_vs_apache)
from rocketbox.perf.peers.apache_rocketmq import APACHE_ENV, apache_home, broker_conf, missing_reason


def _measured(door: str, **values) -> dict:
    entry = door_entry(door)
    entry["values"] = {key: list(v) for key, v in values.items()}
    return entry


def test_native_row_takes_the_first_tables_figures_under_its_own_names():
    ours = {"publish_p50": [90.0, 110.0, 100.0], "publish_p99": [300.0], "produce": [400_000.0],
            "consume": [550_000.0], "e2e": [1.0]}
    assert native_values(ours) == {"sync_p50": [90.0, 110.0, 100.0], "sync_p99": [300.0], "produce": [400_000.0],
                                   "drain": [550_000.0]}
    assert native_values({"produce": [1.0]}) == {"produce": [1.0]}   # a scenario that failed leaves a gap


def test_rows_show_medians_and_the_note_of_what_each_client_does():
    doors = {NATIVE: _measured(NATIVE, sync_p50=[100.0, 300.0, 200.0], sync_p99=[900.0], produce=[425_000.0],
                               drain=[570_000.0]),
             GRPC: _measured(GRPC, sync_p50=[5_000.0], produce=[400.0])}
    doors[GRPC]["failed_sends"] = 3
    native, grpc = door_rows(doors)
    assert native[:6] == ["RocketBox, native door", "RocketBox Python client", "200", "900", "425,000", "570,000"]
    assert "batched 256" in native[6]
    assert grpc[2:6] == ["5,000", "-", "400", "-"]
    assert "64 sends in flight" in grpc[6] and grpc[6].endswith("; 3 failed sends")


def test_a_skipped_row_says_why_in_place_of_its_figures():
    doors = {REMOTING: door_entry(REMOTING, "RocketMQ's C++ client is not installed"),
             APACHE: door_entry(APACHE, None)}
    doors[APACHE]["status"], doors[APACHE]["reason"] = "failed", "RuntimeError: Apache RocketMQ exited 1"
    skipped, failed = door_rows(doors)
    assert skipped[2:2 + len(DOOR_MEASURES)] == ["skipped"] * len(DOOR_MEASURES)
    assert skipped[-1] == "RocketMQ's C++ client is not installed"
    assert failed[2:2 + len(DOOR_MEASURES)] == ["failed"] * len(DOOR_MEASURES)
    assert failed[-1].startswith("RuntimeError")
    doors[APACHE]["reason"] = "RuntimeError: exited 1:\n  one\n  two"
    assert door_rows(doors)[1][-1] == "RuntimeError: exited 1: one two"
    assert remoting_vs_apache(doors) == ""
    assert door_markdown(doors).count("\n") == 3   # header, rule, two rows; no ratio line


def test_remoting_over_apache_says_which_way_is_better():
    doors = {REMOTING: _measured(REMOTING, sync_p50=[300.0], produce=[8_000.0, 9_000.0, 10_000.0]),
             APACHE: _measured(APACHE, sync_p50=[200.0], produce=[20_000.0], drain=[80_000.0])}
    line = remoting_vs_apache(doors)
    assert "sync send p50 1.50x (lower is better)" in line
    assert "produce 0.45x (higher is better)" in line
    assert "drain" not in line   # ours has no drain figure: no ratio
    doors[APACHE]["about"] = "Apache RocketMQ from /x, one ASYNC_MASTER broker"
    text = door_markdown(doors)
    assert text.endswith(f"\nApache RocketMQ, remoting: Apache RocketMQ from /x, one ASYNC_MASTER broker.\n{line}")


def test_cpp_results_fold_into_the_row_and_a_short_drain_raises():
    entry = door_entry(REMOTING)
    add_cpp_result(entry, "sync", {"mode": "sync", "n": 500, "rate": 3000.0, "fails": 1, "p50_us": 250.0,
                                   "p99_us": 800.0}, 500)
    add_cpp_result(entry, "async", {"mode": "async", "n": 5000, "rate": 9000.0, "fails": 2}, 5000)
    add_cpp_result(entry, "push", {"mode": "push", "n": 5000, "rate": 70_000.0}, 5000)
    assert entry["values"] == {"sync_p50": [250.0], "sync_p99": [800.0], "produce": [9000.0], "drain": [70_000.0]}
    assert entry["failed_sends"] == 3
    with pytest.raises(RuntimeError, match="stalled: 4000 of 5000 sends issued, 3990 acknowledged"):
        add_cpp_result(entry, "async", {"mode": "async", "n": 3990, "rate": 30.0, "fails": 10, "issued": 4000,
                                        "stalled": True}, 5000)
    assert entry["values"]["produce"] == [9000.0]
    with pytest.raises(RuntimeError, match="drained 4999 of 5000"):
        add_cpp_result(entry, "push", {"mode": "push", "n": 4999, "rate": 70_000.0}, 5000)


def test_node_results_fold_into_the_row_and_a_short_run_raises():
    entry = door_entry(GRPC)
    add_node_result(entry, "sync", {"latencies_us": [float(i) for i in range(1, 101)]}, 100)
    add_node_result(entry, "async", {"count": 990, "failed": 10, "elapsed_s": 2.0}, 1000)
    add_node_result(entry, "receive", {"count": 1100, "failed_acks": 2, "elapsed_s": 0.5}, 1100)
    assert entry["values"] == {"sync_p50": [51.0], "sync_p99": [100.0], "produce": [495.0], "drain": [2200.0]}
    assert entry["failed_sends"] == 10 and entry["failed_acks"] == 2
    assert door_rows({GRPC: entry})[0][-1].endswith("; 10 failed sends; 2 failed acks")
    with pytest.raises(RuntimeError, match="99 of 100 sync sends"):
        add_node_result(entry, "sync", {"latencies_us": [1.0] * 99}, 100)
    with pytest.raises(RuntimeError, match="received 10 of 1100"):
        add_node_result(entry, "receive", {"count": 10, "elapsed_s": 0.5}, 1100)


def test_counts_cap_the_runs_whose_clients_slow_down():
    assert door_counts(REMOTING, False, 200_000, 10_000) == {"sync": 10_000, "produce": 10_000}
    assert door_counts(APACHE, True, 2_000, 500) == {"sync": 500, "produce": 2_000}
    assert door_counts(GRPC, False, 200_000, 10_000) == {"sync": 1_000, "produce": 10_000}
    assert door_counts(GRPC, True, 20_000, 1_000) == {"sync": 1_000, "produce": 2_000}


def test_client_skip_reasons(tmp_path: pathlib.Path):
    python = tmp_path / "venv" / "bin" / "python"
    assert "make real-clients" in cpp_client_missing(python)
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert cpp_client_missing(python) is None
    client = tmp_path / "node_modules" / "rocketmq-client-nodejs"
    assert "node is not on PATH" in node_client_missing(None, client)
    assert "make node-client" in node_client_missing("/usr/bin/node", client)
    client.mkdir(parents=True)
    (client / "package.json").write_text("{}")
    assert node_client_missing("/usr/bin/node", client) is None


def test_apache_is_found_at_the_env_var_first_then_beside_the_checkout(tmp_path: pathlib.Path):
    repo = tmp_path / "checkout"
    beside, elsewhere = tmp_path / "apache", tmp_path / "elsewhere"
    repo.mkdir()
    assert apache_home({}, repo) is None
    reason = missing_reason({}, repo, java="/usr/bin/java")
    assert APACHE_ENV in reason and str(beside) in reason
    assert "no java" in missing_reason({}, repo, java="")
    for home in (beside, elsewhere):
        home.mkdir()
        (home / "server.classpath").write_text("a.jar:b.jar\n")
    assert apache_home({}, repo) == beside
    assert apache_home({APACHE_ENV: str(elsewhere)}, repo) == elsewhere
    assert apache_home({APACHE_ENV: str(tmp_path / "none")}, repo) == beside   # a wrong env var falls through
    assert missing_reason({APACHE_ENV: str(elsewhere)}, repo, java="/usr/bin/java") is None


def test_apache_broker_runs_async_on_loopback_with_its_store_in_the_run_directory():
    conf = dict(line.split("=", 1) for line in broker_conf(20911, 20912, 20876, "/tmp/run/apache").splitlines() if line)
    assert conf["flushDiskType"] == "ASYNC_FLUSH" and conf["brokerRole"] == "ASYNC_MASTER"
    assert conf["namesrvAddr"] == "127.0.0.1:20876" and conf["brokerIP1"] == "127.0.0.1"
    assert (conf["listenPort"], conf["haListenPort"]) == ("20911", "20912")
    assert conf["storePathRootDir"].startswith("/tmp/run/apache/")


def test_peers_option_selects_apache_apart_from_the_first_tables_peers():
    from rocketbox.perf.compare import selected_peers
    peers, apache = selected_peers(None)
    assert [p.name for p in peers] == ["redis_streams", "nats_jetstream"] and apache.name == "apache_rocketmq"
    peers, apache = selected_peers("apache_rocketmq")
    assert peers == [] and apache.name == "apache_rocketmq"
    peers, apache = selected_peers("redis_streams,nats_jetstream")
    assert len(peers) == 2 and apache is None
    assert selected_peers("none") == ([], None)
    with pytest.raises(ValueError, match="choose from redis_streams, nats_jetstream, apache_rocketmq"):
        selected_peers("kafka")
