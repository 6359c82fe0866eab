"""Keeps perf/ from rotting: every micro-benchmark runs once, and the runner's pieces work.

The micro-benchmarks run in a subprocess with ``ROCKETBOX_BENCH_QUICK=1`` and
``--benchmark-disable`` (each body once, its result checked), the way
``pytest perf/test_micro.py`` would run them in full. Budget: a few seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUICK_RUN_S_MAX = 60  # normally ~3 s; this only bounds a hang


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
    sys.path.insert(0, REPO)
    try:
        from perf.e2e import Report, Row, markdown_table, percentile
    finally:
        sys.path.remove(REPO)
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
    sys.path.insert(0, REPO)
    try:
        from perf.e2e import zmq_baseline
    finally:
        sys.path.remove(REPO)
    msg_s, frames = zmq_baseline(200, 10.0)
    assert frames == 200 and msg_s > 0
