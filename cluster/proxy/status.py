"""Statuses the proxy answers with (``apache.rocketmq.v2.Status``) and where each comes from.

RocketMQ 5 carries its result codes in every response's ``status``, never in the gRPC status.
A request the proxy refuses itself raises ``ProxyError(code, message)``; an answer from a broker
becomes a code by ``code_of_broker`` (RocketMQ's ResponseBuilder and GrpcProxyException mappings,
widened where Apache's proxy would say INTERNAL_SERVER_ERROR for something the client caused);
a failed request to a broker by ``code_of_transport``.
"""

from __future__ import annotations

from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.proxy.protos import Code, pb
from rocketbox.cluster.zmq_transport import RequestTimeout

# The broker's answer to an ACK / CHANGE_MESSAGE_INVISIBLETIME whose pop is gone (RocketMQ's NO_MESSAGE).
NO_MESSAGE = 208


class ProxyError(Exception):
    """A request refused with ``code`` (a ``Code`` value) and a reason the client sees."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# A code's plain status, made once: building a pb.Status was ~2% of a SendMessage's time in the
# proxy (perf/RESULTS.md, "The gRPC door: the floor of a C front end and the proxy's own cost").
# Shared, so never changed in place: every response takes a copy of what it is given.
_PLAIN: dict[int, pb.Status] = {}


def status(code: int, message: str | None = None) -> pb.Status:
    if message is None:
        plain = _PLAIN.get(code)
        if plain is None:
            plain = _PLAIN[code] = pb.Status(code=code, message=Code.Name(code))
        return plain
    return pb.Status(code=code, message=message)


OK = status(Code.OK)

_BROKER_CODES = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
    ResponseCode.NO_PERMISSION: Code.FORBIDDEN,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: Code.ILLEGAL_FILTER_EXPRESSION,
    ResponseCode.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    ResponseCode.PULL_NOT_FOUND: Code.MESSAGE_NOT_FOUND,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    # The handle's pop is over (acked, or revived after its invisible time): the handle is spent.
    NO_MESSAGE: Code.INVALID_RECEIPT_HANDLE,
}


def code_of_broker(response_code: int) -> int:
    return _BROKER_CODES.get(response_code, Code.INTERNAL_SERVER_ERROR)


def broker_refusal(response, broker: str) -> ProxyError:
    """The ProxyError for a broker's non-success answer, its remark kept for the client."""
    try:
        name = ResponseCode(response.code).name
    except ValueError:
        name = str(response.code)
    return ProxyError(code_of_broker(response.code), f"{broker} answered {name}: {response.remark or ''}".strip())


def code_of_transport(exc: Exception) -> int:
    """A broker that did not answer in time is PROXY_TIMEOUT (RocketMQ: RemotingTimeoutException);
    one that cannot be reached at all is an internal error of the cluster."""
    return Code.PROXY_TIMEOUT if isinstance(exc, RequestTimeout) else Code.INTERNAL_SERVER_ERROR
