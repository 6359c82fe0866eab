"""One cluster with a gRPC proxy per test module: tests use topics and groups of their own.

The broker checks open transactions every second (after 1 s), so recovery tests do not wait
RocketMQ's minute; SQL92 filters are on (RocketMQ's enablePropertyFilter)."""

from __future__ import annotations

import pytest

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.testing import LocalCluster
from tests.grpc.grpc_client import require_grpc_client

BROKER_OVERRIDES = {"transaction_check_interval_ms": 1000, "transaction_timeout_ms": 1000,
                    "enable_property_filter": True}


@pytest.fixture(autouse=True)
def _grpc_client():
    require_grpc_client()


@pytest.fixture(scope="module")
def grpc_cluster(tmp_path_factory):
    require_grpc_client()
    cluster = LocalCluster(str(tmp_path_factory.mktemp("grpc") / "cluster"), proxy=True,
                           broker_overrides=BROKER_OVERRIDES).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def admin(grpc_cluster):
    with Admin(grpc_cluster.namesrv) as a:
        yield a
