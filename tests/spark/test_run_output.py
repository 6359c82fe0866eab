"""What ``make run`` shows the user: every step after the load bars says it is running and when it is
done (``job.run`` as ``make run`` calls it, here on the tests' shared SparkSession), and Spark's
start-up warnings and log go to the run's spark.log, not to the terminal (``spark_session(log_path=)``,
which ``job.run`` starts its JVM with, in a process of its own: a JVM starts once per process)."""

from __future__ import annotations

import os
import subprocess
import sys

from rocketbox.cluster.config import SYNC_FLUSH
from rocketbox.cluster.testing import LocalCluster
from rocketbox.spark.job import parse_args, run

# Spark's notices at the start of a JVM (the JDK's, log4j's default profile, Hadoop's native library).
SPARK_START_UP = ("Using Spark's default log4j profile", "Setting default log level", "NativeCodeLoader",
                  "jdk.incubator.vector")
STEPS_AFTER_THE_LOAD = ("push group catch-up and stop", "read back (DataSource)", "check", "measures", "plot")

START_SPARK = """
import sys
from rocketbox.spark.session import spark_session
session = spark_session("local[1]", app_name="rocketbox-output", log_path=sys.argv[1])
print("counted", session.range(100).count())
session.stop()
"""


def test_spark_start_up_warnings_and_log_go_to_the_runs_log_not_the_terminal(tmp_path):
    log_path = tmp_path / "spark.log"
    proc = subprocess.run([sys.executable, "-c", START_SPARK, str(log_path)], capture_output=True, text=True,
                          timeout=240, cwd=str(tmp_path), env=dict(os.environ))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout == "counted 100\n" and proc.stderr == "", proc.stdout + proc.stderr
    logged = log_path.read_text(errors="replace")
    assert any(notice in logged for notice in SPARK_START_UP), logged[:2000]


def test_every_step_after_the_load_shows_starting_and_done(spark, tmp_path, capsys):
    args = parse_args(["--messages", "300", "--keys", "10", "--members", "1", "--out", str(tmp_path / "report")])
    with LocalCluster(str(tmp_path / "cluster"), flush_mode=SYNC_FLUSH) as cluster:
        result = run(args, cluster.namesrv, cluster.data_dir, spark=spark)
    shown = capsys.readouterr().out
    assert result["verdict_ok"], shown
    # Not a terminal: a line as each step starts, one when it is done, in order.
    positions = []
    for step in STEPS_AFTER_THE_LOAD:
        started, done = shown.find(f"{step} ...\n"), shown.find(f"done {step} in ")
        assert 0 <= started < done, f"{step!r} not shown starting and done:\n{shown}"
        positions.append(done)
    assert positions == sorted(positions), shown
    assert set(STEPS_AFTER_THE_LOAD) <= set(result["phases_s"])
