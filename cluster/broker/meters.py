"""What the broker counts for its metrics, cheaply, as it serves: plain integers in dicts.

Nothing here formats or exports: the broker hands these tables over in one snapshot
(``broker/metrics.py``) and the cluster's exporter process turns them into Prometheus families
(``cluster/metrics/``). The work on the request path is a dict look-up and a few additions per
request (per put or pull batch, never per message), as RocketMQ's instruments do:

- ``InTraffic``: messages and bytes stored per (topic, message type), and RocketMQ's message size
  histogram. RocketMQ records one size per put, the put's mean message size (wroteBytes /
  msgNum), so a batch of a thousand counts once; so does this.
- ``RpcLatency``: each request's time from its handler's start to its answer, per door, request
  code and response code, in RocketMQ's milliseconds buckets (a parked pull's time includes its
  hold, labelled is_long_polling as RocketMQ does).
"""

from __future__ import annotations

import time
from bisect import bisect_left

from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import DOOR_REMOTING, Command

# BrokerMetricsManager's message size buckets (bytes): 1 KiB, 4 KiB, 512 KiB, 1, 2, 4 MiB, then overflow.
MESSAGE_SIZE_BUCKETS_BYTES = (1024, 4 * 1024, 512 * 1024, 1024 * 1024, 2 * 1024 * 1024, 4 * 1024 * 1024)
# RemotingMetricsManager's rpc latency buckets (milliseconds), then overflow.
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
# The protocol_type label of each door (RocketMQ's own TCP protocol is "remoting").
PROTOCOL_OF_DOOR = {DOOR_REMOTING: "remoting"}
PROTOCOL_NATIVE = "zeromq"


class InTraffic:
    """(topic, message type) -> [messages, bytes, size sum, bucket counts (one per bound, then overflow)]."""

    def __init__(self):
        self.rows: dict[tuple[str, str], list[int]] = {}

    def add(self, topic: str, message_type: str, count: int, stored_bytes: int) -> None:
        row = self.rows.get((topic, message_type))
        if row is None:
            row = self.rows[(topic, message_type)] = [0] * (4 + len(MESSAGE_SIZE_BUCKETS_BYTES))
        mean_size = stored_bytes // count if count else 0
        row[0] += count
        row[1] += stored_bytes
        row[2] += mean_size
        row[3 + bisect_left(MESSAGE_SIZE_BUCKETS_BYTES, mean_size)] += 1

    def snapshot(self) -> list[dict]:
        return [{"topic": topic, "messageType": kind, "messages": row[0], "bytes": row[1], "sizeSum": row[2],
                 "sizeBuckets": row[3:]} for (topic, kind), row in self.rows.items()]


def code_name(code: int, names) -> str:
    """RocketMQ's label text for a request or response code: its name in lower case, else the number."""
    try:
        return names(code).name.lower()
    except ValueError:
        return str(code)


class RpcLatency:
    """(protocol, request code, response code, long polling) -> [count, sum ms, bucket counts...]."""

    def __init__(self):
        self.rows: dict[tuple[str, int, int, bool], list] = {}

    def record(self, door: str, request_code: int, response_code: int, long_polling: bool, elapsed_s: float,
               count: int = 1) -> None:
        """``count`` requests answered after ``elapsed_s`` each (the sends of one read: ``broker/send_lane.py``)."""
        key = (door, request_code, response_code, long_polling)
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = [0, 0.0] + [0] * (len(RPC_LATENCY_BUCKETS_MS) + 1)
        elapsed_ms = elapsed_s * 1000
        row[0] += count
        row[1] += elapsed_ms * count
        row[2 + bisect_left(RPC_LATENCY_BUCKETS_MS, elapsed_ms)] += count

    def snapshot(self) -> list[dict]:
        return [{"protocol": PROTOCOL_OF_DOOR.get(door, PROTOCOL_NATIVE),
                 "requestCode": code_name(request_code, RequestCode),
                 "responseCode": code_name(response_code, ResponseCode),
                 "longPolling": long_polling, "count": row[0], "sumMs": row[1], "buckets": row[2:]}
                for (door, request_code, response_code, long_polling), row in self.rows.items()]

    def timed(self, handlers: dict) -> dict:
        """The same handler table, each handler timed until its answer (now or later)."""
        return {code: self._timed(code, handler) for code, handler in handlers.items()}

    def _timed(self, code: int, handler):
        record = self.record

        def timed_handler(request: Command, reply):
            timed_reply = _TimedReply(reply, record, request.door, code, time.perf_counter())
            try:
                response = handler(request, timed_reply)
            except Exception:
                record(request.door, code, ResponseCode.SYSTEM_ERROR, False, time.perf_counter() - timed_reply.start)
                raise   # request_dispatch answers it
            timed_reply.returned = True
            if response is not None:
                record(request.door, code, response.code, False, time.perf_counter() - timed_reply.start)
            return response
        return timed_handler


class _TimedReply:
    """Stands in for a request's reply: records the latency when the answer goes. Handlers read
    ``reply.peer`` (the connection a heartbeat came by), so that is passed through."""

    __slots__ = ("reply", "record", "door", "code", "start", "returned", "answered")

    def __init__(self, reply, record, door: str, code: int, start: float):
        self.reply = reply
        self.record = record
        self.door = door
        self.code = code
        self.start = start
        self.returned = False
        self.answered = False

    @property
    def peer(self):
        return getattr(self.reply, "peer", None)

    def __call__(self, response: Command) -> None:
        if self.answered:   # a request is answered once (the reply under this one ignores the rest too)
            return
        self.answered = True
        # Answered after the handler returned: a parked pull (long polling) or a send waiting for the disk.
        parked = self.returned and self.code == RequestCode.PULL_MESSAGE
        self.record(self.door, self.code, response.code, parked, time.perf_counter() - self.start)
        self.reply(response)
