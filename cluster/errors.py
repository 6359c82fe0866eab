"""The client's exception vocabulary, and the one place a status becomes an exception.

- ``ClientClosed``: used after ``shutdown()`` (closed by you).
- ``BrokerUnreachable`` / ``RequestTimeout``: no answer in time (broken by the world).
- ``BrokerError``: the server answered with an error code and a reason.
- ``NoRouteError``: no NameServer knows the topic, or no writable queue.
- ``MessageInvalid``: refused before sending (too large, bad name).
- ``AccessDenied``: access control refused this client before any answer (no keys, another
  cluster's keys): the reason says which keys to give, and how.
"""

from __future__ import annotations

from rocketbox.cluster.protocol import ResponseCode
# Where they are defined (not zmq_transport, which re-exports them): naming an error loads no ZeroMQ.
from rocketbox.cluster.client_transport import AccessRefused, RequestTimeout, TransportError


class ClientError(Exception):
    pass


class ClientClosed(ClientError):
    pass


class BrokerUnreachable(ClientError):
    pass


class NoRouteError(ClientError):
    pass


class MessageInvalid(ClientError):
    pass


class AccessDenied(ClientError):
    pass


def unreachable_error(endpoints, failures: list[Exception], kind: str = "NameServer") -> ClientError:
    """What a client raises when no endpoint answered: AccessDenied with the door's reason when
    access control refused it (trying elsewhere would not help), else NoRouteError naming the last failure."""
    for failure in failures:
        if isinstance(failure, AccessRefused):
            return AccessDenied(str(failure))
    last = f": {failures[-1]}" if failures else ""
    return NoRouteError(f"no {kind} answered ({', '.join(endpoints)}){last}")


# What a NO_PERMISSION answer (access control) adds to its reason: what the caller can do about it.
NO_PERMISSION_HINT = ("access control refused it: act as an account the cluster's ACL file gives that right "
                      "(`cluster --account NAME`; ClientConfig.for_account(NAME, acl_file=...) on the native door, "
                      "ClientConfig(access_key=..., secret_key=...) on the remoting door, where RocketMQ's clients "
                      "sign with them too), or grant it in the ACL file")


class BrokerError(ClientError):
    def __init__(self, code: int, remark: str, endpoint: str = ""):
        try:
            name = ResponseCode(code).name
        except ValueError:
            name = str(code)
        hint = f" ({NO_PERMISSION_HINT})" if code == ResponseCode.NO_PERMISSION else ""
        super().__init__(f"{name} ({code}) from {endpoint or 'server'}: {remark}{hint}")
        self.code = code
        self.remark = remark
        self.endpoint = endpoint


def raise_for(response, endpoint: str = "", ok=(ResponseCode.SUCCESS,)):
    """Return ``response`` when its code is in ``ok``, else raise BrokerError."""
    if response.code in ok:
        return response
    raise BrokerError(response.code, response.remark, endpoint)


__all__ = ["ClientError", "ClientClosed", "BrokerUnreachable", "NoRouteError", "MessageInvalid",
           "AccessDenied", "AccessRefused", "BrokerError", "unreachable_error", "RequestTimeout", "TransportError", "raise_for"]
