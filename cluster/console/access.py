"""The Access page's data (ACL 2.0): the cluster's users (never their passwords) and their ACL entries,
and the edits mqadmin's createUser, deleteUser, createAcl and deleteAcl make, through the broker the
CLI asks (client/auth_requests.py). The console acts with the cluster's key, which the broker takes
as a Super user; who may open the page at all is the console's login (a Super user's credentials)."""

from __future__ import annotations

from rocketbox.cluster.client.auth_requests import acl_info, auth_call, first_master, list_acls, list_users, \
    user_info
from rocketbox.cluster.console.forms import FormError, choice, text_field
from rocketbox.cluster.errors import BrokerError
from rocketbox.cluster.protocol import RequestCode

USER_TYPES = ("Normal", "Super")
DECISIONS = ("Allow", "Deny")
ACTIONS = ("Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "All")


def access_page(admin) -> dict:
    """Users and ACL rows; ``off`` holds the broker's reason when the cluster does not run ACL 2.0."""
    _, endpoint = first_master(admin)
    try:
        users = list_users(admin, endpoint)
        acls = list_acls(admin, endpoint)
    except BrokerError as exc:
        return {"off": exc.remark, "users": [], "entries": []}
    entries = [{"subject": acl["subject"], "policyType": policy.get("policyType", ""), **entry}
               for acl in acls for policy in acl.get("policies") or [] for entry in policy.get("entries") or []]
    return {"off": "", "users": [{k: u.get(k) for k in ("username", "userType", "userStatus")} for u in users],
            "entries": entries, "user_types": USER_TYPES, "decisions": DECISIONS, "actions": ACTIONS}


def _call(admin, code: int, fields: dict, body=None) -> None:
    auth_call(admin, first_master(admin)[1], code, fields, body)


def create_user(admin, form) -> str:
    username = text_field(form, "username", required=True, max_len=127)
    password = text_field(form, "password", required=True, strip=False)
    _call(admin, RequestCode.AUTH_CREATE_USER, {"username": username},
          user_info(username, password, choice(form, "user_type", USER_TYPES, default="Normal")))
    return f"user {username} created"


def delete_user(admin, username: str) -> str:
    _call(admin, RequestCode.AUTH_DELETE_USER, {"username": username})
    return f"user {username} and its ACL deleted"


def put_acl_entry(admin, form) -> str:
    subject = "User:" + text_field(form, "username", required=True, max_len=127)
    resource = text_field(form, "resource", required=True, max_len=300)
    actions = [a for a in ACTIONS if form.get(f"action_{a}")]
    if not actions:
        raise FormError("tick at least one action")
    ips = [ip.strip() for ip in text_field(form, "source_ips").split(",") if ip.strip()]
    decision = choice(form, "decision", DECISIONS, default="Allow")
    _call(admin, RequestCode.AUTH_CREATE_ACL, {"subject": subject},
          acl_info(subject, [resource], actions, decision, ips))
    return f"{subject}: {decision} {','.join(actions)} on {resource}"


def delete_acl_entry(admin, form) -> str:
    subject = text_field(form, "subject", required=True, max_len=140)
    resource = text_field(form, "resource", required=True, max_len=300)
    _call(admin, RequestCode.AUTH_DELETE_ACL, {"subject": subject, "policyType": text_field(form, "policy_type"),
                                               "resource": resource})
    return f"{subject}: the entry on {resource} deleted"
