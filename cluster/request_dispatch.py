"""One request to its handler, whichever door it came through (ZeroMQ or RocketMQ's remoting TCP).

The table of request codes is the process's (``handlers``); a code not in it is answered
REQUEST_CODE_NOT_SUPPORTED with a remark, never left unanswered, and a handler that raises is
answered SYSTEM_ERROR with the exception's text: the process keeps serving.
"""

from __future__ import annotations

import heapq
import logging
from typing import Callable

from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

Handler = Callable[[Command, Callable[[Command], None]], "Command | None"]


def dispatch(handlers: dict[int, Handler], request: Command, reply, server_name: str) -> None:
    """Run ``request``'s handler; ``reply(response)`` answers it now, or later if the handler
    kept ``reply`` and returned None (long polling, group commit)."""
    handler = handlers.get(request.code)
    if handler is None:
        _limited.warning(f"unsupported:{server_name}", "%s: request code %d is not supported", server_name,
                         request.code)
        reply(request.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                               remark=f"request code {request.code} is not supported by {server_name}"))
        return
    try:
        response = handler(request, reply)
    except Exception as exc:  # a handler bug must not take the process down
        _limited.error(f"failed:{server_name}:{request.code}", "%s: handler for code %d failed", server_name,
                       request.code, exc_info=True)
        response = request.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")
    if response is not None:
        reply(response)


class ReadPass:
    """The requests of one read of one connection, served one after another: a handler may defer
    work to the end of the pass (one append for all its sends), which runs before their answers
    are written together. Each deferred piece runs once however many requests asked for it, and
    answers its own requests."""

    __slots__ = ("_deferred",)

    def __init__(self):
        self._deferred: dict[object, Callable[[], None]] = {}

    def defer(self, key, run: Callable[[], None]) -> None:
        """``run()`` once at the pass's end (``key``: who asked; a second ask adds nothing)."""
        self._deferred.setdefault(key, run)

    def finish(self) -> None:
        deferred, self._deferred = self._deferred, {}
        for run in deferred.values():
            try:
                run()
            except Exception:   # the piece answers its requests even so; the next still runs
                _limited.error("read-pass", "work deferred to the end of a read failed", exc_info=True)


class PendingCalls:
    """Requests sent on connections and waiting for their answers, by opaque: a client's calls to its
    servers, and a server's calls to its clients (GET_CONSUMER_RUNNING_INFO relayed to a consumer).
    Each ends exactly once: ``on_done(response)``, or ``on_done(exception)`` when its deadline
    passes, its connection closes, or the side that sent it stops. The nearest deadline is found
    in O(log n) (entries answered early leave the heap lazily)."""

    def __init__(self):
        self._entries: dict[int, tuple[object, Callable, float]] = {}   # opaque -> (connection key, on_done, deadline)
        self._deadlines: list[tuple[float, int]] = []

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, opaque: int, key, deadline: float, on_done: Callable[[object], None]) -> None:
        self._entries[opaque] = (key, on_done, deadline)
        heapq.heappush(self._deadlines, (deadline, opaque))

    def answer(self, response: Command) -> bool:
        """Hand a response to its waiting call; False if none waits (late, unknown, or one-way)."""
        entry = self._entries.pop(response.opaque, None)
        if entry is None:
            return False
        _finish(entry[1], response)
        return True

    def seconds_to_next(self, now: float, cap: float) -> float:
        """How long until the nearest deadline, at most ``cap``."""
        deadlines = self._deadlines
        while deadlines and deadlines[0][1] not in self._entries:
            heapq.heappop(deadlines)
        return max(0.0, min(cap, deadlines[0][0] - now)) if deadlines else cap

    def expire(self, now: float, error: Callable[[object], BaseException]) -> None:
        """End the calls whose deadline passed with ``error(key)``."""
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now:
            _, opaque = heapq.heappop(deadlines)
            entry = self._entries.pop(opaque, None)
            if entry is not None:
                _finish(entry[1], error(entry[0]))

    def fail_key(self, key, exc: BaseException) -> None:
        """End every call sent on connection ``key`` (it closed) with ``exc``."""
        for opaque in [o for o, entry in self._entries.items() if entry[0] == key]:
            _finish(self._entries.pop(opaque)[1], exc)

    def fail_all(self, exc: BaseException) -> None:
        entries, self._entries = self._entries, {}
        self._deadlines.clear()
        for _key, on_done, _deadline in entries.values():
            _finish(on_done, exc)


def settle(future) -> Callable[[object], None]:
    """An ``on_done`` that resolves ``future`` with a response or fails it with an exception."""
    def on_done(outcome) -> None:
        if future.done():
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
    return on_done


def _finish(on_done, outcome) -> None:
    try:
        on_done(outcome)
    except Exception:   # the waiting side's bug must not take the connection's owner down
        log.exception("a pending call's completion failed")
