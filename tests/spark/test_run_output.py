"""What ``make run`` shows the user (``python -m rocketbox.spark.job``, as the Makefile runs it): every
step after the load bars says it is running and when it is done, and Spark's start-up warnings and
log go to ``--out``/spark.log, not to the terminal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Spark's notices at the start of a JVM (the JDK's, log4j's default profile, Hadoop's native library).
SPARK_START_UP = ("Using Spark's default log4j profile", "Setting default log level", "NativeCodeLoader",
                  "jdk.incubator.vector")
STEPS_AFTER_THE_LOAD = ("push group catch-up and stop", "read back (DataSource)", "check", "measures", "plot")


@pytest.mark.timeout(900)
def test_make_run_shows_every_step_and_keeps_spark_start_up_noise_in_its_log(tmp_path):
    out = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-m", "rocketbox.spark.job", "--messages", "400", "--keys", "10",
                           "--out", str(out)], capture_output=True, text=True, timeout=840, cwd=str(tmp_path),
                          env={k: v for k, v in os.environ.items() if k != "ROCKETBOX_NAMESRV"})
    shown = proc.stdout + proc.stderr
    assert proc.returncode == 0, shown
    assert not [line for line in shown.splitlines() if any(n in line for n in SPARK_START_UP)], shown
    spark_log = (out / "spark.log").read_text(errors="replace")
    assert any(n in spark_log for n in SPARK_START_UP), spark_log[:2000]
    assert f"{out / 'spark.log'}" in proc.stdout
    # Each step announced (not a terminal: a line as it starts) and done, in order.
    positions = []
    for step in STEPS_AFTER_THE_LOAD:
        started, done = proc.stdout.find(f"{step} ...\n"), proc.stdout.find(f"done {step} in ")
        assert 0 <= started < done, f"{step!r} not shown starting and done:\n{proc.stdout}"
        positions.append(done)
    assert positions == sorted(positions), proc.stdout
