"""The exporter: a prometheus-client collector that gathers every number at scrape time, and the
HTTP server that answers ``/metrics``.

At each scrape it sends GET_BROKER_METRICS to every broker at once (ZeroMQ, the client's I/O
thread) and waits for all answers together, bounded by ``request_timeout_ms``; a broker that does
not answer is reported ``rocketbox_broker_up 0`` and the scrape goes on. It reads the supervisor's
cluster.json for each process's restarts and state, and psutil for their CPU and memory. Between
scrapes it does nothing, and the brokers do nothing for it: the HTTP server's threads live here,
never in a broker's event loop.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout
from wsgiref.simple_server import WSGIRequestHandler, make_server

import psutil
from prometheus_client import CollectorRegistry, make_wsgi_app, start_http_server
from prometheus_client.exposition import ThreadingWSGIServer

from rocketbox.cluster.acl.acl_file import AclFile
from rocketbox.cluster.acl.decision import AUTHENTICATION, http_refusal
from rocketbox.cluster.log_limit import RateLimitedLog

from rocketbox.cluster.metrics.families import broker_families, process_families
from rocketbox.cluster.metrics.settings import BrokerTarget, ExporterSettings
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient, TransportError

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)


class ClusterCollector:
    """prometheus-client's custom collector protocol: ``collect()`` yields metric families."""

    def __init__(self, settings: ExporterSettings, client: RpcClient):
        self.settings = settings
        self.client = client

    def collect(self):
        answers, unanswered = self._snapshots()
        yield from broker_families(answers, unanswered, self.settings.cluster_name)
        state = _read_json(self.settings.state_path)
        yield from process_families(state, self.settings.cluster_name, _usage(state))

    def _snapshots(self) -> tuple[list[tuple[BrokerTarget, dict]], list[tuple[BrokerTarget, str]]]:
        """(broker, its snapshot) of those that answered in time; (broker, why not) of the others."""
        timeout_s = self.settings.request_timeout_ms / 1000
        futures = {}
        for target in self.settings.brokers:
            try:
                futures[target] = self.client.call_async(f"tcp://{target.address}",
                                                         Command(RequestCode.GET_BROKER_METRICS),
                                                         self.settings.request_timeout_ms)
            except TransportError as exc:
                futures[target] = exc
        deadline = time.monotonic() + timeout_s
        answers, unanswered = [], []
        for target, future in futures.items():
            try:
                if isinstance(future, Exception):
                    raise future
                response = future.result(max(deadline - time.monotonic(), 0.0))
                if response.code != ResponseCode.SUCCESS:
                    raise ValueError(f"answered {response.code}: {response.remark}")
                answers.append((target, json.loads(response.body)))
            except (TransportError, FutureTimeout, ValueError) as exc:
                unanswered.append((target, str(exc) or type(exc).__name__))
        for target, reason in unanswered:
            log.info("broker %s (%s) gave no metrics this scrape: %s", target.name, target.address, reason)
        return answers, unanswered


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None   # not written yet, or being replaced: the processes' families are empty this scrape


def _usage(state: dict | None) -> dict[int, tuple[float, int]]:
    """pid -> (CPU seconds, resident bytes) of each child that runs and can be read."""
    usage = {}
    for child in (state or {}).get("children", []):
        pid = child.get("pid")
        if not isinstance(pid, int):
            continue
        try:
            process = psutil.Process(pid)
            with process.oneshot():
                times = process.cpu_times()
                usage[pid] = (times.user + times.system, process.memory_info().rss)
        except psutil.Error:
            continue   # exited meanwhile, or not ours to read
    return usage


class MetricsExporter:
    """The collector registered on a registry of its own (no default process collectors: the
    processes are the children's, reported per child) and served over HTTP."""

    def __init__(self, settings: ExporterSettings):
        self.settings = settings
        self.client = RpcClient(default_timeout_ms=settings.request_timeout_ms)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ClusterCollector(settings, self.client))
        self._server = None
        # Scrapes carry an account's credentials when the settings ask for them (any account may read).
        self.access = AclFile(settings.acl_file) if settings.require_credentials else None
        self.refusals = 0

    def serve(self) -> str:
        """Listen (OSError when the port is taken); the URL to scrape."""
        if self.access is None:
            self._server, _thread = start_http_server(self.settings.port, self.settings.host, self.registry)
        else:
            app = self._guarded(make_wsgi_app(self.registry))
            self._server = make_server(self.settings.host, self.settings.port, app, ThreadingWSGIServer,
                                       handler_class=_QuietHandler)
            threading.Thread(target=self._server.serve_forever, name="metrics-http", daemon=True).start()
        log.info("metrics on %s for %d broker(s)", self.settings.url, len(self.settings.brokers))
        return self.settings.url

    def _guarded(self, app):
        """``app`` behind HTTP Basic: 401 without an account's credentials."""
        def guarded(environ, start_response):
            client = environ.get("REMOTE_ADDR", "")
            refused = http_refusal(self.access.config, environ.get("HTTP_AUTHORIZATION"), client, admin_only=False)
            if refused is None:
                return app(environ, start_response)
            self.refusals += 1
            status = "401 Unauthorized" if refused.kind == AUTHENTICATION else "403 Forbidden"
            _limited.warning("acl:http", "refused a scrape from %s: %s", client, refused.reason)
            start_response(status, [("Content-Type", "text/plain"),
                                    ("WWW-Authenticate", 'Basic realm="RocketBox metrics"')])
            return [refused.reason.encode()]
        return guarded

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        self.client.close()


class _QuietHandler(WSGIRequestHandler):
    """No line per request on stderr (prometheus-client's own server is quiet too)."""

    def log_message(self, format, *args) -> None:
        pass
