"""``migrateAuthFromV1Enabled``: a plain_acl.yml's accounts as ACL 2.0 users and ACLs, as Apache's
AuthMigrator makes them.

Each account becomes a user (admin: Super, else Normal) with its secretKey as password; its
topicPerms and groupPerms a Custom policy (``Topic:T`` / ``Group:G``, literal), its defaultTopicPerm
and defaultGroupPerm a Default policy (``Topic:*`` / ``Group:*``). A permission word becomes actions
and a decision: PUB -> Pub, SUB -> Sub, PUB|SUB -> Pub and Sub, all Allow; DENY (or any other word)
-> All, Deny. Entries that are not ``name=PERM`` are skipped, as Apache skips them. White addresses
have no ACL 2.0 counterpart and are not carried over (Apache drops them too).
"""

from __future__ import annotations

from rocketbox.cluster.acl.acl_file import read_acl_file, read_yaml
from rocketbox.cluster.acl.auth_model import ALLOW, CUSTOM, DEFAULT, DENY, ENABLE, NORMAL, SUPER, Entry, \
    parse_resource

_ACTIONS = {"PUB": ("Pub",), "SUB": ("Sub",), "PUB|SUB": ("Pub", "Sub"), "SUB|PUB": ("Pub", "Sub")}


def _entry(resource_key: str, word) -> Entry:
    word = str(word).strip() if word is not None else ""
    actions = _ACTIONS.get(word)
    return Entry(parse_resource(resource_key), actions or ("All",), (), ALLOW if actions else DENY)


def _named_perms(entries, kind: str) -> list[Entry]:
    out = []
    for text in entries if isinstance(entries, list) else ():
        parts = [p for p in str(text).split("=") if p]
        if len(parts) == 2 and parts[0].strip():
            out.append(_entry(f"{kind}:{parts[0].strip()}", parts[1]))
    return out


def account_as_user(raw: dict) -> tuple[dict, dict[str, list[Entry]]]:
    """One plain_acl.yml account (already checked by acl.model) as (UserInfo, policies)."""
    admin = str(raw.get("admin")).strip().lower() == "true"
    user = {"username": str(raw["accessKey"]), "password": str(raw["secretKey"]),
            "userType": SUPER if admin else NORMAL, "userStatus": ENABLE}
    policies: dict[str, list[Entry]] = {}
    custom = _named_perms(raw.get("topicPerms"), "Topic") + _named_perms(raw.get("groupPerms"), "Group")
    if custom:
        policies[CUSTOM] = custom
    defaults = [_entry(f"{kind}:*", raw[key]) for kind, key in (("Topic", "defaultTopicPerm"),
                                                                 ("Group", "defaultGroupPerm"))
                if raw.get(key) is not None and str(raw[key]).strip()]
    if defaults:
        policies[DEFAULT] = defaults
    return user, policies


def migrate_plain_acl(path: str) -> list[tuple[dict, dict[str, list[Entry]]]]:
    """Every account of the plain_acl.yml at ``path`` (AclFormatError when it does not read)."""
    config = read_acl_file(path)
    raw_accounts = (read_yaml(path) or {}).get("accounts") or []
    return [account_as_user(raw) for raw in raw_accounts
            if isinstance(raw, dict) and str(raw.get("accessKey")) in config.accounts]
