"""Fast failure under overload (RocketMQ's BrokerFastFailure): a request that waited in front of
the event loop longer than its kind's bound is answered SYSTEM_BUSY at once instead of served.

RocketMQ's broker queues each request kind in a thread pool's queue and, every 10 ms, answers the
requests that waited too long there ``[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a
while, period in queue: Xms, size of queue: N`` (sends after ``waitTimeMillsInSendQueue``, 200 ms;
pulls and pops ``waitTimeMillsInPullQueue``, 5 s; acks ``waitTimeMillsInAckQueue``, 3 s;
heartbeats ``waitTimeMillsInHeartbeatQueue``, 31 s; END_TRANSACTION
``waitTimeMillsInTransactionQueue``, 3 s; the rest ``waitTimeMillsInAdminBrokerQueue``, 5 s). Its
client was going to give up on them, and serving them late only delays the requests behind.

Here the queue is the door's unread input (a ROUTER socket's pipes, a remoting connection's
kernel buffer). The remoting door reads the kernel's receive stamp with each read
(``SO_TIMESTAMPNS``): every request the read completes had arrived by its newest segment's
stamp, so ``now - stamp`` is a request's own wait (for the read's older requests, a lower bound).
ZeroMQ stamps nothing, so the native door estimates: it keeps ``drained_at``, the last moment it
had nothing unread (it read until empty, or the loop saw it idle: see ``event_loop.py``), taken
before the check that found it so. A request read now arrived after it, so ``now - drained_at``
bounds its wait from above, to within one loop turn, for one clock read a request. A check that
was itself stalled looks again (``loop_stalls.empty_as_of``), so a stall that ended before a request arrived
is not its wait; a stall elsewhere in a turn (a long timer) still counts for requests arriving
during it. ``size of queue`` is what the door has read since it was last empty.
"""

from __future__ import annotations

import logging
import time

from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.loop_stalls import RunQueueDelay
from rocketbox.cluster.protocol import RequestCode, ResponseCode
from rocketbox.cluster.wire_format import FLAG_ONEWAY, FLAG_RESPONSE, NATIVE_FIXED, Command, encode_header

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

SEND, PULL, ACK, HEARTBEAT, TRANSACTION, ADMIN = "send", "pull", "ack", "heartbeat", "transaction", "admin"
KIND_OF_CODE = {
    RequestCode.SEND_MESSAGE: SEND, RequestCode.SEND_MESSAGE_V2: SEND, RequestCode.SEND_BATCH_MESSAGE: SEND,
    RequestCode.CONSUMER_SEND_MSG_BACK: SEND,
    RequestCode.PULL_MESSAGE: PULL, RequestCode.POP_MESSAGE: PULL,
    RequestCode.ACK_MESSAGE: ACK, RequestCode.ACK_MESSAGES: ACK, RequestCode.CHANGE_MESSAGE_INVISIBLETIME: ACK,
    RequestCode.HEART_BEAT: HEARTBEAT, RequestCode.UNREGISTER_CLIENT: HEARTBEAT,
    RequestCode.END_TRANSACTION: TRANSACTION,
}


def busy_remark(waited_ms: int, queued: int) -> str:
    return (f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: "
            f"{waited_ms}ms, size of queue: {queued}")


class WaitBounds:
    """How long each kind of request may wait before the loop serves it, in seconds."""

    def __init__(self, **bounds_ms: int):
        missing = {SEND, PULL, ACK, HEARTBEAT, TRANSACTION, ADMIN} - set(bounds_ms)
        if missing:
            raise ValueError(f"no wait bound for {sorted(missing)}")
        self.by_kind_s = {kind: ms / 1000 for kind, ms in bounds_ms.items()}
        self.shortest_s = min(self.by_kind_s.values())

    @classmethod
    def of_broker(cls, cfg) -> "WaitBounds":
        return cls(send=cfg.wait_time_ms_in_send_queue, pull=cfg.wait_time_ms_in_pull_queue,
                   ack=cfg.wait_time_ms_in_ack_queue, heartbeat=cfg.wait_time_ms_in_heartbeat_queue,
                   transaction=cfg.wait_time_ms_in_transaction_queue, admin=cfg.wait_time_ms_in_admin_queue)

    def kind_and_bound_s(self, code: int) -> tuple[str, float]:
        kind = KIND_OF_CODE.get(code, ADMIN)
        return kind, self.by_kind_s[kind]


