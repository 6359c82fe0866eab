"""mqadmin's ACL verbs: edits of the cluster's plain_acl.yml through a broker (RocketMQ 4's ACL 1.0).

- UPDATE_AND_CREATE_ACL_CONFIG (50, updateAclConfig): the account of ``accessKey`` created, or its
  given fields replaced (secretKey, whiteRemoteAddress, admin, defaultTopicPerm, defaultGroupPerm,
  topicPerms, groupPerms: RocketMQ's PlainPermissionManager rules, ``admin`` always, as its tool
  always sends it);
- DELETE_ACL_CONFIG (51, deleteAclConfig): the account removed;
- UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53, updateGlobalWhiteAddr): globalWhiteRemoteAddresses replaced;
- GET_BROKER_CLUSTER_ACL_INFO (52, clusterAclConfigVersion): the file's DataVersion.

An edit is checked as the whole file the guard would read (``acl.model.parse_acl``): one that would
not parse is refused with the reason and nothing is written. The file is rewritten atomically with
its ``dataVersion`` counted up, as RocketMQ writes it; every process of the cluster (NameServers,
brokers, proxy, console, exporter) reads the one file and rereads it within a second
(``acl/acl_file.py``). Under access control the three edits are admin requests
(``acl/resources.py``). Without access control (aclEnable=false) there is no file to edit: the
codes are refused saying so (RocketMQ's broker fails them on a null validator).
"""

from __future__ import annotations

import logging
import os
import time

from rocketbox.cluster.acl.acl_file import read_yaml
from rocketbox.cluster.acl.addresses import AclFormatError
from rocketbox.cluster.acl.auth_store import is_auth_file
from rocketbox.cluster.acl.model import KEY_LENGTH_MIN, parse_acl
from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals, field_bool, field_str, to_json_bytes
from rocketbox.cluster.shm.durable import atomic_write
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)

# RocketMQ's ResponseCode for each failed edit.
UPDATE_AND_CREATE_ACL_CONFIG_FAILED = 209
DELETE_ACL_CONFIG_FAILED = 210
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED = 211
ACL_OFF = ("access control is off on this broker (aclEnable=false): there is no ACL file to edit "
           "(cluster up --acl-file FILE turns it on)")


def _split(text: str | None) -> list[str] | None:
    """RocketMQ's UtilAll.split on ','; None stays None (the field is left as it is)."""
    if text is None:
        return None
    return [part for part in text.split(",") if part]


def _data_version(data: dict, path: str) -> dict:
    versions = data.get("dataVersion") if isinstance(data, dict) else None
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        return {"counter": int(versions[0].get("counter", 0)), "timestamp": int(versions[0].get("timestamp", 0))}
    try:
        stamp = int(os.stat(path).st_mtime * 1000)
    except OSError:
        stamp = 0
    return {"counter": 0, "timestamp": stamp}


