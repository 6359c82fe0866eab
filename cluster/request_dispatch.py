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
