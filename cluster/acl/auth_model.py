"""ACL 2.0 (RocketMQ 5.3+): users and their ACLs, as Apache's auth module models them. Pure.

The store is one JSON document, the shapes of Apache's UserInfo and AclInfo bodies (what the
AUTH_* admin codes carry), so a body read from the wire and a stored record are the same thing:

```json
{"users": [{"username": "alice", "password": "alice-secret", "userType": "Normal", "userStatus": "enable"}],
 "acls": [{"subject": "User:alice",
           "policies": [{"policyType": "Custom",
                         "entries": [{"resource": "Topic:orders", "actions": ["Pub", "Sub"],
                                      "sourceIps": ["127.0.0.1", "192.168.1.0/24"], "decision": "Allow"}]}]}]}
```

A resource is ``*`` (any), ``Type:name`` (LITERAL), ``Type:prefix*`` (PREFIXED) or ``Type:*`` (ANY of
that type), Type one of Cluster, Namespace, Topic, Group (Apache's Resource.of). Actions: All, Pub,
Sub, Create, Update, Delete, Get, List (Any only in a request). An edit that Apache refuses raises
AuthError with Apache's text ("The user is existed", "The resource is null.", ...).
"""

from __future__ import annotations

import copy
import ipaddress
from dataclasses import dataclass

