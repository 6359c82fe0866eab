"""Keeps perf/ from rotting: every micro-benchmark runs once, and the runner's pieces work.

The micro-benchmarks run in a subprocess with ``ROCKETBOX_BENCH_QUICK=1`` and
``--benchmark-disable`` (each body once, its result checked), the way
``pytest perf/test_micro.py`` would run them in full. Budget: a few seconds.

The comparison with the peers (``python -m rocketbox.perf --compare``) runs once in quick mode with
small counts (~25 s, ~1 min more with the door rows): ours is always measured; a peer that is not
installed here (CI need not have ``make peers``) is skipped with the runner's reason, and so is a
door row whose client (``make real-clients``, ``make node-client``) or server (Apache RocketMQ) is
absent.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK_RUN_S_MAX = 60  # normally ~3 s; this only bounds a hang
COMPARE_RUN_S_MAX = 420  # normally ~25 s with both peers, ~1 min more for the door rows
PEER_NAMES = ("redis_streams", "nats_jetstream")
DOOR_NAMES = ("native", "remoting_cpp", "apache_cpp", "grpc_node")
# The first test to ask for the quick comparison runs it within its own time limit.
COMPARE_TEST_S_MAX = COMPARE_RUN_S_MAX + 60


def perf_module(name: str):
    """``perf.<name>`` imported from this checkout."""
    sys.path.insert(0, REPO)
    try:
        return importlib.import_module(f"perf.{name}")
    finally:
        sys.path.remove(REPO)


def test_micro_benchmarks_run_in_quick_mode():
    env = dict(os.environ, ROCKETBOX_BENCH_QUICK="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "perf/test_micro.py", "--benchmark-disable", "-q",
                           "-p", "no:cacheprovider"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=QUICK_RUN_S_MAX)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_runner_rejects_an_unknown_scenario():
    proc = subprocess.run([sys.executable, "-m", "perf", "--only", "no_such_scenario"], cwd=REPO,
                          capture_output=True, text=True, timeout=QUICK_RUN_S_MAX)
    assert proc.returncode == 2 and "no_such_scenario" in proc.stderr


def test_rows_compare_against_targets_and_render():
    report = perf_module("report")
    Report, Row, markdown_table, percentile = report.Report, report.Row, report.markdown_table, report.percentile
    report = Report()
    report.baseline_msg_s = 1000.0
    report.add(Row("produce", "batched", "msg/s", [100.0, 300.0, 200.0], (">=", 150), vs_baseline=True))
    report.add(Row("latency", "p50", "us", [90.0], ("<=", 80)))
    assert [r.median for r in report.rows] == [200.0, 90.0]
    assert [r.met() for r in report.rows] == [True, False]
    text = markdown_table(report)
    assert "| produce | batched | 200 | 100 | 300 | msg/s | >= 150 | met | 0.200 |" in text
    assert "NOT met" in text
    assert percentile([5, 1, 4, 2, 3], 0.5) == 3


def test_zmq_baseline_carries_frames():
    msg_s, frames = perf_module("scenarios.throughput").zmq_baseline(200, 10.0)
    assert frames == 200 and msg_s > 0


@pytest.fixture(scope="module")
def quick_compare(tmp_path_factory):
    """One quick comparison run (small counts, 1 s paced) into a temporary directory: (json, stdout, plot path)."""
    out = tmp_path_factory.mktemp("compare")
    json_path, plot_path = out / "compare.json", out / "compare.png"
    proc = subprocess.run([sys.executable, "-m", "perf", "--compare", "--quick", "--messages", "2000",
                           "--paced-seconds", "1", "--json", str(json_path), "--plot", str(plot_path),
                           "--tmp-root", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=COMPARE_RUN_S_MAX, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    with open(json_path) as f:
        return json.load(f), proc.stdout, plot_path


def _measure_keys(system: str = "rocketbox") -> list[str]:
    """The keys of the figures ``system`` must have (a peer's own figure where ours has a variant)."""
    return [m.key_of(system) for m in perf_module("compare_table").MEASURES]


@pytest.mark.timeout(COMPARE_TEST_S_MAX)
def test_compare_measures_ours_and_writes_table_and_plot(quick_compare):
    result, stdout, plot_path = quick_compare
    ours = result["systems"]["rocketbox"]
    assert ours["status"] == "measured" and not result["errors"]
    for key in _measure_keys():
        assert ours["values"][key] and all(v > 0 for v in ours["values"][key]), key
    assert "ours / best peer" in stdout and "RocketBox" in stdout
    assert result["markdown"].startswith("| measure | unit | RocketBox | Redis Streams | NATS JetStream |")
    assert plot_path.stat().st_size > 10_000


@pytest.mark.parametrize("peer", PEER_NAMES)
@pytest.mark.timeout(COMPARE_TEST_S_MAX)
def test_compare_measures_each_installed_peer(quick_compare, peer):
    result, stdout, _ = quick_compare
    system = result["systems"][peer]
    if system["status"].startswith("not installed"):
        assert "not installed" in stdout  # the runner says so
        pytest.skip(f"{system['label']} {system['status']}")
    assert system["status"] == "measured", system["status"]
    for key in _measure_keys(peer):
        assert system["values"][key] and all(v > 0 for v in system["values"][key]), key


@pytest.mark.parametrize("door", DOOR_NAMES)
@pytest.mark.timeout(COMPARE_TEST_S_MAX)
def test_compare_has_a_row_per_door_measured_or_skipped_with_its_reason(quick_compare, door):
    result, stdout, _ = quick_compare
    row = result["doors"][door]
    assert row["label"] in stdout
    if row["status"] == "skipped":
        assert row["reason"] and f"{row['label']}: skipped, {row['reason']}" in stdout
        pytest.skip(f"{row['label']}: {row['reason']}")
    assert row["status"] == "measured", row["reason"]
    for key in ("sync_p50", "sync_p99", "produce", "drain"):
        assert row["values"][key] and all(v > 0 for v in row["values"][key]), key
    # Sends that timed out on a loaded machine are no fault of the row: they are counted and shown.
    assert (f"{row['failed_sends']} failed sends" in result["doors_markdown"]) == (row["failed_sends"] > 0)
    assert f"| {row['label']} | {row['client']} |" in result["doors_markdown"]


def test_compare_ratio_says_which_way_is_better():
    compare = perf_module("compare_table")
    ratio_text, ratio_to_best_peer = compare.ratio_text, compare.ratio_to_best_peer
    by_key = {m.key: m for m in compare.MEASURES}
    systems = {"rocketbox": {"label": "RocketBox", "values": {"produce": [300.0], "publish_p50": [200.0]}},
               "a": {"label": "A", "values": {"produce": [100.0, 200.0, 150.0], "publish_p50": [100.0]}},
               "b": {"label": "B", "values": {"produce": [50.0], "publish_p50": [400.0]}},
               "c": {"label": "C", "values": {}}}
    assert ratio_to_best_peer(by_key["produce"], systems) == (2.0, "A")
    assert ratio_to_best_peer(by_key["publish_p50"], systems) == (2.0, "A")
    assert "ours ahead" in ratio_text(by_key["produce"], 2.0, "A")
    assert "peer ahead" in ratio_text(by_key["publish_p50"], 2.0, "A")
    assert ratio_to_best_peer(by_key["e2e"], systems) == (None, "")
    # Our pull loop's end-to-end figure is set against the peers' one end-to-end figure.
    systems["rocketbox"]["values"]["e2e_pull_p50"] = [300.0]
    systems["a"]["values"]["e2e_p50"] = [100.0]
    assert ratio_to_best_peer(by_key["e2e_pull_p50"], systems) == (3.0, "A")


@pytest.mark.timeout(300)
def test_public_api_latency_runs_every_variant_against_redis_or_says_why(tmp_path):
    """``python -m rocketbox.perf.public_api_latency`` (issue 33 item 4) in small counts: every variant
    measured, Redis beside them when installed, the table and the JSON written."""
    out = tmp_path / "figures.json"
    variants = perf_module("public_api_latency")
    proc = subprocess.run([sys.executable, "-m", "rocketbox.perf.public_api_latency", "--rounds", "1", "--sends", "50",
                           "--paced-seconds", "0.5", "--sends-variants", ",".join(variants.SENDS_VARIANTS),
                           "--e2e-variants", "default,libzmq,pull", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    rows = json.loads(out.read_text())
    expected = {f"sends {name}" for name in variants.SENDS_VARIANTS} | {"e2e default", "e2e libzmq", "e2e pull"}
    assert expected <= set(rows)
    assert all(run["count"] > 0 and run["p50"] > 0 for runs in rows.values() for run in runs)
    if "Redis Streams not measured" not in proc.stdout:
        assert {"sends redis", "e2e redis"} <= set(rows)
    assert "| sync send | default |" in proc.stdout
