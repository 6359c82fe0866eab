"""Who is calling: what every RPC handler learns from the gRPC call itself (RocketMQ's ProxyContext).

The 5.x clients send ``x-mq-client-id`` (``host@pid@index@time``) on every call, and the proxy
knows a client only by it: a call without one is refused CLIENT_ID_REQUIRED, as Apache's proxy
refuses it (GrpcMessagingApplication.validateContext).
"""

from __future__ import annotations

from typing import NamedTuple

from rocketbox.cluster.proxy.protos import Code
from rocketbox.cluster.proxy.status import ProxyError

CLIENT_ID_KEY = "x-mq-client-id"
CLIENT_ID_MAX = 256


class Call(NamedTuple):   # made for every call: a tuple builds in a fraction of a frozen dataclass's time
    client_id: str
    peer_host: str          # the client's address as the connection shows it ("127.0.0.1:54321")
    time_remaining_s: float | None   # until the call's deadline (None: the client set none)


def peer_host(peer: str) -> str:
    """gRPC's ``ipv4:127.0.0.1:54321`` / ``ipv6:[::1]:5`` as ``127.0.0.1:54321``."""
    for prefix in ("ipv4:", "ipv6:"):
        if peer.startswith(prefix):
            return peer[len(prefix):]
    return peer


def call_of(context) -> Call:
    metadata_value = getattr(context, "metadata_value", None)
    if metadata_value is not None:   # the native door's context finds one key without the whole metadata
        client_id = metadata_value(CLIENT_ID_KEY) or ""
    else:
        client_id = ""
        for key, value in context.invocation_metadata() or ():
            if key == CLIENT_ID_KEY:
                client_id = value if isinstance(value, str) else ""
                break
    if not client_id.strip():
        raise ProxyError(Code.CLIENT_ID_REQUIRED, "client id cannot be empty (metadata x-mq-client-id)")
    if len(client_id) > CLIENT_ID_MAX:
        raise ProxyError(Code.CLIENT_ID_REQUIRED, f"client id is longer than {CLIENT_ID_MAX} characters")
    return Call(client_id, peer_host(context.peer() or ""), context.time_remaining())
