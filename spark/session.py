"""One place that builds a SparkSession for RocketBox jobs and tests.

Python workers must run this interpreter (the one with rocketbox and pyarrow installed),
not whatever ``python3`` is first on PATH: PYSPARK_PYTHON is set before the JVM starts.
``spark.datasource.register`` adds the ``rocketbox`` format to a session.
"""

from __future__ import annotations

import os
import sys


def spark_session(master: str = "local[2]", app_name: str = "rocketbox", conf: dict | None = None):
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
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
