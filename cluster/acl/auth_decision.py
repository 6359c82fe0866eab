"""Whether a caller may make a request under ACL 2.0: Apache's DefaultAuthenticationHandler, then
UserAuthorizationHandler and AclAuthorizationHandler, with their refusal texts. Pure.

Authentication: a username (the AccessKey), a user of that name, enabled, whose password signs the
request. Authorization: a Super user may do anything; a Normal user needs, for each resource the
request touches (a topic Pub or Sub, a group Sub as ``Group:G``; an admin request: Update, or Get
for the reading AUTH_* codes, on ``Cluster:<name>``), a matching entry of its Custom policy (or,
when none matches, of its Default policy) whose decision is Allow. Among matching entries the most
specific decides: a named type before ``*``, LITERAL before PREFIXED (the longer prefix first)
before ANY; at equal rank a Deny wins (Apache's comment says so; its comparator puts Allow first,
which only differs for two entries of one resource, which one policy cannot hold).
"""

from __future__ import annotations

from rocketbox.cluster.acl.auth_model import ANY, DENY, LITERAL, PREFIXED, SUPER, DISABLE, USER_PREFIX, \
    AuthStore, Entry, Resource
from rocketbox.cluster.acl.permissions import ANY as ANY_BITS, PUB, SUB
from rocketbox.cluster.protocol import RETRY_TOPIC_PREFIX, RequestCode

AUTHENTICATION = "authentication"
AUTHORIZATION = "authorization"
_READING_ADMIN_CODES = frozenset({RequestCode.AUTH_GET_USER, RequestCode.AUTH_LIST_USER,
                                  RequestCode.AUTH_GET_ACL, RequestCode.AUTH_LIST_ACL})
_PATTERN_RANK = {LITERAL: 0, PREFIXED: 1, ANY: 2}


def wanted_resource(resource: str) -> Resource:
    """ACL 1.0's resource string (a topic, or a group kept as ``%RETRY%G``) as Apache's Resource."""
    if resource.startswith(RETRY_TOPIC_PREFIX):
        return Resource("Group", resource[len(RETRY_TOPIC_PREFIX):], LITERAL)
    return Resource("Topic", resource, LITERAL)


def wanted_actions(bits: int) -> tuple[str, ...]:
    if bits & ANY_BITS:
        return ("Pub", "Sub")
    return tuple(name for name, bit in (("Pub", PUB), ("Sub", SUB)) if bits & bit) or ("Any",)


def _rank(entry: Entry) -> tuple:
    resource = entry.resource
    return (resource.type == "Any", _PATTERN_RANK[resource.pattern],
            -len(resource.name) if resource.pattern == PREFIXED else 0, entry.decision != DENY)


def deciding_entry(policies: dict[str, list[Entry]], wanted: Resource, actions: tuple[str, ...],
                   source_ip: str) -> Entry | None:
    for kind in ("Custom", "Default"):
        matching = [e for e in policies.get(kind, ()) if e.matches(wanted, actions, source_ip)]
        if matching:
            return min(matching, key=_rank)
    return None


def authenticate(store: AuthStore, caller) -> tuple[str, str] | None:
    """(kind, reason) when ``caller`` is not a user it claims to be; None when it is."""
    if not caller.access_key:
        # Apache's text, then what the door knows (no authorization header, a CURVE key of no user).
        return AUTHENTICATION, " ".join(filter(None, ("username cannot be null.", caller.missing_reason)))
    user = store.users.get(caller.access_key)
    if user is None:
        return AUTHENTICATION, f"User:{caller.access_key} is not found."
    if user["userStatus"] == DISABLE:
        return AUTHENTICATION, f"User:{caller.access_key} is disabled."
    if caller.proof is not None and not caller.proof(user["password"]):
        return AUTHENTICATION, "check signature failed."
    if caller.proof is not None and caller.stale_reason:
        return AUTHENTICATION, caller.stale_reason
    return None


def authorize(store: AuthStore, caller, code: int, needed: dict[str, int], admin_only: bool) -> str | None:
    """Apache's reason when the authenticated ``caller`` may not make request ``code``; None when it may."""
    if store.users[caller.access_key]["userType"] == SUPER:
        return None
    wants = [(wanted_resource(r), wanted_actions(bits)) for r, bits in needed.items()]
    if admin_only:
        action = "Get" if code in _READING_ADMIN_CODES else "Update"
        wants.append((Resource("Cluster", store.cluster_name, LITERAL), (action,)))
    policies = store.acls.get(USER_PREFIX + caller.access_key, {})
    for wanted, actions in wants:
        entry = deciding_entry(policies, wanted, actions, caller.address)
        if entry is None or entry.decision == DENY:
            detail = "no matched policies." if entry is None else "the decision is deny."
            return (f"{USER_PREFIX}{caller.access_key} has no permission to access {wanted.key} from "
                    f"{caller.address}, {detail}")
    return None
