"""A cheap open-loop sender for overload runs: SEND_MESSAGE_V2 frames made once and patched per
message (opaque, UNIQ_KEY), sent on one DEALER socket at a fixed rate, every answer read on the
same thread. It costs the sending process a few microseconds a message where our Producer costs
~100, so two cores can offer a broker twice what it stores (the Producer's own overload behaviour
is checked apart, at a lower rate: tests/fault/test_overload.py).

It behaves as our Producer does on SYSTEM_BUSY ("start flow control for a while"): every send to
the broker is held for a random back-off, doubling with each busy answer in a row (``BACKOFF_MS``
up to ``BACKOFF_MAX_MS``), and the refused message is sent again when the hold ends (at most 3
attempts), within its send time-out; messages that fall due meanwhile wait, and those whose time
runs out while held end busy without being sent. Every request's outcome is counted: SEND_OK
(with its latency: request sent to answer), SYSTEM_BUSY (with the reason's tag), another code, or
no answer within the time-out. Messages end acked, busy (refused, or held past their time) or
unanswered; acked UNIQ_KEYs are kept for the read-back.
"""

from __future__ import annotations

import heapq
import os
import random
import resource
import struct
import time

import zmq

from rocketbox.cluster.protocol import RequestCode, ResponseCode, send_fields_short
from rocketbox.cluster.message.properties import PROPERTY_UNIQ_KEY, properties_text
from rocketbox.cluster.wire_format import Command, encode_header

KEY_CHARS = 24
ATTEMPTS_MAX = 3
BACKOFF_MS = 20
BACKOFF_MAX_MS = 1000
_OPAQUE = struct.Struct(">i")
_RESPONSE_FIXED = struct.Struct(">iBhii")


class _Template:
    """One SEND_MESSAGE_V2 header with room for an opaque and a UNIQ_KEY of KEY_CHARS characters."""

    def __init__(self, topic: str, queue_count: int):
        self.headers = []
        placeholder = "#" * KEY_CHARS
        for queue_id in range(queue_count):
            fields = {"producerGroup": "OverloadRawProducer", "topic": topic, "queueId": str(queue_id),
                      "sysFlag": "0", "bornTimestamp": str(int(time.time() * 1000)), "flag": "0",
                      "properties": properties_text([(PROPERTY_UNIQ_KEY, placeholder)]), "reconsumeTimes": "0",
                      "unitMode": "false", "batch": "false"}
            raw = encode_header(Command(RequestCode.SEND_MESSAGE_V2, send_fields_short(fields), b""))
            self.headers.append((raw, raw.index(placeholder.encode())))

    def header(self, seq: int, opaque: int, key: bytes) -> bytes:
        raw, key_at = self.headers[seq % len(self.headers)]
        out = bytearray(raw)
        _OPAQUE.pack_into(out, 7, opaque)
        out[key_at:key_at + KEY_CHARS] = key
        return bytes(out)


def _answer(frames) -> tuple[int, int, str]:
    """(code, opaque, remark) of a response's header frame."""
    raw = frames[0]
    code, _language, _version, opaque, _flag = _RESPONSE_FIXED.unpack_from(raw, 0)
    (remark_len,) = _OPAQUE.unpack_from(raw, _RESPONSE_FIXED.size)
    at = _RESPONSE_FIXED.size + 4
    return code, opaque, raw[at:at + remark_len].decode(errors="replace")


