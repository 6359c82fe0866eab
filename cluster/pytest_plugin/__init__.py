"""RocketBox's pytest plugin (the ``pytest11`` entry point ``rocketbox`` in setup.py): real clusters
for the tests of applications that use RocketMQ's API.

Fixtures:
    rocketbox_cluster          a cluster of the test's own, started for it and stopped after it;
                               options from ``@pytest.mark.rocketbox(...)`` on the test, its class
                               or its module, or from an indirect parametrization (a dict)
    rocketbox_session_cluster  one cluster for the whole run; its options come from the fixture
                               ``rocketbox_session_options`` (override it in a conftest.py)
    rocketbox_producer         a Producer of the test's cluster, shut down after the test
    rocketbox_consumer         a factory of consumers of the test's cluster (clients.ConsumerFactory)

"The test's cluster" is ``rocketbox_session_cluster`` when the test asks for it and not for
``rocketbox_cluster``, else ``rocketbox_cluster``. Whatever happens in the test, its cluster is
stopped and no process of it is left (handle.RocketBoxCluster.stop). A cluster's data dir is
removed when its tests passed and kept when one failed: the failure's report names it.
"""

from __future__ import annotations

import contextlib
import os

import pytest

from rocketbox.cluster.client.producer import Producer
from rocketbox.cluster.pytest_plugin import options as cluster_options
from rocketbox.cluster.pytest_plugin.clients import ConsumerFactory, group_prefix
from rocketbox.cluster.pytest_plugin.handle import RocketBoxCluster

MARKER = "rocketbox"
SESSION_FIXTURE = "rocketbox_session_cluster"
FUNCTION_FIXTURE = "rocketbox_cluster"
# The clusters fixtures handed to a test: named in its failure report, kept for their logs.
_CLUSTERS_USED = pytest.StashKey[list]()


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(**options): options of the test's rocketbox_cluster "
                   f"({', '.join(cluster_options.DEFAULTS)}; e.g. brokers=2, flush_mode='SYNC_FLUSH')")


def _note_use(item, cluster: RocketBoxCluster) -> None:
    used = item.stash.setdefault(_CLUSTERS_USED, [])
    if cluster not in used:
        used.append(cluster)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    # The session cluster reaches a test through its fixture values; the others noted themselves.
    used = list(item.stash.get(_CLUSTERS_USED, []))
    used += [value for value in getattr(item, "funcargs", {}).values()
             if isinstance(value, RocketBoxCluster) and value not in used]
    for cluster in used:
        cluster.failures += 1
        if os.path.isdir(cluster.data_dir):   # a test's own cluster is gone by its teardown report
            report.sections.append((f"rocketbox cluster ({report.when})",
                                    f"data dir kept for its logs: {cluster.data_dir} (logs/, supervisor.out)"))


@contextlib.contextmanager
def _running(data_dir: str, options: dict, on_made=None):
    cluster = RocketBoxCluster(data_dir, options)
    if on_made is not None:
        on_made(cluster)
    try:
        yield cluster.start()
    finally:
        cluster.stop()
    cluster.dispose()


def _test_options(request) -> dict:
    try:
        return cluster_options.combine(cluster_options.from_markers(request.node.iter_markers(MARKER)),
                                       getattr(request, "param", None))
    except ValueError as exc:
        pytest.fail(f"rocketbox options of {request.node.nodeid}: {exc}", pytrace=False)


@pytest.fixture
def rocketbox_cluster(request, tmp_path_factory):
    """A cluster of this test's own (handle.RocketBoxCluster): ``.namesrv`` for RocketBox clients,
    ``.data_dir``, ``.endpoints``, ``.client_config()``, ``.create_topic()``."""
    options = _test_options(request)
    data_dir = str(tmp_path_factory.mktemp("rocketbox"))
    with _running(data_dir, options, lambda cluster: _note_use(request.node, cluster)) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def rocketbox_session_options() -> dict:
    """The options of ``rocketbox_session_cluster``; override this fixture to change them."""
    return {}


@pytest.fixture(scope="session")
def rocketbox_session_cluster(rocketbox_session_options, tmp_path_factory):
    """One cluster for every test of the run that asks for it, stopped when the run ends."""
    try:
        options = cluster_options.combine(rocketbox_session_options)
    except ValueError as exc:
        pytest.fail(f"rocketbox_session_options: {exc}", pytrace=False)
    with _running(str(tmp_path_factory.mktemp("rocketbox-session")), options) as cluster:
        yield cluster


def _the_tests_cluster(request) -> RocketBoxCluster:
    names = request.fixturenames
    fixture = SESSION_FIXTURE if SESSION_FIXTURE in names and FUNCTION_FIXTURE not in names else FUNCTION_FIXTURE
    cluster = request.getfixturevalue(fixture)
    _note_use(request.node, cluster)
    return cluster


@pytest.fixture
def rocketbox_producer(request):
    """A Producer (group ``<test name>-producer``) of the test's cluster."""
    cluster = _the_tests_cluster(request)
    with Producer(f"{group_prefix(request.node.name)}-producer", config=cluster.client_config()) as producer:
        yield producer


@pytest.fixture
def rocketbox_consumer(request):
    """``rocketbox_consumer(topic, expression="*", group=None, listener=None, queues=4)``: a started
    push consumer of a new group (``.received``, ``.wait_for(n)``); ``rocketbox_consumer.pull()``:
    a PullConsumer. Both of the test's cluster, shut down after the test."""
    factory = ConsumerFactory(_the_tests_cluster(request), group_prefix(request.node.name))
    try:
        yield factory
    finally:
        factory.close()