class AclAdmin:
    def __init__(self, cfg):
        self.cfg = cfg
        path = os.path.abspath(cfg.acl_file) if cfg.acl_enable and cfg.acl_file else ""
        self.path = "" if is_auth_file(path) else path   # an ACL 2.0 cluster has no plain_acl.yml to edit

    def _load(self) -> dict:
        data = read_yaml(self.path) or {}   # AclFormatError for what is not YAML, or unreadable
        if not isinstance(data, dict):
            raise AclFormatError("the file is not a mapping of globalWhiteRemoteAddresses and accounts")
        return data

    def _edit(self, change, failed_code: int, what: str) -> None:
        """Apply ``change(data)`` to the file (it may raise AclFormatError or return False: refused)."""
        if not self.path:
            raise ProtocolError(ACL_OFF, failed_code)
        try:
            data = self._load()
            if change(data) is False:
                raise AclFormatError(f"{what} failed")
            version = _data_version(data, self.path)
            data["dataVersion"] = [{"counter": version["counter"] + 1, "timestamp": int(time.time() * 1000)}]
            parse_acl(data)   # the whole file as every process will read it
        except (AclFormatError, OSError) as exc:
            raise ProtocolError(f"{what} refused: {exc}", failed_code) from None
        import yaml   # here, not at the top: a broker without a plain_acl.yml never loads it
        atomic_write(self.path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode())
        log.info("ACL file %s: %s", self.path, what)

    @answers_refusals
    def on_update_account(self, request: Command, reply=None) -> Command:
        access_key = field_str(request, "accessKey")
        fields = request.fields

        def change(data: dict) -> None:
            if len(access_key) < KEY_LENGTH_MIN:
                raise AclFormatError(f"The accessKey={access_key} cannot be null and length should longer than 6")
            accounts = data["accounts"] = data.get("accounts") or []
            account = next((a for a in accounts if isinstance(a, dict) and str(a.get("accessKey")) == access_key), None)
            if account is None:
                account = {"accessKey": access_key}
                accounts.append(account)
            secret = fields.get("secretKey")
            if secret:
                if len(secret) < KEY_LENGTH_MIN:
                    raise AclFormatError(f"The secretKey={secret} value length should longer than 6")
                account["secretKey"] = secret
            if fields.get("whiteRemoteAddress") is not None:
                account["whiteRemoteAddress"] = fields["whiteRemoteAddress"]
            account["admin"] = field_bool(request, "admin")
            for key in ("defaultTopicPerm", "defaultGroupPerm"):
                if fields.get(key):
                    account[key] = fields[key]
            for key in ("topicPerms", "groupPerms"):
                perms = _split(fields.get(key))
                if perms is not None:
                    account[key] = perms
            if "secretKey" not in account:
                raise AclFormatError(f"a new account {access_key} needs a secretKey")

        self._edit(change, UPDATE_AND_CREATE_ACL_CONFIG_FAILED, f"account {access_key} set")
        return request.response(ResponseCode.SUCCESS)

    @answers_refusals
    def on_delete_account(self, request: Command, reply=None) -> Command:
        access_key = field_str(request, "accessKey")

        def change(data: dict) -> bool:
            accounts = data.get("accounts") or []
            kept = [a for a in accounts if not (isinstance(a, dict) and str(a.get("accessKey")) == access_key)]
            data["accounts"] = kept
            return len(kept) < len(accounts)   # RocketMQ: deleting an account that is not there fails

        self._edit(change, DELETE_ACL_CONFIG_FAILED, f"account {access_key} deleted")
        return request.response(ResponseCode.SUCCESS)

    @answers_refusals
    def on_update_global_white_addrs(self, request: Command, reply=None) -> Command:
        addresses = _split(request.fields.get("globalWhiteAddrs")) or []
        other = request.fields.get("aclFileFullPath")
        if other and os.path.abspath(other) != self.path and self.path:
            raise ProtocolError(f"RocketBox keeps one ACL file, {self.path}: {other} is not it",
                                UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED)

        def change(data: dict) -> None:
            data["globalWhiteRemoteAddresses"] = addresses

        self._edit(change, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED, f"globalWhiteRemoteAddresses set to {addresses}")
        return request.response(ResponseCode.SUCCESS)

    @answers_refusals
    def on_acl_version(self, request: Command, reply=None) -> Command:
        """GetBrokerAclConfigResponseHeader: the file's DataVersion, and the same per file (one here)."""
        if not self.path:
            raise ProtocolError(ACL_OFF)
        try:
            version = _data_version(self._load(), self.path)
        except (AclFormatError, OSError) as exc:
            raise ProtocolError(f"the ACL file {self.path} cannot be read: {exc}") from None
        cfg = self.cfg
        return request.response(ResponseCode.SUCCESS, {
            "version": to_json_bytes(version).decode(), "allAclFileVersion": to_json_bytes({self.path: version}).decode(),
            "brokerName": cfg.broker_name, "brokerAddr": cfg.remoting_address or cfg.address,
            "clusterName": cfg.cluster_name})
