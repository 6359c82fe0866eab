"""The exporter: a prometheus-client collector that gathers every number at scrape time, and the
HTTP server that answers ``/metrics``.

At each scrape it sends GET_BROKER_METRICS to every broker and GET_NAMESRV_METRICS to this host's
NameServers at once (ZeroMQ, the client's I/O thread) and waits for all answers together, bounded
by ``request_timeout_ms``; a broker or NameServer that does not answer is reported
``rocketbox_broker_up 0`` / ``rocketbox_namesrv_up 0`` and the scrape goes on. It reads the supervisor's
cluster.json for each process's restarts and state, and psutil for their CPU and memory. Between
scrapes it does nothing, and the brokers do nothing for it: the HTTP door lives here, never in a
broker's event loop. The door is the console's (``cluster/http_door.py``: deadlines for a request's
head and body, bounded connections, a flood pushed out before a real client); a scrape runs
prometheus-client's own WSGI app (content negotiation, gzip, ``name[]``) on one of two threads, so
the door's loop never waits on the brokers.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout


from rocketbox.cluster.acl import accounts_if
from rocketbox.cluster.http_door import HttpDoor
from rocketbox.cluster.log_limit import RateLimitedLog

from rocketbox.cluster.metrics.settings import BrokerTarget, ExporterSettings, NamesrvTarget
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
        from rocketbox.cluster.metrics.families import broker_families, process_families   # prometheus-client
        brokers = [(target, RequestCode.GET_BROKER_METRICS) for target in self.settings.brokers]
        namesrvs = [(target, RequestCode.GET_NAMESRV_METRICS) for target in self.settings.namesrvs]
        answers, unanswered = self._snapshots(brokers + namesrvs)
        yield from broker_families(_of(answers, BrokerTarget), _of(unanswered, BrokerTarget),
                                   self.settings.cluster_name, _of(answers, NamesrvTarget),
                                   _of(unanswered, NamesrvTarget))
        state = _read_json(self.settings.state_path)
        yield from process_families(state, self.settings.cluster_name, _usage(state))

    def _snapshots(self, asked: list[tuple]) -> tuple[list[tuple], list[tuple]]:
        """Each (target, request code) of ``asked`` sent at once: (target, its snapshot) of those
        that answered in time; (target, why not) of the others."""
        timeout_s = self.settings.request_timeout_ms / 1000
        futures = {}
        for target, code in asked:
            try:
                futures[target] = self.client.call_async(f"tcp://{target.address}", Command(code),
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
            log.info("%s (%s) gave no metrics this scrape: %s", target.name, target.address, reason)
        return answers, unanswered


def _of(rows: list[tuple], kind: type) -> list[tuple]:
    return [row for row in rows if isinstance(row[0], kind)]


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None   # not written yet, or being replaced: the processes' families are empty this scrape


def _usage(state: dict | None) -> dict[int, tuple[float, int]]:
    """pid -> (CPU seconds, resident bytes) of each child that runs and can be read."""
    import psutil   # at the first scrape: ~15 ms and 0.7 MB off the web process's start
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


# Scrapes served at once; more wait for a thread (each asks every broker).
SCRAPE_THREADS = 2


class MetricsExporter:
    """The collector registered on a registry of its own (no default process collectors: the
    processes are the children's, reported per child) and served over HTTP."""

    def __init__(self, settings: ExporterSettings):
        self.settings = settings
        self.client = RpcClient(default_timeout_ms=settings.request_timeout_ms)
        self._scrape_app = None   # prometheus-client's WSGI app over this exporter's registry (first scrape)
        self._scrape_app_lock = threading.Lock()
        self.door: HttpDoor | None = None
        self._scrapes = ThreadPoolExecutor(SCRAPE_THREADS, thread_name_prefix="metrics-scrape")
        # Scrapes carry an account's credentials when the settings ask for them (any account may read).
        self.access = accounts_if(settings.require_credentials, settings.acl_file)
        self.refusals = 0

    def start(self) -> str:
        """Listen (OSError when the port is taken); the URL to scrape."""
        self.door = HttpDoor(self._asgi_app(), self.settings.host, self.settings.port, "metrics")
        self.door.start()
        log.info("metrics on %s for %d broker(s)", self.settings.url, len(self.settings.brokers))
        return self.settings.url

    def _asgi_app(self):
        """prometheus-client's WSGI app run on a scrape thread, behind HTTP Basic when asked for
        (401 without an account's credentials)."""
        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
            if self.access is not None:
                client = scope["client"][0] if scope.get("client") else ""
                from rocketbox.cluster.acl.decision import AUTHENTICATION, http_refusal   # with credentials only
                refused = http_refusal(self.access.config, headers.get("authorization"), client, admin_only=False)
                if refused is not None:
                    self.refusals += 1
                    _limited.warning("acl:http", "refused a scrape from %s: %s", client, refused.reason)
                    challenge = [("Content-Type", "text/plain"),
                                 ("WWW-Authenticate", 'Basic realm="RocketBox metrics"')]
                    await _answer(send, 401 if refused.kind == AUTHENTICATION else 403, challenge,
                                  refused.reason.encode())
                    return
            environ = {"REQUEST_METHOD": scope["method"], "PATH_INFO": scope["path"],
                       "QUERY_STRING": scope["query_string"].decode("latin-1"),
                       "HTTP_ACCEPT": headers.get("accept"), "HTTP_ACCEPT_ENCODING": headers.get("accept-encoding")}
            status, answer_headers, body = await asyncio.get_running_loop().run_in_executor(
                self._scrapes, self._scrape, environ)
            await _answer(send, status, answer_headers, body)
        return app

    def _scrape(self, environ: dict) -> tuple[int, list, bytes]:
        """One scrape, on a scrape thread. prometheus-client (its exposition module loads http.server,
        wsgiref and urllib: ~50 ms and ~4 MB) loads at the first, not at the web process's start,
        which is on ``cluster up``'s path (perf/RESULTS.md "A lean start")."""
        with self._scrape_app_lock:
            if self._scrape_app is None:
                from prometheus_client import CollectorRegistry, make_wsgi_app
                registry = CollectorRegistry(auto_describe=False)
                registry.register(ClusterCollector(self.settings, self.client))
                self._scrape_app = make_wsgi_app(registry)
        return _run_wsgi(self._scrape_app, environ)

    def close(self) -> None:
        if self.door is not None:
            self.door.close()
        self._scrapes.shutdown(wait=False, cancel_futures=True)
        self.client.close()


def _run_wsgi(app, environ: dict) -> tuple[int, list, bytes]:
    answered = []
    body = b"".join(app(environ, lambda status, headers: answered.append((int(status.split()[0]), headers))))
    return answered[0][0], answered[0][1], body


async def _answer(send, status: int, headers: list, body: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers]})
    await send({"type": "http.response.body", "body": body})
