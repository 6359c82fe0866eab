"""Shared fixtures: real clusters started through the supervisor on 127.0.0.1, free ports."""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import settings

from rocketbox.cluster.config import ClientConfig
from rocketbox.cluster.testing import LocalCluster
from tests.cli_helpers import port_taken


# The fuzz tests' inputs tried per target, printed and written at the end (xdist workers' included).
pytest_plugins = ["tests.fuzz.report"]

# Property tests check what happens, not how fast: hypothesis's 200 ms per-example deadline fails
# them on a busy shared machine. Every @settings inherits this (test_sql92.py says so explicitly).
settings.register_profile("rocketbox", deadline=None)
settings.load_profile("rocketbox")

# Fault and Spark tests kill, restart and fail over whole clusters, or run a Spark job, and
# remoting tests run RocketMQ's own clients: they get longer than the default limit of
# pyproject.toml, unless they set their own.
SLOW_TEST_DIRS = ("fault", "spark", "remoting")
SLOW_TEST_TIMEOUT_S = 900


# What `make test` runs beside what (its xdist workers take one work unit at a time, --dist loadfile
# with the scheduler below). A test file is a unit, so its module fixtures stay whole, except the
# files below: they drive a machine's worth of load or a Spark JVM, and each list is one unit, run in
# order on one worker, so that at most two of them load the machine at once while the many test
# files that mostly wait (for elections, time-outs, restarts) run on the other workers. The Spark
# files share a unit so they share one JVM. The two lists take about the same time; both go first.
CPU_HEAVY_UNITS = {
    "cpu-heavy-a": ("fault/test_failover.py", "fault/test_power_cut.py", "fault/test_kill_during_sync_flush.py",
                    "remoting/test_cpp_overload.py", "fault/test_overload.py", "remoting/test_steady_load.py",
                    "grpc/test_grpc_overload.py", "test_perf_quick.py", "remoting/test_remoting_flood.py",
                    "integration/test_log_flood.py"),
    "cpu-heavy-b": ("spark/test_load_e2e.py", "spark/test_datasource.py", "spark/test_failover_load_e2e.py",
                    "spark/test_checker.py", "fault/test_power_cut_cluster.py", "fault/test_overload_consumers.py",
                    "integration/test_native_flood.py", "integration/test_http_flood.py",
                    "simulation/test_simulation.py"),
}
_UNIT_OF_FILE = {file: unit for unit, files in CPU_HEAVY_UNITS.items() for file in files}
_HEAVY_ORDER = {file: (list(CPU_HEAVY_UNITS).index(unit), files.index(file))
                for unit, files in CPU_HEAVY_UNITS.items() for file in files}


def _under_tests(path: str) -> str:
    """A test file's path below tests/ ("fault/test_failover.py"), from a node id or a path."""
    path = path.replace("\\", "/").split("::", 1)[0]
    return path.split("tests/", 1)[1] if path.startswith("tests/") or "/tests/" in path else path


def work_unit(nodeid: str) -> str:
    """The unit a test runs in: its CPU-heavy list, else its file."""
    file = _under_tests(nodeid)
    return _UNIT_OF_FILE.get(file, file)


