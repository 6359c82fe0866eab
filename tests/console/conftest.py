"""One cluster with the web console per test module (a master and its slave, so the cluster page
has roles, epochs and replication lag to show); tests use topics and groups of their own.

Short delay levels make a failed message's retries take a second and its trip to the dead
letters a few (tests/integration/test_delay_retry.py)."""

from __future__ import annotations

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster
from tests.conftest import client_config

LEVELS = "300ms 600ms 900ms 1200ms 1500ms 1800ms"


@pytest.fixture(scope="module")
def console_cluster(tmp_path_factory):
    cluster = LocalCluster(str(tmp_path_factory.mktemp("console") / "cluster"), slaves=1, console=True,
                           store_overrides={"message_delay_levels": LEVELS}).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def cfg(console_cluster):
    return client_config(console_cluster)


@pytest.fixture(scope="module")
def admin(cfg):
    with Admin(config=cfg) as a:
        yield a