def probe(endpoint: str, topic: str, timeout_s: float = 10.0) -> tuple[int, str]:
    """One send, its answer's (code, remark): whether the broker takes sends now (a test awaits an
    overload with it before its client sends)."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    try:
        sock.connect(endpoint)
        opaque = random.randrange(1 << 30)
        key = f"{random.getrandbits(64):0{KEY_CHARS}d}".encode()
        sock.send_multipart([_Template(topic, 1).header(0, opaque, key), b"probe"])
        deadline = time.monotonic() + timeout_s
        while sock.poll(max(1, int((deadline - time.monotonic()) * 1000)), zmq.POLLIN):
            code, answered, remark = _answer(sock.recv_multipart())
            if answered == opaque:
                return code, remark
            if time.monotonic() >= deadline:
                break
        raise TimeoutError(f"no answer from {endpoint} within {timeout_s} s")
    finally:
        sock.close(0)


def await_refusal(endpoint: str, topic: str, timeout_s: float = 60) -> None:
    """Probe until the broker refuses a send SYSTEM_BUSY: an overload test lets its client send only
    then (on a loaded machine a client's start once outlasted a load of fixed length)."""
    deadline = time.monotonic() + timeout_s
    answers: dict[tuple[int, str], int] = {}
    while time.monotonic() < deadline:
        code, remark = probe(endpoint, topic)
        if code == ResponseCode.SYSTEM_BUSY:
            return
        answers[code, remark[:80]] = answers.get((code, remark[:80]), 0) + 1
    raise AssertionError(f"{endpoint} refused no probe for {timeout_s} s; answers (code, remark): count {answers}")


def busy_tag(remark: str) -> str:
    return remark[:remark.index("]") + 1] if remark.startswith("[") and "]" in remark else remark[:80]


def run(endpoint: str, topic: str, *, rate: int, duration_s: float, body_bytes: int, queue_count: int = 4,
        timeout_s: float = 3.0, window: int = 0, keep_keys: bool = True, flow_control: bool = True) -> dict:
    """Offer ``rate`` msg/s for ``duration_s`` (``window`` > 0: instead keep that many requests in
    flight, a closed loop, to measure capacity), then wait for the last answers. Returns counts.
    ``flow_control`` False: no hold after SYSTEM_BUSY (a client that only retries, as RocketMQ 4's)."""
    context = zmq.Context.instance()
    sock = context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 1_000_000)
    sock.setsockopt(zmq.RCVHWM, 1_000_000)
    sock.connect(endpoint)
    template = _Template(topic, queue_count)
    body = os.urandom(body_bytes)
    prefix = f"{os.getpid():08X}{random.getrandbits(32):08X}"
    inflight: dict[int, tuple] = {}     # opaque -> (seq, attempt, sent_s, message deadline)
    deadlines: list = []                # (request deadline, opaque)
    retries: list = []                  # (due, seq, attempt, message deadline)
    stats = {"requests": 0, "request_ok": 0, "request_busy": 0, "request_other": 0, "request_unanswered": 0,
             "acked": 0, "busy": 0, "unanswered": 0, "other": 0, "offered": 0, "held_past_time": 0}
    hold = [0.0, 0]   # until when sends wait, busy answers in a row
    answer_max = [0.0]   # the longest any answer took
    reasons: dict[str, int] = {}
    example = {}
    latencies_us: list[float] = []
    acked_keys: list[str] = []
    opaque_seq = [random.randrange(1 << 20)]

    def key_of(seq: int) -> bytes:
        return f"{prefix}{seq:08d}".encode()

    def send(seq: int, attempt: int, message_deadline: float) -> None:
        opaque_seq[0] = (opaque_seq[0] + 1) & 0x7FFFFFFF
        opaque = opaque_seq[0]
        now = time.perf_counter()
        sock.send_multipart([template.header(seq, opaque, key_of(seq)), body], copy=False)
        stats["requests"] += 1
        inflight[opaque] = (seq, attempt, now, message_deadline)
        heapq.heappush(deadlines, (min(now + timeout_s, message_deadline), opaque))

    def settle_busy(seq: int, attempt: int, message_deadline: float, now: float) -> None:
        hold[1] += 1
        cap_ms = min(BACKOFF_MAX_MS, BACKOFF_MS << min(hold[1] - 1, 20))
        due = now + random.uniform(cap_ms / 2, cap_ms) / 1000
        if flow_control:
            hold[0] = max(hold[0], due)
        if attempt < ATTEMPTS_MAX and due < message_deadline:
            heapq.heappush(retries, (due, seq, attempt + 1, message_deadline))
        else:
            stats["busy"] += 1

    t0 = time.perf_counter()
    seq = 0
    while True:
        now = time.perf_counter()
        offering = now - t0 < duration_s
        held = now < hold[0]
        if offering and not held:
            due = (window - len(inflight) - len(retries)) if window else int((now - t0) * rate) + 1 - seq
            for _ in range(max(0, due)):
                # Open loop: a message is due at its time; one whose time ran out during a hold is not sent.
                message_deadline = (t0 + seq / rate if rate and not window else now) + timeout_s
                if message_deadline <= now:
                    stats["busy"] += 1
                    stats["held_past_time"] += 1
                else:
                    send(seq, 1, message_deadline)
                seq += 1
        elif not offering and not inflight and not retries:
            break
        elif now - t0 > duration_s + 2 * timeout_s + 5:
            break
        while retries and retries[0][0] <= now and not held:
            _, rseq, attempt, message_deadline = heapq.heappop(retries)
            if message_deadline <= now:
                stats["busy"] += 1
                stats["held_past_time"] += 1
            else:
                send(rseq, attempt, message_deadline)
        while sock.poll(0 if offering and not window else 1, zmq.POLLIN):
            frames = sock.recv_multipart()
            code, opaque, remark = _answer(frames)
            entry = inflight.pop(opaque, None)
            if entry is None:
                continue   # answered after its time-out: already counted unanswered
            rseq, attempt, sent_s, message_deadline = entry
            now = time.perf_counter()
            answer_max[0] = max(answer_max[0], now - sent_s)
            if code == ResponseCode.SUCCESS:
                hold[1] = 0
                stats["request_ok"] += 1
                stats["acked"] += 1
                latencies_us.append((now - sent_s) * 1e6)
                if keep_keys:
                    acked_keys.append(key_of(rseq).decode())
            elif code == ResponseCode.SYSTEM_BUSY:
                stats["request_busy"] += 1
                tag = busy_tag(remark)
                reasons[tag] = reasons.get(tag, 0) + 1
                example.setdefault(tag, remark)
                settle_busy(rseq, attempt, message_deadline, now)
            else:
                stats["request_other"] += 1
                stats["other"] += 1
                example.setdefault(f"code {code}", remark)
            if not sock.poll(0, zmq.POLLIN):
                break
        while deadlines and deadlines[0][0] <= now:
            _, opaque = heapq.heappop(deadlines)
            if inflight.pop(opaque, None) is not None:
                stats["request_unanswered"] += 1
                stats["unanswered"] += 1
        if offering and not window:
            if (seq + 1) / rate > time.perf_counter() - t0:
                sock.poll(1, zmq.POLLIN)   # until the next is due or an answer comes (at most 1 ms)
    stats["offered"] = seq
    sock.close(0)
    return {**stats, "offered_s": duration_s, "answer_max_ms": answer_max[0] * 1000, "reasons": reasons, "examples": example,
            "latencies_us": latencies_us, "acked_keys": acked_keys,
            "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def _process(conn, endpoint: str, topic: str, kwargs: dict) -> None:
    from rocketbox.perf.harness import serve_parent
    try:
        serve_parent(conn, lambda: run(endpoint, topic, **kwargs))
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def senders(endpoint: str, topic: str, processes: int, **kwargs) -> list:
    """``processes`` spawned senders (``harness.ChildProcess``), each with ``kwargs`` (rate split among them)."""
    from rocketbox.perf.harness import ChildProcess
    if kwargs.get("rate"):
        kwargs = {**kwargs, "rate": max(1, kwargs["rate"] // processes)}
    time_s_max = kwargs["duration_s"] + 2 * kwargs.get("timeout_s", 3.0) + 10
    return [ChildProcess(_process, (endpoint, topic, kwargs), f"raw-sender-{i}", time_s_max)
            for i in range(processes)]


def merged(results: list[dict]) -> dict:
    total: dict = {"reasons": {}, "examples": {}, "latencies_us": [], "acked_keys": [], "max_rss_bytes": 0}
    for r in results:
        for k, v in r.items():
            if k in ("reasons",):
                for tag, n in v.items():
                    total["reasons"][tag] = total["reasons"].get(tag, 0) + n
            elif k == "examples":
                for tag, text in v.items():
                    total["examples"].setdefault(tag, text)
            elif k in ("latencies_us", "acked_keys"):
                total[k].extend(v)
            elif k in ("max_rss_bytes", "offered_s", "answer_max_ms"):
                total[k] = max(total.get(k, 0), v)
            else:
                total[k] = total.get(k, 0) + v
    return total
