"""The cluster a test gets: a LocalCluster started with a test's options, which knows its
endpoints, hands out client settings suited to tests, and whose stop leaves no process behind."""

from __future__ import annotations

import dataclasses
import shutil
import warnings

import psutil

from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.config import ClientConfig
from rocketbox.cluster.errors import NoRouteError
from rocketbox.cluster.pytest_plugin import options as cluster_options
from rocketbox.cluster.testing import LocalCluster

# The addresses a test may want, by LocalCluster attribute; a role the options left out answers None.
# ``namesrv`` is what RocketBox's clients take ("host:port;host:port"); ``remoting_namesrv`` is a
# RocketMQ client's namesrvAddr; ``proxy_endpoint`` a RocketMQ 5 (gRPC) client's endpoints;
# ``console_url`` the web console's http://host:port/.
ENDPOINTS = ("namesrv", "remoting_namesrv", "metrics_url", "proxy_endpoint", "console_url")
# After the supervisor exits, how long its children get to be gone before they are killed.
CHILDREN_EXIT_WAIT_S = 10.0
# Client settings of the plugin's clients: a group settles in well under a second, commits land
# quickly, and a parked pull comes back within a test's patience.
TEST_CLIENT_SETTINGS = dict(rebalance_interval_ms=300, client_heartbeat_interval_ms=1000,
                            consumer_offset_commit_interval_ms=200, request_timeout_ms=5000, pull_suspend_ms=2000)


class RocketBoxCluster(LocalCluster):
    """``namesrv``, ``data_dir`` and every ``endpoints`` entry, plus all of LocalCluster (``pid``,
    ``kill``, ``await_running``, ``state``, ...). ``failures`` counts failed tests that used it."""

    def __init__(self, data_dir: str, options: dict):
        self.options = cluster_options.combine(options)
        super().__init__(data_dir, **cluster_options.cluster_keywords(self.options))
        self.failures = 0
        self.leftovers: list[str] = []

    def start(self, ready_timeout_s: float | None = None) -> "RocketBoxCluster":
        return super().start(ready_timeout_s or self.options[cluster_options.READY_TIMEOUT])

    @property
    def endpoints(self) -> dict[str, str | None]:
        return {name: getattr(self, name) for name in ENDPOINTS}

    def client_config(self, **changes) -> ClientConfig:
        """Settings for a RocketBox client of this cluster (native door unless ``transport="remoting"``)."""
        namesrv = self.remoting_namesrv if changes.get("transport") == "remoting" else self.namesrv
        settings = {**TEST_CLIENT_SETTINGS, "namesrv_endpoints": tuple(f"tcp://{a}" for a in namesrv.split(";"))}
        return dataclasses.replace(ClientConfig(), **{**settings, **changes})

    def create_topic(self, topic: str, queues: int = 4, **admin_options) -> None:
        """Create (or resize) ``topic`` on every master and wait until the NameServers route it."""
        with Admin(config=self.client_config()) as admin:
            admin.create_topic(topic, queues, **admin_options)

    def ensure_topic(self, topic: str, queues: int = 4) -> None:
        """Create ``topic`` unless the NameServers already route it (a send may have auto-created it)."""
        with Admin(config=self.client_config()) as admin:
            try:
                admin.route(topic)
                return
            except NoRouteError:
                pass
            admin.create_topic(topic, queues)

    def processes(self) -> list[psutil.Process]:
        """The supervisor and every process under it, now (pid reuse safe: psutil keeps start times)."""
        if self.process is None or self.process.poll() is not None:
            return []
        try:
            supervisor = psutil.Process(self.process.pid)
            return [supervisor, *supervisor.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the supervisor (which stops its children); any child still there after it is
        killed, named in ``leftovers`` and in a warning: the test run must not leak processes."""
        processes = self.processes()
        super().stop(timeout_s)
        _, alive = psutil.wait_procs(processes, timeout=CHILDREN_EXIT_WAIT_S)
        for process in alive:
            try:
                self.leftovers.append(f"{process.pid} {process.name()}")
                process.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=CHILDREN_EXIT_WAIT_S)
        if alive:
            warnings.warn(f"RocketBox cluster {self.data_dir}: processes outlived the supervisor and were "
                          f"killed: {', '.join(self.leftovers)}", RuntimeWarning, stacklevel=2)

    def dispose(self) -> bool:
        """Remove the data dir unless a test that used the cluster failed (its logs explain the
        failure); True when removed. What cannot be removed is left to pytest's tmp retention."""
        if self.failures:
            return False
        shutil.rmtree(self.data_dir, ignore_errors=True)
        return True
