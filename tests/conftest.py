"""Shared fixtures: real clusters started through the supervisor on 127.0.0.1, free ports."""

from __future__ import annotations

import pytest

from cluster.config import ClientConfig
from cluster.testing import LocalCluster


@pytest.fixture
def start_cluster(tmp_path):
    """``start_cluster(**kwargs)`` -> a running LocalCluster, stopped at teardown."""
    started: list[LocalCluster] = []

    def start(name: str = "cluster", **kwargs) -> LocalCluster:
        cluster = LocalCluster(str(tmp_path / name), **kwargs).start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in reversed(started):
        cluster.stop()


def client_config(cluster: LocalCluster, **changes) -> ClientConfig:
    """Client settings for tests: this cluster's NameServers and quick rebalancing."""
    base = dict(namesrv_endpoints=tuple(f"tcp://{a}" for a in cluster.namesrv.split(";")),
                rebalance_interval_ms=300, client_heartbeat_interval_ms=1000,
                consumer_offset_commit_interval_ms=200, request_timeout_ms=5000, pull_suspend_ms=2000)
    base.update(changes)
    return ClientConfig(**base)
