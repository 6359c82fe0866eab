"""Access control of the gRPC door: the ``authorization`` header RocketMQ 5's clients send, checked
against the cluster's ACL file (``cluster/acl/``) before an RPC reaches its service.

A client signs the value of ``x-mq-date-time`` with its secret key (HMAC-SHA1, hex) and names its
accessKey as ``Credential``; the proxy recomputes the signature with the account's key. What each
RPC touches is RocketMQ's list for its proxy (PlainAccessResource.parse of a gRPC request):

| RPC | needs |
| --- | --- |
| SendMessage | each message's topic PUB |
| RecallMessage | the topic PUB (RocketMQ's RecallMessageRequestHeader: Action.PUB) |
| EndTransaction | the topic PUB (the broker ends only a half of that topic: proxy/transactions.py) |
| ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue | the group SUB and the topic SUB |
| Heartbeat | its group SUB (when it names one) |
| Telemetry settings | each published topic PUB; the subscription's group SUB and each of its topics SUB |
| QueryRoute, QueryAssignment, NotifyClientTermination | an account |

A signature proves who signed, not when: a signed ``x-mq-date-time`` more than
``signed_time_skew_s`` (15 minutes) away from the proxy's clock, read in any time zone (the Java and
Python clients send local time labelled Z: ``signature.grpc_date_time_problem``), is refused, so a
captured request cannot be replayed days later (RocketMQ's proxy takes any date).

Refusals: UNAUTHORIZED (40100) when the caller is not proven (no or unknown accessKey, a bad
signature, a stale date-time), FORBIDDEN (40300) when the account lacks a permission (RocketMQ 5.3's proxy answers
the same two); each counted by kind and logged rate-limited, never with a secret.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time

from rocketbox.cluster.acl.acl_file import RELOAD_INTERVAL_S, AclFile
from rocketbox.cluster.acl.addresses import host_of
from rocketbox.cluster.acl.decision import AUTHENTICATION, Caller, Refusal, decide
from rocketbox.cluster.acl.permissions import PUB, SUB
from rocketbox.cluster.acl.resources import group_resource
from rocketbox.cluster.acl.signature import (GRPC_DATE_TIME, grpc_date_time_problem, grpc_signature_ok,
                                             parse_grpc_authorization)
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.proxy.calls import peer_host
from rocketbox.cluster.proxy.protos import Code
from rocketbox.cluster.proxy.status import ProxyError

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

AUTHORIZATION_KEY = "authorization"


def _group_and_topic(request) -> dict[str, int]:
    return {group_resource(request.group.name): SUB, request.topic.name: SUB}


_RESOURCES = {
    "SendMessage": lambda r: {m.topic.name: PUB for m in r.messages},
    "EndTransaction": lambda r: {r.topic.name: PUB},
    "RecallMessage": lambda r: {r.topic.name: PUB},
    "ReceiveMessage": lambda r: {group_resource(r.group.name): SUB, r.message_queue.topic.name: SUB},
    "AckMessage": _group_and_topic,
    "ChangeInvisibleDuration": _group_and_topic,
    "ForwardMessageToDeadLetterQueue": _group_and_topic,
    # A Lite subscription is a subscription: the group and the parent topic SUB (Apache 5.5's
    # SyncLiteSubscriptionRequest resources).
    "SyncLiteSubscription": lambda r: {group_resource(r.group.name): SUB, r.topic.name: SUB},
    "Heartbeat": lambda r: {group_resource(r.group.name): SUB} if r.HasField("group") and r.group.name else {},
}


def settings_resources(settings) -> dict[str, int]:
    """What a Telemetry Settings command declares it will touch."""
    needed = {}
    if settings.HasField("publishing"):
        needed.update({topic.name: PUB for topic in settings.publishing.topics})
    if settings.HasField("subscription"):
        needed[group_resource(settings.subscription.group.name)] = SUB
        needed.update({entry.topic.name: SUB for entry in settings.subscription.subscriptions})
    return needed


class ProxyAccess:
    def __init__(self, acl_file: str, signed_time_skew_s: float = 900.0):
        self.acl = AclFile(acl_file)
        self.signed_time_skew_s = signed_time_skew_s
        self.refusals: collections.Counter = collections.Counter()   # kind -> count

    async def watch_forever(self) -> None:
        while True:
            await asyncio.sleep(RELOAD_INTERVAL_S)
            try:
                self.acl.reload_if_changed()
            except Exception:   # an unreadable key directory must not end the watching
                log.exception("rereading the ACL file failed")

    def _caller(self, context) -> Caller:
        metadata = {key: value for key, value in context.invocation_metadata() or () if isinstance(value, str)}
        address = host_of(peer_host(context.peer() or ""))
        header = metadata.get(AUTHORIZATION_KEY)
        if not header:
            return Caller(address, None, None, "No accessKey is configured (no authorization header)")
        try:
            auth = parse_grpc_authorization(header)
        except ValueError as exc:
            return Caller(address, None, None, str(exc))
        date_time = metadata.get(GRPC_DATE_TIME, "")
        return Caller(address, auth.access_key or None,
                      lambda secret: bool(date_time) and grpc_signature_ok(secret, date_time, auth.signature),
                      stale_reason=grpc_date_time_problem(date_time, time.time(), self.signed_time_skew_s) or "")

    def check(self, context, rpc: str, needed: dict[str, int] | None = None, request=None) -> None:
        """ProxyError(UNAUTHORIZED or FORBIDDEN) when the caller may not make ``rpc``."""
        if needed is None:
            reader = _RESOURCES.get(rpc)
            needed = reader(request) if reader is not None and request is not None else {}
        refusal = decide(self.acl.config, self._caller(context), 0, needed, False)
        if refusal is not None:
            self._refuse(rpc, context, refusal)

    def _refuse(self, rpc: str, context, refusal: Refusal) -> None:
        self.refusals[refusal.kind] += 1
        code = Code.UNAUTHORIZED if refusal.kind == AUTHENTICATION else Code.FORBIDDEN
        _limited.warning(f"acl:grpc:{refusal.kind}", "refused %s from %s: %s", rpc, context.peer(), refusal.reason)
        raise ProxyError(code, refusal.reason)

    async def checked_commands(self, context, commands):
        """A Telemetry stream's commands, each Settings checked first (ProxyError ends the stream)."""
        async for command in commands:
            if command.HasField("settings"):
                self.check(context, "Telemetry", settings_resources(command.settings))
            yield command
