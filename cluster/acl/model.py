"""plain_acl.yml's content as accounts (RocketMQ's PlainPermissionManager reading it). Pure.

```yaml
globalWhiteRemoteAddresses: ["10.10.103.*", "192.168.0.*"]
accounts:
  - accessKey: RocketMQ          # longer than 6 characters
    secretKey: 12345678          # longer than 6; a number is read as its text
    whiteRemoteAddress: "*"      # optional: a matching peer needs no signature nor permission
    admin: false                 # admin-only requests (topic create/delete, broker config, groups)
    defaultTopicPerm: DENY       # DENY, PUB, SUB, PUB|SUB; missing = DENY
    defaultGroupPerm: SUB
    topicPerms: ["topicA=DENY", "topicB=PUB|SUB"]
    groupPerms: ["groupA=DENY", "groupB=PUB|SUB"]
```

A group's permission is kept under its retry topic (``%RETRY%groupB``), as RocketMQ keeps it. An
accessKey listed twice keeps its first entry (RocketMQ's rule), noted in ``warnings``. Anything
that does not parse raises AclFormatError naming the account and field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketbox.cluster.acl.addresses import AclFormatError, Matcher, address_matcher
from rocketbox.cluster.acl.permissions import is_known_word, parse_permission
from rocketbox.cluster.protocol import RETRY_TOPIC_PREFIX

KEY_LENGTH_MIN = 7   # RocketMQ refuses keys of 6 characters or fewer


@dataclass(frozen=True)
class Account:
    access_key: str
    secret_key: str
    white_address: str = ""
    admin: bool = False
    default_topic_perm: int = parse_permission(None)
    default_group_perm: int = parse_permission(None)
    # topic or %RETRY%<group> -> permission bits
    resource_perms: dict[str, int] = field(default_factory=dict)
    white_match: Matcher = field(default=lambda address: False, compare=False, repr=False)

    def permission_of(self, resource: str) -> int:
        """The bits this account owns on a topic or a group's retry topic (its default when unlisted)."""
        owned = self.resource_perms.get(resource)
        if owned is not None:
            return owned
        return self.default_group_perm if resource.startswith(RETRY_TOPIC_PREFIX) else self.default_topic_perm


@dataclass(frozen=True)
class AclConfig:
    global_white: tuple[tuple[str, Matcher], ...] = ()
    accounts: dict[str, Account] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def globally_white(self, address: str) -> bool:
        return any(match(address) for _pattern, match in self.global_white)


def _text(value, where: str, required: bool = True) -> str:
    if value is None:
        if required:
            raise AclFormatError(f"{where} is missing")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise AclFormatError(f"{where} is a {type(value).__name__}, not text")
    text = str(value)
    try:   # a YAML escape can make a lone surrogate, which no signature can be computed over
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise AclFormatError(f"{where} is not valid Unicode text (a lone surrogate)") from None
    return text


def _flag(value, where: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise AclFormatError(f"{where} is {value!r}, not true or false")


def _perms(entries, where: str, is_group: bool, notes: list[str]) -> dict[str, int]:
    if entries is None:
        return {}
    if not isinstance(entries, list):
        raise AclFormatError(f"{where} is not a list of 'name=PERMISSION'")
    out = {}
    for entry in entries:
        items = str(entry).split("=")
        if len(items) != 2 or not items[0].strip():
            raise AclFormatError(f"{where}: {entry!r} is not 'name=PERMISSION'")
        name, word = items[0].strip(), items[1].strip()
        if not is_known_word(word):
            notes.append(f"{where}: {word!r} is not DENY, PUB, SUB or PUB|SUB: read as DENY")
        out[RETRY_TOPIC_PREFIX + name if is_group else name] = parse_permission(word)
    return out


def parse_account(raw, index: int, notes: list[str]) -> Account:
    where = f"accounts[{index}]"
    if not isinstance(raw, dict):
        raise AclFormatError(f"{where} is not a mapping")
    access_key = _text(raw.get("accessKey"), f"{where}.accessKey")
    secret_key = _text(raw.get("secretKey"), f"{where}.secretKey")
    where = f"account {access_key!r}"
    if len(access_key) < KEY_LENGTH_MIN or len(secret_key) < KEY_LENGTH_MIN:
        raise AclFormatError(f"{where}: accessKey and secretKey must be longer than {KEY_LENGTH_MIN - 1} characters")
    white = _text(raw.get("whiteRemoteAddress"), f"{where}.whiteRemoteAddress", required=False)
    for name in ("defaultTopicPerm", "defaultGroupPerm"):
        if raw.get(name) is not None and not is_known_word(raw.get(name)):
            notes.append(f"{where}.{name}: {raw.get(name)!r} is not DENY, PUB, SUB or PUB|SUB: read as DENY")
    perms = _perms(raw.get("topicPerms"), f"{where}.topicPerms", False, notes)
    perms.update(_perms(raw.get("groupPerms"), f"{where}.groupPerms", True, notes))
    return Account(access_key, secret_key, white, _flag(raw.get("admin"), f"{where}.admin"),
                   parse_permission(raw.get("defaultTopicPerm")), parse_permission(raw.get("defaultGroupPerm")),
                   perms, address_matcher(white))


def parse_acl(data) -> AclConfig:
    """The accounts and global white addresses of a parsed plain_acl.yml (None: an empty file)."""
    if data is None:
        return AclConfig()
    if not isinstance(data, dict):
        raise AclFormatError("the file is not a mapping of globalWhiteRemoteAddresses and accounts")
    notes: list[str] = []
    white = data.get("globalWhiteRemoteAddresses") or []
    if not isinstance(white, list):
        raise AclFormatError("globalWhiteRemoteAddresses is not a list")
    global_white = tuple((str(p), address_matcher(p)) for p in white if p is not None and str(p).strip())
    raw_accounts = data.get("accounts") or []
    if not isinstance(raw_accounts, list):
        raise AclFormatError("accounts is not a list")
    accounts: dict[str, Account] = {}
    for index, raw in enumerate(raw_accounts):
        account = parse_account(raw, index, notes)
        if account.access_key in accounts:
            notes.append(f"accessKey {account.access_key!r} is listed again at accounts[{index}]: "
                         f"the first entry holds")
            continue
        accounts[account.access_key] = account
    return AclConfig(global_white, accounts, tuple(notes))
