"""One place that builds a SparkSession for RocketBox jobs and tests.

Python workers must run this interpreter (the one with rocketbox and pyarrow installed),
not whatever ``python3`` is first on PATH: PYSPARK_PYTHON is set before the JVM starts.
``spark.datasource.register`` adds the ``rocketbox`` format to a session.

With ``log_path`` the JVM starts with its stdout and stderr on that file, and keeps them: its
start-up notices (the JDK's incubator warning, log4j's default profile, Hadoop's native library),
its log4j console appender and the Python workers it forks all write there, not to the user's
terminal. Only the file descriptors the JVM inherits are moved, and only while it starts.
"""

from __future__ import annotations

import contextlib
import os
import sys


@contextlib.contextmanager
def _inherited_output(log_path: str | None):
    """fds 1 and 2 on ``log_path`` (appended) for what is started meanwhile; this process's own back after."""
    if log_path is None:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (log_fd, *saved):
            os.close(fd)


def spark_session(master: str = "local[2]", app_name: str = "rocketbox", conf: dict | None = None,
                  log_path: str | None = None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        # Else the JVM binds its services to the first non-loopback interface it finds.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.session.timeZone", "UTC"))
    if master.startswith("local"):
        # A local job talks to nothing but this machine; a cluster master needs a reachable driver.
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    for name, value in (conf or {}).items():
        builder = builder.config(name, value)
    with _inherited_output(log_path):
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
