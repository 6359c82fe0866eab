"""ACL 2.0's admin codes (RocketMQ 5.3's AdminBrokerProcessor): users and ACLs edited through a broker.

| code | header | body | answer |
| --- | --- | --- | --- |
| AUTH_CREATE_USER 3001, AUTH_UPDATE_USER 3002 | ``username`` | UserInfo (password, userType, userStatus) | - |
| AUTH_DELETE_USER 3003 | ``username`` | - | - (a missing user is no error) |
| AUTH_GET_USER 3004 | ``username`` | - | UserInfo, or no body |
| AUTH_LIST_USER 3005 | ``filter`` (a substring of the name) | - | [UserInfo] |
| AUTH_CREATE_ACL 3006, AUTH_UPDATE_ACL 3007 | ``subject`` (``User:name``) | AclInfo | - (entries merged by resource) |
| AUTH_DELETE_ACL 3008 | ``subject``, ``policyType``, ``resource`` | - | - (no resource: the whole ACL) |
| AUTH_GET_ACL 3009 | ``subject`` | - | AclInfo, or no body |
| AUTH_LIST_ACL 3010 | ``subjectFilter``, ``resourceFilter`` | - | [AclInfo] |

Apache's answers: a blank username INVALID_PARAMETER (29) "The username is blank"; a Super user made
or changed by someone who is not Super SYSTEM_ERROR "The super user can only be create by super
user"; every refusal of the edit itself NO_PERMISSION (16) with Apache's text ("The user is
existed", "The subject of User:x is not exist.", "The actions can not be Any.", ...). The cluster's
own processes and the CLI on its data dir (the cluster's CURVE key) act as Super. The edit goes to
the cluster's one ``auth.json`` (acl/auth_store.py), which every process rereads within a second.
Without ACL 2.0 there is no store: the codes are refused saying so.
"""

from __future__ import annotations

import json
import logging
import os

from rocketbox.cluster.acl.addresses import AclFormatError
from rocketbox.cluster.acl.auth_model import SUPER, AuthError, parse_policies, parse_user_info
from rocketbox.cluster.acl.auth_store import editing, is_auth_file, read_auth_file
from rocketbox.cluster.protocol import ProtocolError, ResponseCode, answers_refusals
from rocketbox.cluster.wire_format import Command

log = logging.getLogger(__name__)

AUTH_OFF = ("ACL 2.0 is off on this broker: there are no users or ACLs to edit (authenticationEnabled=true "
            "and authorizationEnabled=true, or cluster up --auth, turn it on; a cluster with a plain_acl.yml "
            "runs ACL 1.0)")


def _body(request: Command):
    try:
        return json.loads(request.body) if request.body else None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(f"the body is not JSON: {type(exc).__name__}", ResponseCode.INVALID_PARAMETER) from None


