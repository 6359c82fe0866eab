"""ACL 2.0's users and ACLs on disk: one atomic JSON file per cluster (``auth.json``; the shape is
acl/auth_model.py's), read by every process as plain_acl.yml is (acl/acl_file.py rereads it within
a second of a change), edited by any broker through the AUTH_* codes under a lock, so masters and
slaves serve the same users at once.

At ``cluster up`` (``ensure``) the file is made if missing, and holds Apache's boot-time users:
``initAuthenticationUser`` ({"username", "password"}) and ``innerClientAuthenticationCredentials``
({"accessKey", "secretKey"}) as Super users when no user of that name exists, and with
``migrateAuthFromV1Enabled`` every plain_acl.yml account that is no user yet (``migrated``, from
acl/auth_migration.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os

from rocketbox.cluster.acl.addresses import AclFormatError
from rocketbox.cluster.acl.auth_model import ENABLE, SUPER, AuthError, AuthStore
from rocketbox.cluster.shm.durable import atomic_write


def is_auth_file(path: str) -> bool:
    """Whether an access file is ACL 2.0's store (JSON) rather than a plain_acl.yml."""
    return path.endswith(".json")


def parse_auth_text(text: bytes, path: str) -> AuthStore:
    try:
        data = json.loads(text or b"{}")
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise AclFormatError(f"{path} is not JSON: {exc}") from None
    try:
        return AuthStore(data)
    except AuthError as exc:
        raise AclFormatError(f"{path}: {exc}") from None


def read_auth_file(path: str) -> AuthStore:
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise AclFormatError(f"cannot read the ACL 2.0 file {path}: {exc.strerror or exc}") from None
    return parse_auth_text(text, path)


def write_auth_file(path: str, store: AuthStore) -> None:
    atomic_write(path, json.dumps(store.to_json(), indent=1).encode())


@contextlib.contextmanager
def editing(path: str):
    """The store as on disk, for one edit; written back when the block ends without an exception.
    A lock beside the file keeps two brokers' edits from losing one."""
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            store = read_auth_file(path) if os.path.exists(path) else AuthStore()
            yield store
            write_auth_file(path, store)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _credentials(text: str, user_key: str, secret_key: str, setting: str) -> tuple[str, str] | None:
    if not text:
        return None
    try:
        data = json.loads(text)
        name, secret = data[user_key], data[secret_key]
    except (ValueError, TypeError, KeyError):
        raise AclFormatError(f"{setting} is not JSON with {user_key} and {secret_key}: {text[:60]!r}") from None
    if not isinstance(name, str) or not isinstance(secret, str) or not name or not secret:
        raise AclFormatError(f"{setting}: {user_key} and {secret_key} must be non-empty text")
    return name, secret


def ensure(path: str, cluster_name: str = "", init_user: str = "", inner_credentials: str = "",
           migrated: list = ()) -> AuthStore:
    """The cluster's store made or completed before its processes start (see the module's text);
    AclFormatError (a ValueError) with the reason when a setting or a file does not read."""
    boot_users = [c for c in (_credentials(init_user, "username", "password", "initAuthenticationUser"),
                              _credentials(inner_credentials, "accessKey", "secretKey",
                                           "innerClientAuthenticationCredentials")) if c]
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with editing(path) as store:
        if cluster_name and not store.cluster_name:
            store.cluster_name = cluster_name
        for name, secret in boot_users:
            if name not in store.users:
                store.create_user({"username": name, "password": secret, "userType": SUPER, "userStatus": ENABLE})
        for user, policies in migrated:
            if user["username"] not in store.users:
                store.create_user(user)
                if policies:
                    store.put_acl("User:" + user["username"], policies)
    return store