class DoorBacklog:
    """One door's unread input: since when it has been piling up, and the requests it refused."""

    __slots__ = ("source", "drained_at", "read", "_bounds", "_shortest_s", "shed", "name", "_answer_since",
                 "_answer", "run_queue_delay", "forgiven")

    def __init__(self, source, bounds: WaitBounds, name: str):
        self.source = source          # what the event loop polls for this door
        self.drained_at = time.monotonic()
        self.read = 0                 # requests read since the last time the door was empty
        self._bounds = bounds
        self._shortest_s = bounds.shortest_s
        self.shed: dict[str, int] = {}
        self.name = name
        # The answer header of the requests read after one ``since`` (they share the remark), to patch.
        self._answer_since = -1.0
        self._answer = bytearray()
        # The loop thread's RunQueueDelay (set by the event loop that watches this door), and how many
        # requests past their bound it served because the wait was the machine's, not the broker's.
        self.run_queue_delay: RunQueueDelay | None = None
        self.forgiven = 0

    def drained(self, checked_at: float) -> None:
        """The door read until nothing was left, as seen by a check that began at ``checked_at``
        (a time taken before the check, so a pause during it cannot hide a wait)."""
        self.drained_at = checked_at
        self.read = 0

    def unhurried(self, since: float, count: int) -> bool:
        """Whether ``count`` requests that arrived after ``since`` waited less than the shortest bound (none
        may be refused), counted as read (``refusal``) when so."""
        if time.monotonic() - since >= self._shortest_s:
            return False
        self.read += count
        return True

    def late(self, since: float, now: float) -> bool:
        """Whether a request that arrived after ``since`` may have waited longer than the shortest bound."""
        return now - since >= self._shortest_s

    def refuse_native(self, header, since: float, now: float, queued: int) -> tuple[bool, bytes | None]:
        """A native request's refusal from its header frame alone (no decoding, no body copy, the
        answer a copy of one header with the opaque patched in: under overload a refusal must cost
        far less than serving). (refused, answer header frame; None for a one-way request); (False,
        None) when it is not late for its kind or not a request at all. ``queued``: requests read
        and not served yet."""
        if len(header) < NATIVE_FIXED.size:
            return False, None
        code, _language, _version, opaque, flag = NATIVE_FIXED.unpack_from(header, 0)
        if flag & FLAG_RESPONSE:
            return False, None
        kind, bound_s, charged_s = self._shed(code, now - since, queued)
        if kind is None:
            return False, None
        if flag & FLAG_ONEWAY:
            return True, None
        if since != self._answer_since:
            remark = self._remark(kind, charged_s, bound_s, queued)
            self._answer = bytearray(encode_header(Command(ResponseCode.SYSTEM_BUSY, {}, b"", 0, FLAG_RESPONSE,
                                                           remark)))
            self._answer_since = since
        NATIVE_FIXED.pack_into(self._answer, 0, ResponseCode.SYSTEM_BUSY, *_LANGUAGE_VERSION, opaque, FLAG_RESPONSE)
        return True, bytes(self._answer)

    def _shed(self, code: int, waited_s: float, queued: int) -> tuple[str | None, float, float]:
        """(kind, bound, the wait charged) of a request that waited past its kind's bound, counted as
        shed; (None, bound, wait) when it may be served. Past the bound, with at most QUEUED_MAX read and
        unserved, the loop thread's own wait for a CPU over the request's wait is not charged
        (RunQueueDelay)."""
        kind, bound_s = self._bounds.kind_and_bound_s(code)
        if waited_s < bound_s:
            return None, bound_s, waited_s
        if self.run_queue_delay is not None and queued <= RunQueueDelay.QUEUED_MAX:
            charged_s = waited_s - self.run_queue_delay.since(time.monotonic() - waited_s)
            if charged_s < bound_s:
                self.forgiven += 1
                return None, bound_s, charged_s
            waited_s = charged_s
        self.shed[kind] = self.shed.get(kind, 0) + 1
        return kind, bound_s, waited_s

    def _remark(self, kind: str, waited_s: float, bound_s: float, queued: int) -> str:
        waited_ms = int(waited_s * 1000)
        _limited.warning(f"busy:{self.name}", "%s: broker busy: %s requests waited up to %d ms (bound %d ms); "
                         "answering SYSTEM_BUSY", self.name, kind, waited_ms, int(bound_s * 1000))
        return busy_remark(waited_ms, queued)

    def refusal(self, request: Command, since: float) -> Command | None:
        """SYSTEM_BUSY for ``request``, which arrived after ``since``, if it may have waited longer than
        its kind's bound, else None (the remoting door's check: its requests come decoded)."""
        self.read += 1
        waited_s = time.monotonic() - since
        if waited_s < self._shortest_s or request.is_response:
            return None
        kind, bound_s, charged_s = self._shed(request.code, waited_s, self.read)
        if kind is None:
            return None
        return request.response(ResponseCode.SYSTEM_BUSY, remark=self._remark(kind, charged_s, bound_s, self.read))


_LANGUAGE_VERSION = (Command(0, {}, b"").language, Command(0, {}, b"").version)
