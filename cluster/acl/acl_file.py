"""The ACL file of a process and its CURVE keys, read at start and again whenever they change.

At start a missing or unreadable file is an error (the process does not boot with access control
it cannot read). Afterwards ``reload_if_changed`` (on a timer, ``watch``) compares the file's
stat and the client key directory's listing with what was read last, and rereads both when they
differ: a file that no longer parses leaves the previous accounts in force and is logged (once
per change), as RocketMQ's watcher keeps its last table.
"""

from __future__ import annotations

import glob
import logging
import os

from rocketbox.cluster.acl.addresses import AclFormatError
from rocketbox.cluster.acl.curve import CLIENTS_DIR, SECRET_SUFFIX, CurveKeyError, account_keys, curve_dir, \
    keys_fingerprint
from rocketbox.cluster.acl.auth_model import AuthStore
from rocketbox.cluster.acl.auth_store import is_auth_file, read_auth_file
from rocketbox.cluster.acl.model import AclConfig, parse_acl
from rocketbox.cluster.file_modes import exposure

log = logging.getLogger(__name__)

RELOAD_INTERVAL_S = 1.0


def read_yaml(path: str):
    """A plain_acl.yml's YAML document; AclFormatError with the reason (and the path)."""
    import yaml   # here: every process imports this module, only one with a plain_acl.yml parses YAML
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError as exc:
        raise AclFormatError(f"cannot read the ACL file {path}: {exc.strerror or exc}") from None
    try:
        return yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError, OverflowError) as exc:
        # RecursionError: nested too deep; ValueError, OverflowError: a \U escape past Unicode
        # (PyYAML's chr() of it).
        raise AclFormatError(f"{path} is not YAML: {exc}") from None


def read_acl_file(path: str) -> AclConfig | AuthStore:
    """The accounts of one plain_acl.yml (ACL 1.0), or the users and ACLs of an ``auth.json`` (ACL
    2.0, acl/auth_store.py); AclFormatError with the reason (and the path)."""
    if is_auth_file(path):
        return read_auth_file(path)
    data = read_yaml(path)
    try:
        return parse_acl(data)
    except AclFormatError as exc:
        raise AclFormatError(f"{path}: {exc}") from None


def secret_exposures(acl_file: str) -> list[str]:
    """A warning for each secret of access control other local users may read or change: the ACL
    file (every account's secretKey) and the CURVE secret keys beside it (the cluster's, accounts')."""
    keys = curve_dir(acl_file)
    key_files = glob.glob(os.path.join(keys, "*" + SECRET_SUFFIX)) + \
        glob.glob(os.path.join(keys, CLIENTS_DIR, "*" + SECRET_SUFFIX))
    secrets = [(acl_file, "the ACL file")] + [(path, "the CURVE secret key") for path in sorted(key_files)]
    return [warning for path, what in secrets if (warning := exposure(path, what))]


class AclFile:
    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self._seen = self._fingerprint()
        self.config = read_acl_file(self.path)
        self.curve_accounts: dict[bytes, str] = {}
        self._read_keys()
        self.loads = 1
        for note in self.config.warnings:
            log.warning("%s: %s", self.path, note)
        for warning in secret_exposures(self.path):
            log.warning("%s", warning)

    def _fingerprint(self) -> tuple:
        try:
            st = os.stat(self.path)
            file_state = (st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            file_state = None
        return file_state, keys_fingerprint(self.path)

    def _read_keys(self) -> None:
        keys, problems = account_keys(self.path)
        for problem in problems:
            log.error("%s", problem)
        self.curve_accounts = keys

    def reload_if_changed(self) -> bool:
        """Reread the file and keys if either changed; True when new accounts are in force."""
        seen = self._fingerprint()
        if seen == self._seen:
            return False
        self._seen = seen
        try:
            config = read_acl_file(self.path)
            self._read_keys()
        except (AclFormatError, CurveKeyError) as exc:
            log.error("kept the previous access control: %s", exc)
            return False
        self.config = config
        self.loads += 1
        for note in config.warnings:
            log.warning("%s: %s", self.path, note)
        log.info("access control reloaded from %s: %d %s, %d CURVE keys", self.path,
                 len(config.users if isinstance(config, AuthStore) else config.accounts),
                 "users" if isinstance(config, AuthStore) else "accounts", len(self.curve_accounts))
        return True

    def watch(self, loop, interval_s: float = RELOAD_INTERVAL_S) -> None:
        loop.call_every(interval_s, self.reload_if_changed)
