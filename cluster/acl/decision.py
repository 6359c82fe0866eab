"""Whether a caller may make a request: RocketMQ's PlainPermissionManager.validate, in its order. Pure.

1. a peer address in ``globalWhiteRemoteAddresses``: allowed, nothing else asked;
2. no access key: refused (authentication);
3. an access key no account has: refused (authentication);
4. a peer address matching the account's ``whiteRemoteAddress``: allowed without signature or
   permission check;
5. the proof (a signature, recomputed with the account's secret key) fails: refused (authentication);
   a caller the transport authenticated (CURVE) has no proof to check;
6. an admin-only request from an account that is not admin: refused (authorization);
7. each resource the request touches: the account's permission there (its default when the
   resource is not listed) must grant what the request needs; an admin account with no listed
   resource has every permission (RocketMQ's rule). PUB on the trace topic RMQ_SYS_TRACE_TOPIC is
   always allowed.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Callable

from rocketbox.cluster.acl import auth_decision
from rocketbox.cluster.acl.auth_model import AuthStore
from rocketbox.cluster.acl.model import AclConfig
from rocketbox.cluster.acl.permissions import PUB, describe, permits
from rocketbox.cluster.acl.signature import parse_basic
from rocketbox.cluster.protocol import RETRY_TOPIC_PREFIX
from rocketbox.cluster.message.system_topics import TRACE_TOPIC

AUTHENTICATION = "authentication"
AUTHORIZATION = "authorization"


@dataclass(frozen=True)
class Caller:
    address: str                                    # the peer's IP, without port
    access_key: str | None                          # None: the request names no account
    proof: Callable[[str], bool] | None = None      # secret key -> whether the request was signed with it
    missing_reason: str = ""                        # why there is no access key, when the door knows
    stale_reason: str = ""                          # why a signed request is too old (or too new) to take


@dataclass(frozen=True)
class Refusal:
    kind: str      # AUTHENTICATION or AUTHORIZATION
    reason: str    # readable, never holding a secret


def resource_name(resource: str) -> str:
    """``group:G`` for a group's retry topic, ``topic:T`` for a topic (RocketMQ's printStr)."""
    if resource.startswith(RETRY_TOPIC_PREFIX):
        return f"group:{resource[len(RETRY_TOPIC_PREFIX):]}"
    return f"topic:{resource}"


def decide(config: AclConfig | AuthStore, caller: Caller, code: int, needed: dict[str, int],
           admin_only: bool) -> Refusal | None:
    """None when ``caller`` may make request ``code`` touching ``needed``; else why not. A cluster
    under ACL 2.0 (an AuthStore) is judged by acl/auth_decision.py instead."""
    if isinstance(config, AuthStore):
        return _decide_v2(config, caller, code, needed, admin_only)
    if config.globally_white(caller.address):
        return None
    if not caller.access_key:
        return Refusal(AUTHENTICATION, caller.missing_reason or "No accessKey is configured")
    account = config.accounts.get(caller.access_key)
    if account is None:
        return Refusal(AUTHENTICATION, f"No acl config for {caller.access_key}")
    if account.white_match(caller.address):
        return None
    if caller.proof is not None and not caller.proof(account.secret_key):
        return Refusal(AUTHENTICATION, f"Check signature failed for accessKey={account.access_key}")
    if caller.proof is not None and caller.stale_reason:
        return Refusal(AUTHENTICATION, caller.stale_reason)
    if admin_only and not account.admin:
        what = f"request code={code}" if code else "this"
        return Refusal(AUTHORIZATION, f"Need admin permission for {what}, but accessKey={account.access_key} is not")
    if not needed or needed.get(TRACE_TOPIC) == PUB:
        return None
    if account.admin and not account.resource_perms:
        return None
    for resource, bits in needed.items():
        if not permits(bits, account.permission_of(resource)):
            listed = "" if resource in account.resource_perms else " (its default)"
            return Refusal(AUTHORIZATION, f"No permission for {resource_name(resource)}: accessKey="
                                          f"{account.access_key} needs {describe(bits)}, has "
                                          f"{describe(account.permission_of(resource))}{listed}")
    return None


def _decide_v2(store: AuthStore, caller: Caller, code: int, needed: dict[str, int], admin_only: bool) -> Refusal | None:
    unknown = auth_decision.authenticate(store, caller)
    if unknown is not None:
        return Refusal(*unknown)
    reason = auth_decision.authorize(store, caller, code, needed, admin_only)
    return Refusal(AUTHORIZATION, reason) if reason else None


def http_refusal(config: AclConfig | AuthStore, authorization: str | None, address: str, admin_only: bool) -> Refusal | None:
    """The console's and the metrics endpoint's check: HTTP Basic with an account's accessKey and
    secretKey (white addresses pass as on the other doors); ``admin_only``: the account must be admin."""
    credentials = parse_basic(authorization)
    if credentials is None:
        return decide(config, Caller(address, None, None, "credentials required: HTTP Basic with an account's "
                                                          "accessKey and secretKey"), 0, {}, admin_only)
    user, password = credentials
    return decide(config, Caller(address, user, lambda secret: hmac.compare_digest(secret.encode(), password.encode())),
                  0, {}, admin_only)