def _json(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


class AuthAdmin:
    def __init__(self, cfg, on_edit=lambda: None):
        path = os.path.abspath(cfg.acl_file) if cfg.acl_enable and cfg.acl_file else ""
        self.path = path if is_auth_file(path) else ""
        self.on_edit = on_edit   # the broker's guard rereads the file now

    def _store(self):
        if not self.path:
            raise ProtocolError(AUTH_OFF)
        try:
            return read_auth_file(self.path)
        except AclFormatError as exc:
            raise ProtocolError(str(exc)) from None

    def _edit(self, request: Command, change, what: str) -> Command:
        if not self.path:
            raise ProtocolError(AUTH_OFF)
        try:
            with editing(self.path) as store:
                change(store)
        except AuthError as exc:
            raise ProtocolError(str(exc), ResponseCode.NO_PERMISSION) from None
        except (AclFormatError, OSError) as exc:
            raise ProtocolError(f"{what} failed: {exc}") from None
        log.info("ACL 2.0 %s: %s", self.path, what)
        self.on_edit()
        return request.response(ResponseCode.SUCCESS)

    @staticmethod
    def _caller_is_super(request: Command, store) -> bool:
        """Apache's isNotSuperUserLogin, inverted: the cluster's own key (no ``access``) is Super."""
        access = request.access
        if access is None or not access.caller.access_key:
            return True
        user = store.users.get(access.caller.access_key)
        return user is not None and user["userType"] == SUPER

    def _username(self, request: Command) -> str:
        username = request.fields.get("username") or ""
        if not username.strip():
            raise ProtocolError("The username is blank", ResponseCode.INVALID_PARAMETER)
        return username

    @staticmethod
    def _user_info(request: Command, username: str, fill_defaults: bool) -> dict:
        try:
            return parse_user_info(_body(request), username, fill_defaults)
        except AuthError as exc:   # Apache's AuthenticationException: NO_PERMISSION with its text
            raise ProtocolError(str(exc), ResponseCode.NO_PERMISSION) from None

    @answers_refusals
    def on_create_user(self, request: Command, reply=None) -> Command:
        username = self._username(request)
        user = self._user_info(request, username, fill_defaults=True)

        def change(store) -> None:
            if user["userType"] == SUPER and not self._caller_is_super(request, store):
                raise ProtocolError("The super user can only be create by super user")
            store.create_user(user)
        return self._edit(request, change, f"user {username} created")

    @answers_refusals
    def on_update_user(self, request: Command, reply=None) -> Command:
        username = self._username(request)
        user = self._user_info(request, username, fill_defaults=False)

        def change(store) -> None:
            old = store.users.get(username)
            if old is None:
                raise AuthError("The user is not exist")
            if SUPER in (user["userType"], old["userType"]) and not self._caller_is_super(request, store):
                raise ProtocolError("The super user can only be update by super user")
            store.update_user(user)
        return self._edit(request, change, f"user {username} updated")

    @answers_refusals
    def on_delete_user(self, request: Command, reply=None) -> Command:
        username = request.fields.get("username") or ""

        def change(store) -> None:
            old = store.users.get(username)
            if old is not None and old["userType"] == SUPER and not self._caller_is_super(request, store):
                raise AuthError("The super user can only be update by super user")
            store.delete_user(username)
        return self._edit(request, change, f"user {username} deleted")

    @answers_refusals
    def on_get_user(self, request: Command, reply=None) -> Command:
        username = self._username(request)
        users = self._store().list_users(None)
        found = next((u for u in users if u["username"] == username), None)
        return request.response(ResponseCode.SUCCESS, body=_json(found) if found else b"")

    @answers_refusals
    def on_list_user(self, request: Command, reply=None) -> Command:
        users = self._store().list_users(request.fields.get("filter"))
        return request.response(ResponseCode.SUCCESS, body=_json(users) if users else b"")

    def _put_acl(self, request: Command, what: str) -> Command:
        subject = request.fields.get("subject") or ""
        body = _body(request)
        if not isinstance(body, dict) or not body.get("policies"):
            raise ProtocolError("The body of acl is null", ResponseCode.NO_PERMISSION)
        subject = body.get("subject") or subject
        try:
            policies = parse_policies(body.get("policies"))
        except AuthError as exc:
            raise ProtocolError(str(exc), ResponseCode.NO_PERMISSION) from None
        return self._edit(request, lambda store: store.put_acl(subject, policies), f"acl of {subject} {what}")

    @answers_refusals
    def on_create_acl(self, request: Command, reply=None) -> Command:
        return self._put_acl(request, "created")

    @answers_refusals
    def on_update_acl(self, request: Command, reply=None) -> Command:
        return self._put_acl(request, "updated")

    @answers_refusals
    def on_delete_acl(self, request: Command, reply=None) -> Command:
        fields = request.fields
        subject = fields.get("subject") or ""
        return self._edit(request, lambda store: store.delete_acl(subject, fields.get("policyType"),
                                                                  fields.get("resource")),
                          f"acl of {subject} deleted ({fields.get('resource') or 'all'})")

    @answers_refusals
    def on_get_acl(self, request: Command, reply=None) -> Command:
        subject = request.fields.get("subject") or ""
        kind, _, name = subject.partition(":")
        acl = self._store().acl_of(f"User:{name}") if kind.lower() == "user" else None
        return request.response(ResponseCode.SUCCESS, body=_json(acl) if acl else b"")

    @answers_refusals
    def on_list_acl(self, request: Command, reply=None) -> Command:
        acls = self._store().list_acls(request.fields.get("subjectFilter"), request.fields.get("resourceFilter"))
        return request.response(ResponseCode.SUCCESS, body=_json(acls) if acls else b"")
