"""What every page handler shares in the console process: the settings, one Admin (the CLI's
client; thread-safe: each thread gets its own sockets), a producer for test messages (made on the
first send), the queue-rate tracker and the throughput history."""

from __future__ import annotations

import dataclasses
import threading

from rocketbox.cluster.acl import accounts_if
from rocketbox.cluster.client.admin import Admin
from rocketbox.cluster.client.producer import Producer
from rocketbox.cluster.config import ClientConfig
from rocketbox.cluster.console.settings import ConsoleSettings
from rocketbox.cluster.console.throughput import ThroughputHistory
from rocketbox.cluster.console.topics import QueueRates

# The producer group of the test messages the console sends (rocketmq-dashboard's is its own too).
TEST_PRODUCER_GROUP = "CONSOLE_TEST_PRODUCER"
# The sampler asks with a shorter time-out: a broker that hangs costs one point, not the chart.
SAMPLE_TIMEOUT_MS = 1_000


class ConsoleContext:
    def __init__(self, settings: ConsoleSettings):
        self.settings = settings
        self.client_config = ClientConfig(namesrv_endpoints=settings.namesrv_endpoints,
                                          request_timeout_ms=settings.request_timeout_ms)
        self.admin = Admin(config=self.client_config)
        self.sampler_admin = Admin(config=dataclasses.replace(self.client_config, request_timeout_ms=SAMPLE_TIMEOUT_MS))
        self.rates = QueueRates()
        self.history = ThroughputHistory(self.sampler_admin, settings.chart_window_s)
        self._producer: Producer | None = None
        self._producer_lock = threading.Lock()
        # The accounts every request is checked against, when the console asks for credentials.
        self.access = accounts_if(settings.require_credentials, settings.acl_file)

    def producer(self) -> Producer:
        with self._producer_lock:
            if self._producer is None:
                self._producer = Producer(TEST_PRODUCER_GROUP, config=self.client_config)
            return self._producer

    def close(self) -> None:
        with self._producer_lock:
            if self._producer is not None:
                self._producer.shutdown()
        self.admin.shutdown()
        self.sampler_admin.shutdown()