def pytest_xdist_make_scheduler(config, log):
    """xdist's file scheduling with the CPU-heavy lists as units, in collection order (heavy first).
    (xdist's own --dist loadgroup does not group under pytest 9: it renames node ids a way pytest 9
    no longer reads.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class HeavyUnitsScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return HeavyUnitsScheduling(config, log)


def pytest_collection_modifyitems(items):
    tests_dir = pathlib.Path(__file__).parent
    for item in items:
        path = pathlib.Path(str(item.fspath))
        if tests_dir in path.parents and path.relative_to(tests_dir).parts[0] in SLOW_TEST_DIRS \
                and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TEST_TIMEOUT_S))
    # Stable: every other test keeps its place.
    items.sort(key=lambda item: _HEAVY_ORDER.get(_under_tests(str(item.fspath)), (len(CPU_HEAVY_UNITS), 0)))


@pytest.fixture
def start_cluster(tmp_path):
    """``start_cluster(**kwargs)`` -> a running LocalCluster, stopped at teardown."""
    started: list[LocalCluster] = []

    def start(name: str = "cluster", **kwargs) -> LocalCluster:
        for attempt in range(3):
            cluster = LocalCluster(str(tmp_path / (name if attempt == 0 else f"{name}-{attempt}")), **kwargs)
            try:
                cluster.start()
            except RuntimeError:
                # Ports are picked free, then bound by the children: another xdist worker can take one in
                # between (seen once in ~1,000 tests). Only that is retried, on fresh ports.
                if not port_taken(cluster.data_dir) or attempt == 2:
                    raise
                continue
            started.append(cluster)
            return cluster

    yield start
    for cluster in reversed(started):
        cluster.stop()


def client_config(cluster: LocalCluster, **changes) -> ClientConfig:
    """Client settings for tests: this cluster's NameServers (of the door ``transport`` names) and
    quick rebalancing."""
    remoting = changes.get("transport") == "remoting"
    namesrv = cluster.remoting_namesrv if remoting else cluster.namesrv
    base = dict(namesrv_endpoints=tuple(f"tcp://{a}" for a in namesrv.split(";")),
                rebalance_interval_ms=300, client_heartbeat_interval_ms=1000,
                consumer_offset_commit_interval_ms=200, request_timeout_ms=5000, pull_suspend_ms=2000)
    if remoting and cluster.tls_cert_path:   # a cluster with TLS: its remoting doors, over TLS
        base.update(tls_enable=True, tls_trust_cert_path=cluster.tls_cert_path)
    base.update(changes)
    return ClientConfig(**base)


def await_group_caught_up(cfg: ClientConfig, topic: str, group: str, timeout_s: float = 30.0) -> None:
    """Wait until ``group`` has committed every queue of ``topic`` to its end.

    A push consumer commits an offset only once every message below it was handed to the
    listener and returned, so afterwards nothing more can arrive from what was stored: the
    sound way to say "nothing else came" (a sleep only says "nothing came yet")."""
    from rocketbox.cluster.client.admin import Admin
    from rocketbox.cluster.testing import wait_until

    with Admin(config=cfg) as admin:
        wait_until(lambda: all(row["lag"] == 0 for row in admin.queue_offsets(topic, group)), timeout_s,
                   interval_s=0.1, what=f"group {group} committed {topic} to its end")


class UndecidedTransactions:
    """A transaction listener that never decides: its half messages stay open (checked back, unresolved)."""

    def execute_local_transaction(self, message, arg):
        from rocketbox.cluster.client.transaction import LocalTransactionState
        return LocalTransactionState.UNKNOW

    def check_local_transaction(self, message):
        from rocketbox.cluster.client.transaction import LocalTransactionState
        return LocalTransactionState.UNKNOW


def fill_topic(cfg: ClientConfig, topic: str, queues: int, count: int, *, tags: str = "",
               body_prefix: str = "m") -> list:
    """Create ``topic`` with ``queues`` queues and send it ``count`` messages (bodies ``m0``, ``m1``, ...,
    with ``tags``) one sync send each; their SendResults."""
    from rocketbox.cluster.client.admin import Admin
    from rocketbox.cluster.client.message import Message
    from rocketbox.cluster.client.producer import Producer

    with Admin(config=cfg) as admin:
        admin.create_topic(topic, queues)
    with Producer("FillTopicPG", config=cfg) as producer:
        return [producer.send(Message(topic, f"{body_prefix}{i}".encode(), tags=tags)) for i in range(count)]


def mapping_vm_flags(path) -> list[set[str]]:
    """The VmFlags of each of this process's mappings of ``path`` (/proc/self/smaps); "rr" is
    MADV_RANDOM."""
    found, current = [], None
    with open("/proc/self/smaps") as f:
        for line in f:
            fields = line.split()
            if not fields[0].endswith(":"):   # a mapping's header: range, perms, offset, dev, inode, path
                current = fields[5] if len(fields) >= 6 else None
            elif fields[0] == "VmFlags:" and current == str(path):
                found.append(set(fields[1:]))
    return found
