"""One request to its handler, whichever door it came through (ZeroMQ or RocketMQ's remoting TCP).

The table of request codes is the process's (``handlers``); a code not in it is answered
REQUEST_CODE_NOT_SUPPORTED with a remark, never left unanswered, and a handler that raises is
answered SYSTEM_ERROR with the exception's text: the process keeps serving.
"""

from __future__ import annotations

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
        log.exception("%s: handler for code %d failed", server_name, request.code)
        response = request.response(ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}")
    if response is not None:
        reply(response)


class PeerCalls:
    """A server's requests to its clients that wait for an answer (GET_CONSUMER_RUNNING_INFO relayed
    to a consumer): by opaque, each with the connection it went to and a deadline. Every call ends
    exactly once: ``on_answer(response)``, or ``on_answer(None)`` when its time is up or its
    connection closed."""

    def __init__(self):
        self._pending: dict[int, tuple[bytes, Callable[[Command | None], None], float]] = {}

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, opaque: int, peer: bytes, on_answer: Callable[[Command | None], None], deadline: float) -> None:
        self._pending[opaque] = (peer, on_answer, deadline)

    def answer(self, response: Command) -> bool:
        """Hand a client's response to its waiting call; False if none waits (late or unknown)."""
        entry = self._pending.pop(response.opaque, None)
        if entry is None:
            return False
        _finish(entry[1], response)
        return True

    def expire(self, now: float) -> None:
        for opaque in [o for o, (_p, _cb, deadline) in self._pending.items() if deadline <= now]:
            _finish(self._pending.pop(opaque)[1], None)

    def peer_gone(self, peer: bytes) -> None:
        for opaque in [o for o, (p, _cb, _d) in self._pending.items() if p == peer]:
            _finish(self._pending.pop(opaque)[1], None)


def _finish(on_answer, response: Command | None) -> None:
    try:
        on_answer(response)
    except Exception:   # the waiting side's bug must not take the door down
        log.exception("a peer call's answer handler failed")
