"""One SparkSession (local[2]) shared by every Spark test: starting the JVM costs seconds."""

import pytest


@pytest.fixture(scope="session")
def spark():
    from rocketbox.spark.session import spark_session
    session = spark_session("local[2]", app_name="rocketbox-tests")
    yield session
    session.stop()
