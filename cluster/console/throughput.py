"""Throughput history for the charts: every ``interval_s`` the console asks each broker for its
counters of messages stored and served since it started (GET_BROKER_RUNTIME_INFO) and keeps the
per-second rates of the last ``window_s``. Rates come from counter differences, so none is lost
between samples; a counter that went down (the broker restarted) starts its rate afresh."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from rocketbox.cluster.client.routes import normalize_endpoint
from rocketbox.cluster.errors import ClientError
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.zmq_transport import TransportError

log = logging.getLogger(__name__)


class ThroughputHistory:
    def __init__(self, admin, window_s: float, clock=time.time):
        self.admin = admin
        self.window_s = window_s
        self.clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, int, int]] = {}
        # (epoch ms, {broker label: (in per s, out per s)})
        self._points: deque = deque()
        self._warn = RateLimitedLog(log, burst=3, interval_s=60.0)

    def _brokers(self) -> list[tuple[str, str]]:
        info = self.admin.cluster_info()
        return [(f"{name}/{broker_id}", normalize_endpoint(address))
                for name, data in sorted((info.get("brokerAddrTable") or {}).items())
                for broker_id, address in sorted((data.get("brokerAddrs") or {}).items())]

    def sample(self) -> None:
        """Ask every broker once; a broker that does not answer has no point this time."""
        now = self.clock()
        try:
            brokers = self._brokers()
        except (ClientError, TransportError) as exc:
            self._warn.warning("namesrv", "throughput sample: the NameServers did not answer: %s", exc)
            return
        rates = {}
        for label, endpoint in brokers:
            try:
                info = self.admin.broker_runtime_info(endpoint)
            except (ClientError, TransportError, ValueError) as exc:
                self._warn.warning(label, "throughput sample: %s did not answer: %s", label, exc)
                continue
            stored, served = int(info.get("messagesStored", 0)), int(info.get("messagesServed", 0))
            last = self._last.get(label)
            self._last[label] = (now, stored, served)
            if last is None or stored < last[1] or served < last[2] or now <= last[0]:
                continue
            elapsed = now - last[0]
            rates[label] = (round((stored - last[1]) / elapsed, 2), round((served - last[2]) / elapsed, 2))
        with self._lock:
            self._points.append((int(now * 1000), rates))
            while self._points and now * 1000 - self._points[0][0] > self.window_s * 1000:
                self._points.popleft()

    def series(self) -> dict:
        """{"window_s", "brokers": [...], "points": [{"t": ms, "in": total, "out": total, "by": {...}}]}."""
        with self._lock:
            points = list(self._points)
        brokers = sorted({label for _, rates in points for label in rates})
        return {"window_s": self.window_s, "brokers": brokers,
                "points": [{"t": t, "in": round(sum(r[0] for r in rates.values()), 2),
                            "out": round(sum(r[1] for r in rates.values()), 2),
                            "by": {label: {"in": r[0], "out": r[1]} for label, r in rates.items()}}
                           for t, rates in points]}
