"""Open-loop load for the overload scenario and tests: producer processes that send at a fixed rate
whatever the broker answers (load offered, not load a closed loop lets through); what the broker
can store is measured by ``raw_sender.py``'s closed loop.

Each message is one ``send_async`` (retries and SYSTEM_BUSY back-off inside the Producer, within
its send time-out); its outcome is one of: acked (SEND_OK, its UNIQ_KEY kept for the read-back
and the time from the call to the answer), not_ok (stored, but FLUSH_DISK_TIMEOUT or another
status short of SEND_OK), busy (the broker's SYSTEM_BUSY with its reason, after
the producer's retries), refused (another broker answer), unanswered (no answer: a time-out or a
lost connection) or held back (the producer's own async back-pressure gave no place in time).
"""

from __future__ import annotations

import os
import resource
import threading
import time

from rocketbox.cluster import Message, Producer
from rocketbox.cluster.errors import BrokerError, BrokerUnreachable
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.perf.harness import ChildProcess, client_config, serve_parent

OUTCOMES = ("acked", "not_ok", "busy", "refused", "unanswered", "held_back")


def producer_config(namesrv: str, transport: str, send_timeout_ms: int):
    # Bodies are random bytes sent as they are: compressing them would cost the producer, not the broker.
    return client_config(namesrv, transport=transport, request_timeout_ms=send_timeout_ms,
                         send_timeout_ms=send_timeout_ms, compress_body_threshold_bytes=1 << 30)


def busy_reason(remark: str) -> str:
    """The RocketMQ tag of a SYSTEM_BUSY remark ("[TIMEOUT_CLEAN_QUEUE]", ...), or the remark."""
    return remark[:remark.index("]") + 1] if remark.startswith("[") and "]" in remark else remark


class Outcomes:
    def __init__(self):
        self.lock = threading.Lock()
        self.counts = dict.fromkeys(OUTCOMES, 0)
        self.reasons: dict[str, int] = {}
        self.examples: dict[str, str] = {}
        self.acked_keys: list[str] = []
        self.acked_latency_us: list[float] = []
        self.inflight = 0

    def record(self, started: float, result, error) -> None:
        now = time.perf_counter()
        with self.lock:
            self.inflight -= 1
            if error is None and result.status.name != "SEND_OK":
                self.counts["not_ok"] += 1
                self.reasons[result.status.name] = self.reasons.get(result.status.name, 0) + 1
                return
            if error is None:
                self.counts["acked"] += 1
                self.acked_keys.append(result.msg_id)
                self.acked_latency_us.append((now - started) * 1e6)
                return
            if isinstance(error, BrokerError) and error.code == ResponseCode.SYSTEM_BUSY:
                kind, reason = "busy", busy_reason(error.remark or "")
            elif isinstance(error, BrokerError):
                kind, reason = "refused", f"code {error.code}: {error.remark}"
            elif isinstance(error, BrokerUnreachable):
                kind, reason = "unanswered", str(error)
            else:
                kind, reason = "unanswered", f"{type(error).__name__}: {error}"
            self.counts[kind] += 1
            self.reasons[reason] = self.reasons.get(reason, 0) + 1
            self.examples.setdefault(kind, str(error)[:300])


def _offer(producer: Producer, topic: str, rate: int, duration_s: float, body: bytes) -> dict:
    out = Outcomes()
    t0 = time.perf_counter()
    sent = 0
    while True:
        elapsed = time.perf_counter() - t0
        if elapsed >= duration_s:
            break
        due = int(elapsed * rate) + 1 - sent
        if due <= 0:
            time.sleep(min(0.001, (sent + 1) / rate - elapsed))
            continue
        for _ in range(due):
            started = time.perf_counter()
            with out.lock:
                out.inflight += 1
            try:
                producer.send_async(Message(topic, body),
                                    callback=lambda r, e, s=started: out.record(s, r, e))
            except Exception as exc:  # the async back-pressure gave no place within the send time-out
                with out.lock:
                    out.inflight -= 1
                    out.counts["held_back"] += 1
                    out.examples.setdefault("held_back", str(exc)[:300])
            sent += 1
    offered_s = time.perf_counter() - t0
    settle = time.monotonic() + 15
    while out.inflight > 0 and time.monotonic() < settle:
        time.sleep(0.01)
    with out.lock:
        return {"offered": sent, "offered_s": offered_s, "counts": dict(out.counts), "reasons": dict(out.reasons),
                "examples": dict(out.examples), "acked_keys": list(out.acked_keys),
                "acked_latency_us": list(out.acked_latency_us), "never_ended": out.inflight,
                "busy_answers": producer.statistics()["busy_answers"],
                "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _offer_process(conn, namesrv: str, topic: str, rate: int, duration_s: float, body_bytes: int,
                   send_timeout_ms: int, transport: str) -> None:
    try:
        producer = Producer("OverloadProducer", config=producer_config(namesrv, transport, send_timeout_ms))
        body = os.urandom(body_bytes)
        try:
            producer.send(Message(topic, body))   # warm-up: route, connection
            serve_parent(conn, lambda: _offer(producer, topic, rate, duration_s, body))
        finally:
            producer.shutdown()
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def run_children(children: list[ChildProcess]) -> list[dict]:
    """Start every child (each warms up), start their clocks together, and collect their results."""
    try:
        for child in children:
            child.start()
        for child in children:
            child.go()
        return [child.result() for child in children]
    finally:
        for child in children:
            child.stop()


def merged(results: list[dict]) -> dict:
    """The processes' outcomes added up (latencies and keys joined)."""
    total = {"offered": 0, "offered_s": 0.0, "counts": dict.fromkeys(OUTCOMES, 0), "reasons": {}, "examples": {},
             "acked_keys": [], "acked_latency_us": [], "never_ended": 0, "busy_answers": 0, "max_rss_bytes": 0}
    for r in results:
        total["offered"] += r["offered"]
        total["offered_s"] = max(total["offered_s"], r["offered_s"])
        for k, v in r["counts"].items():
            total["counts"][k] += v
        for k, v in r["reasons"].items():
            total["reasons"][k] = total["reasons"].get(k, 0) + v
        for k, v in r["examples"].items():
            total["examples"].setdefault(k, v)
        total["acked_keys"].extend(r["acked_keys"])
        total["acked_latency_us"].extend(r["acked_latency_us"])
        total["never_ended"] += r["never_ended"]
        total["busy_answers"] += r["busy_answers"]
        total["max_rss_bytes"] = max(total["max_rss_bytes"], r["max_rss_bytes"])
    return total
