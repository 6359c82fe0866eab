"""ACL 2.0's admin requests (AUTH_CREATE_USER 3001 .. AUTH_LIST_ACL 3010) for RocketBox's Admin, as
mqadmin makes them: a UserInfo or AclInfo JSON body, the answer's body JSON (empty: nothing found).
The cluster keeps one store (docs/ARCHITECTURE.md "Access control"), so one broker is asked: the
given endpoint, else the first master. Used by the ``cluster`` verbs and the console's Access page."""

from __future__ import annotations

import json

from rocketbox.cluster.errors import raise_for
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.wire_format import Command


def first_master(admin, cluster_name: str | None = None) -> tuple[str, str]:
    """(broker name, endpoint) of the broker an edit goes to."""
    return sorted(admin.master_endpoints(cluster_name).items())[0]


def auth_call(admin, endpoint: str, code: int, fields: dict, body=None):
    """The answer's body read as JSON (None when empty); BrokerError with the broker's reason."""
    payload = json.dumps(body).encode() if body is not None else b""
    request = Command(code, {k: v for k, v in fields.items() if v is not None}, payload)
    response = raise_for(admin.rpc.call(endpoint, request, admin.cfg.request_timeout_ms), endpoint)
    return json.loads(response.body) if response.body else None


def user_info(username: str, password: str | None = None, user_type: str | None = None,
              user_status: str | None = None) -> dict:
    info = {"username": username}
    for key, value in (("password", password), ("userType", user_type), ("userStatus", user_status)):
        if value:
            info[key] = value
    return info


def acl_info(subject: str, resources: list[str], actions: list[str], decision: str,
             source_ips: list[str] | None = None) -> dict:
    """Apache's AclInfo.of: one Custom policy, an entry per resource with the same actions."""
    entry = {"actions": actions, "decision": decision, **({"sourceIps": source_ips} if source_ips else {})}
    return {"subject": subject, "policies": [{"entries": [{"resource": r, **entry} for r in resources]}]}


def list_users(admin, endpoint: str, name_filter: str | None = None) -> list[dict]:
    return auth_call(admin, endpoint, RequestCode.AUTH_LIST_USER, {"filter": name_filter}) or []


def list_acls(admin, endpoint: str, subject_filter: str | None = None, resource_filter: str | None = None) -> list[dict]:
    return auth_call(admin, endpoint, RequestCode.AUTH_LIST_ACL, {"subjectFilter": subject_filter,
                                                                  "resourceFilter": resource_filter}) or []
