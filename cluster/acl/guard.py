"""Access control in front of a process's handler table (brokers and NameServers, both doors).

``wrap`` returns the table with every handler behind one check, so with access control off
nothing is wrapped and requests pay nothing. Who asks: on the remoting door the AccessKey and
Signature extFields (checked against the account's secret key); on the native door the client's
CURVE key (acl/zap.py), mapped to an account by ``curve/clients/<accessKey>.key``; the cluster's
own key (its processes) passes every check. A refusal is answered NO_PERMISSION with the reason
as remark, counted per door and kind, and logged without any secret (a burst per door and kind
per window, ``log_limit``).

A request that passed gets its caller's ``CallerAccess`` as ``Command.access``, for what the
handler finds only in the store (a record's real topic, acl/records.py): the same decision, the
same refusal, counted and logged the same way.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time

from rocketbox.cluster.acl import zap
from rocketbox.cluster.acl.acl_file import AclFile
from rocketbox.cluster.acl.addresses import host_of
from rocketbox.cluster.acl.curve import KeyPair, server_key_pair
from rocketbox.cluster.acl.decision import AUTHENTICATION, Caller, Refusal, decide
from rocketbox.cluster.acl.resources import UnreadableRequest, needed_resources, needs_admin
from rocketbox.cluster.acl.signature import ACCESS_KEY, remoting_signature_ok
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import AccessDenied, ResponseCode
from rocketbox.cluster.wire_format import DOOR_REMOTING, Command

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)


UNKNOWN_KEY_REREAD_S = 0.2


class AclGuard:
    def __init__(self, acl: AclFile, server_name: str, server_pair: KeyPair | None):
        self.acl = acl
        self.server_name = server_name
        self.server_pair = server_pair   # the cluster's CURVE pair: the native door serves with it
        self.cluster_public = server_pair.public.decode() if server_pair else None
        # (door, kind) -> refusals since start (GET_BROKER_METRICS and GET_NAMESRV_METRICS report them)
        self.refusals: collections.Counter = collections.Counter()
        self._unknown_key_reread_s = 0.0   # when an unknown key last made us look at the files

    @classmethod
    def from_file(cls, acl_file: str, server_name: str) -> "AclGuard":
        """The guard of a server whose config names ``acl_file``; AclFormatError or CurveKeyError
        (the boot fails with the reason) when the file or the cluster's key pair cannot be read."""
        return cls(AclFile(acl_file), server_name, server_key_pair(acl_file))

    def start(self, loop) -> None:
        """Before the doors open: the ZAP handler bound, the file watched."""
        zap.start(self.server_pair.public, loop)
        self.acl.watch(loop)

    def caller_of(self, request: Command) -> Caller | None:
        """Who made ``request``; None for the cluster's own processes."""
        address = host_of(request.peer_address)
        if request.door == DOOR_REMOTING:
            fields, body = request.fields, request.body
            return Caller(address, fields.get(ACCESS_KEY),
                          lambda secret: remoting_signature_ok(secret, fields, body))
        key = request.curve_key
        if key and key == self.cluster_public:
            return None
        account = self.acl.curve_accounts.get(key.encode()) if key else None
        if key and account is None and self._may_reread_for_unknown_key() and self.acl.reload_if_changed():
            # A key made a moment ago (`cluster acl keygen` then a send): the watch may not have run yet.
            account = self.acl.curve_accounts.get(key.encode())
        missing = (f"the CURVE key {key} is no account's (curve/clients/<accessKey>.key)" if key
                   else "the connection has no CURVE key")
        return Caller(address, account, None, missing)

    def _may_reread_for_unknown_key(self) -> bool:
        # At most every UNKNOWN_KEY_REREAD_S: a client repeating an unknown key must not make every
        # request stat the ACL file and the key directory.
        now = time.monotonic()
        if now - self._unknown_key_reread_s < UNKNOWN_KEY_REREAD_S:
            return False
        self._unknown_key_reread_s = now
        return True

    def check(self, request: Command) -> Refusal | None:
        caller = self.caller_of(request)
        return None if caller is None else self._check(request, caller)

    def _check(self, request: Command, caller: Caller) -> Refusal | None:
        try:
            needed = needed_resources(request)
        except UnreadableRequest as exc:
            needed, unreadable = {}, str(exc)
        else:
            unreadable = ""
        refusal = decide(self.acl.config, caller, request.code, needed, needs_admin(request))
        if refusal is None and unreadable and not self.acl.config.globally_white(caller.address):
            refusal = Refusal(AUTHENTICATION, unreadable)
        return refusal

    def note_refusal(self, request: Command, refusal: Refusal) -> None:
        door = "remoting" if request.door == DOOR_REMOTING else "native"
        self.refusals[(door, refusal.kind)] += 1
        _limited.warning(f"acl:{door}:{refusal.kind}", "%s: refused request code %d from %s on the %s door: %s",
                         self.server_name, request.code, request.peer_address or "?", door, refusal.reason)

    def refuse(self, request: Command, refusal: Refusal) -> Command:
        self.note_refusal(request, refusal)
        return request.response(ResponseCode.NO_PERMISSION, remark=refusal.reason)

    def wrap(self, handlers: dict) -> dict:
        def guarded(handler):
            def run(request: Command, reply):
                caller = self.caller_of(request)
                if caller is not None:
                    refusal = self._check(request, caller)
                    if refusal is not None:
                        return self.refuse(request, refusal)
                    request.access = CallerAccess(self, request, caller)
                request.access_granted = True
                return handler(request, reply)
            return run
        return {code: guarded(handler) for code, handler in handlers.items()}

    def refusal_counts(self) -> list[dict]:
        return [{"door": door, "kind": kind, "count": count} for (door, kind), count in sorted(self.refusals.items())]


class CallerAccess:
    """One request's caller, for the checks its handler makes once it found what the request
    touches (``Command.access``; acl/records.py)."""

    __slots__ = ("guard", "request", "caller")

    def __init__(self, guard: AclGuard, request: Command, caller: Caller):
        self.guard, self.request, self.caller = guard, request, caller

    def refusal(self, needed: dict[str, int]) -> Refusal | None:
        # The request's proof (its signature) was checked before the handler ran: not again.
        proven = dataclasses.replace(self.caller, proof=None)
        return decide(self.guard.acl.config, proven, self.request.code, needed, False)

    def allows(self, needed: dict[str, int]) -> bool:
        return self.refusal(needed) is None

    def require(self, needed: dict[str, int]) -> None:
        """AccessDenied (NO_PERMISSION with the reason) when the caller lacks ``needed``."""
        refusal = self.refusal(needed)
        if refusal is not None:
            self.guard.note_refusal(self.request, refusal)
            raise AccessDenied(refusal.reason)