SUPER, NORMAL = "Super", "Normal"
ENABLE, DISABLE = "enable", "disable"
ALLOW, DENY = "Allow", "Deny"
CUSTOM, DEFAULT = "Custom", "Default"
USER_PREFIX = "User:"
ACTIONS = ("All", "Any", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List")
RESOURCE_TYPES = ("Cluster", "Namespace", "Topic", "Group")
LITERAL, PREFIXED, ANY = "LITERAL", "PREFIXED", "ANY"


class AuthError(ValueError):
    """An edit or a body Apache refuses; the text is Apache's."""


def _named(value, names: tuple[str, ...]) -> str | None:
    """Apache's getByName: case-insensitive; None when no name matches."""
    if not isinstance(value, str):
        return None
    return next((name for name in names if name.lower() == value.strip().lower()), None)


@dataclass(frozen=True)
class Resource:
    type: str            # "Any" for ``*``, else one of RESOURCE_TYPES
    name: str            # the literal name or the prefix; "" for ANY
    pattern: str         # LITERAL, PREFIXED, ANY

    @property
    def key(self) -> str:
        if self.type == "Any":
            return "*"
        return f"{self.type}:" + {ANY: "*", LITERAL: self.name, PREFIXED: self.name + "*"}[self.pattern]

    def matches(self, wanted: "Resource") -> bool:
        if self.type == "Any":
            return True
        if self.type != wanted.type:
            return False
        if self.pattern == ANY:
            return True
        if self.pattern == LITERAL:
            return wanted.name == self.name
        return wanted.name.startswith(self.name)


def parse_resource(key) -> Resource | None:
    """Apache's Resource.of: None for a blank key or an unknown type."""
    if not isinstance(key, str) or not key.strip():
        return None
    if key == "*":
        return Resource("Any", "", ANY)
    kind, _, name = key.partition(":")
    kind = _named(kind, RESOURCE_TYPES)
    if kind is None:
        return None
    if name == "*":
        return Resource(kind, "", ANY)
    if name.endswith("*"):
        return Resource(kind, name[:name.index("*")], PREFIXED)
    return Resource(kind, name, LITERAL)


def ip_in_range(ip: str, source: str) -> bool:
    """Apache's IPAddressUtils.isIPInRange: ``source`` an address or a CIDR block."""
    try:
        address = ipaddress.ip_address(ip)
        return address in ipaddress.ip_network(source.strip(), strict=False)
    except ValueError:
        return False


def valid_source_ip(source: str) -> bool:
    try:
        ipaddress.ip_network(source.strip(), strict=False)
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class Entry:
    resource: Resource
    actions: tuple[str, ...]
    source_ips: tuple[str, ...]
    decision: str

    def matches(self, wanted: Resource, actions: tuple[str, ...], source_ip: str) -> bool:
        """Apache's PolicyEntry.isMatchResource, isMatchAction, isMatchEnvironment."""
        if not self.resource.matches(wanted) or not self.actions:
            return False
        if "Any" not in actions and not any(a in self.actions or "All" in self.actions for a in actions):
            return False
        return not self.source_ips or any(ip_in_range(source_ip, s) for s in self.source_ips)

    def to_json(self) -> dict:
        out = {"resource": self.resource.key, "actions": list(self.actions), "decision": self.decision}
        if self.source_ips:
            out["sourceIps"] = list(self.source_ips)
        return out


def parse_entry(raw) -> Entry:
    """One PolicyEntryInfo, checked as Apache's AuthorizationMetadataManagerImpl.validate checks it."""
    if not isinstance(raw, dict):
        raise AuthError("The resource is null.")
    resource = parse_resource(raw.get("resource"))
    if resource is None:
        raise AuthError("The resource is null.")
    actions = raw.get("actions") if isinstance(raw.get("actions"), list) else []
    named = tuple(dict.fromkeys(a for a in (_named(x, ACTIONS) for x in actions) if a))
    if not named:
        raise AuthError("The actions is empty.")
    if "Any" in named:
        raise AuthError("The actions can not be Any.")
    ips = raw.get("sourceIps") or []
    if not isinstance(ips, list):
        raise AuthError("The source ip is invalid.")
    for ip in ips:
        if not isinstance(ip, str) or not ip.strip():
            raise AuthError("The source ip is empty.")
        if not valid_source_ip(ip):
            raise AuthError("The source ip is invalid.")
    decision = _named(raw.get("decision"), (ALLOW, DENY))
    if decision is None:
        raise AuthError("The decision is null or illegal.")
    return Entry(resource, named, tuple(ip.strip() for ip in ips), decision)


def parse_policies(raw) -> dict[str, list[Entry]]:
    """An AclInfo's policies: policy type -> entries (a missing type is Custom, Apache's default)."""
    if not isinstance(raw, list) or not raw:
        raise AuthError("The policies is empty.")
    out: dict[str, list[Entry]] = {}
    for policy in raw:
        if not isinstance(policy, dict):
            raise AuthError("The policy entries is empty.")
        kind = _named(policy.get("policyType"), (CUSTOM, DEFAULT)) if policy.get("policyType") else CUSTOM
        if kind is None:
            raise AuthError(f"The policy type {str(policy.get('policyType'))[:40]} is unknown.")
        entries = policy.get("entries")
        if not isinstance(entries, list) or not entries:
            raise AuthError("The policy entries is empty.")
        merge_entries(out.setdefault(kind, []), [parse_entry(e) for e in entries])
    return out


def merge_entries(old: list[Entry], new: list[Entry]) -> None:
    """Apache's Policy.updateEntry: an entry for the same resource is replaced, others added."""
    for entry in new:
        at = next((i for i, e in enumerate(old) if e.resource == entry.resource), None)
        if at is None:
            old.append(entry)
        else:
            old[at] = entry


def user_json(user: dict) -> dict:
    return {"username": user["username"], "password": user["password"], "userType": user["userType"],
            "userStatus": user["userStatus"]}


def parse_user_info(raw, username: str, fill_defaults: bool) -> dict:
    """A UserInfo body for ``username``; ``fill_defaults``: Normal and enable when not given (create)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise AuthError("user can not be null")
    user = {"username": username, "password": raw.get("password")}
    kind = raw.get("userType")
    status = raw.get("userStatus")
    user["userType"] = _named(kind, (SUPER, NORMAL)) if kind else (NORMAL if fill_defaults else None)
    user["userStatus"] = _named(status, (ENABLE, DISABLE)) if status else (ENABLE if fill_defaults else None)
    if kind and user["userType"] is None:
        raise AuthError(f"The userType {str(kind)[:20]} is neither Super nor Normal")
    if status and user["userStatus"] is None:
        raise AuthError(f"The userStatus {str(status)[:20]} is neither enable nor disable")
    if user["password"] is not None and not isinstance(user["password"], str):
        raise AuthError("password can not be blank")
    return user


class AuthStore:
    """Users and ACLs in memory; every edit works on a copy (``edited``) the caller then writes."""

    version = 2   # the access control it serves: decision.decide asks

    def __init__(self, data: dict | None = None):
        data = data if isinstance(data, dict) else {}
        self.users: dict[str, dict] = {}
        for raw in data.get("users") or []:
            if isinstance(raw, dict) and isinstance(raw.get("username"), str) and raw["username"]:
                user = parse_user_info(raw, raw["username"], fill_defaults=True)
                if not user["password"]:
                    raise AuthError(f"user {raw['username']}: password can not be blank")
                self.users[user["username"]] = user
        self.acls: dict[str, dict[str, list[Entry]]] = {}
        for raw in data.get("acls") or []:
            if isinstance(raw, dict) and isinstance(raw.get("subject"), str):
                self.acls[raw["subject"]] = parse_policies(raw.get("policies"))
        self.cluster_name = str(data.get("clusterName") or "")   # the resource Cluster:<name> admin requests touch
        self.warnings: tuple[str, ...] = ()

    def globally_white(self, address: str) -> bool:
        return False   # ACL 2.0 has no global white list

    def to_json(self) -> dict:
        return {"clusterName": self.cluster_name, "users": [user_json(u) for u in self.users.values()],
                "acls": [acl_json(s, p) for s, p in self.acls.items()]}

    def edited(self) -> "AuthStore":
        return copy.deepcopy(self)

    # users (AuthenticationMetadataManagerImpl)
    def create_user(self, user: dict) -> None:
        if not user.get("username"):
            raise AuthError("username can not be blank")
        if not user.get("password"):
            raise AuthError("password can not be blank")
        if user["username"] in self.users:
            raise AuthError("The user is existed")
        self.users[user["username"]] = user

    def update_user(self, user: dict) -> None:
        old = self.users.get(user["username"])
        if old is None:
            raise AuthError("The user is not exist")
        for key in ("password", "userType", "userStatus"):
            if user.get(key):
                old[key] = user[key]

    def delete_user(self, username: str) -> None:
        if not username:
            raise AuthError("username can not be blank")
        self.users.pop(username, None)
        self.acls.pop(USER_PREFIX + username, None)

    def list_users(self, filter_text: str | None) -> list[dict]:
        return [user_json(u) for name, u in self.users.items() if not filter_text or filter_text in name]

    # ACLs (AuthorizationMetadataManagerImpl)
    def _subject(self, subject: str) -> str:
        kind, sep, name = (subject or "").partition(":")
        if not sep or kind.lower() != "user" or not name:
            raise AuthError("The subject type is null.")
        if name not in self.users:
            raise AuthError(f"The subject of {USER_PREFIX}{name} is not exist.")
        return USER_PREFIX + name

    def put_acl(self, subject: str, policies: dict[str, list[Entry]]) -> None:
        """createAcl and updateAcl alike: the entries merged into the subject's policies."""
        subject = self._subject(subject)
        held = self.acls.setdefault(subject, {})
        for kind, entries in policies.items():
            merge_entries(held.setdefault(kind, []), entries)

    def delete_acl(self, subject: str, policy_type: str | None, resource_key: str | None) -> None:
        subject_key = self._subject(subject) if subject else None
        if subject_key is None:
            raise AuthError("The subject is null.")
        held = self.acls.get(subject_key)
        if held is None:
            raise AuthError("The acl is not exist.")
        resource = parse_resource(resource_key)
        if resource is None:
            del self.acls[subject_key]
            return
        kind = _named(policy_type, (CUSTOM, DEFAULT)) or CUSTOM
        entries = [e for e in held.get(kind, []) if e.resource != resource]
        if entries:
            held[kind] = entries
        else:
            held.pop(kind, None)
        if not held:
            del self.acls[subject_key]

    def acl_of(self, subject: str) -> dict | None:
        policies = self.acls.get(subject)
        return acl_json(subject, policies) if policies is not None else None

    def list_acls(self, subject_filter: str | None, resource_filter: str | None) -> list[dict]:
        out = []
        for subject, policies in self.acls.items():
            if subject_filter and subject_filter not in subject:
                continue
            if resource_filter:
                policies = {k: [e for e in v if resource_filter in e.resource.key] for k, v in policies.items()}
                policies = {k: v for k, v in policies.items() if v}
                if not policies:
                    continue
            out.append(acl_json(subject, policies))
        return out


def acl_json(subject: str, policies: dict[str, list[Entry]]) -> dict:
    return {"subject": subject, "policies": [{"policyType": kind, "entries": [e.to_json() for e in entries]}
                                              for kind, entries in policies.items()]}
