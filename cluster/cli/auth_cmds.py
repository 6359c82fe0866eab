"""mqadmin's ACL 2.0 verbs (RocketMQ 5.3): createUser, updateUser, deleteUser, getUser, listUser,
createAcl, updateAcl, deleteAcl, getAcl, listAcl, with mqadmin's flags and columns.

Each makes the AUTH_* request (3001..3010, broker/admin_auth.py) to one broker: ``-b ADDR``, else
the first master (of ``-c CLUSTER``). The cluster keeps one store that every broker reads (see
docs/ARCHITECTURE.md "Access control"), so one edit reaches every master and slave; mqadmin sends
to each master of its own store. A refusal prints the broker's reason and exits 1.
"""

from __future__ import annotations

from rocketbox.cluster.cli.common import new_console, open_admin, print_json_line, table
from rocketbox.cluster.cli.mqadmin_cmds import targets, verb_factory
from rocketbox.cluster.client.auth_requests import acl_info, auth_call, user_info
from rocketbox.cluster.protocol import RequestCode

USER_COLUMNS = ["#UserName", "#Password", "#UserType", "#UserStatus"]
ACL_COLUMNS = ["#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"]


def _call(args, code: int, fields: dict, body=None) -> tuple[str, object]:
    """(the broker's label, the answer's body as JSON) of one AUTH_* request to the broker the verb means."""
    with open_admin(args) as admin:
        label, endpoint = sorted(targets(admin, args).items())[0]
        return label, auth_call(admin, endpoint, code, fields, body)


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _user_info(args) -> dict:
    return user_info(args.username, args.password, args.user_type, getattr(args, "user_status", None))


def _edit(code: int, what: str, fields_of, body_of=None):
    """A verb that makes one edit and prints mqadmin's "<what> to <broker> success."."""
    def run(args) -> int:
        label, _ = _call(args, code, fields_of(args), body_of(args) if body_of else None)
        print(f"{what} to {label} success.")
        return 0
    return run


cmd_create_user = _edit(RequestCode.AUTH_CREATE_USER, "create user", lambda a: {"username": a.username}, _user_info)
cmd_update_user = _edit(RequestCode.AUTH_UPDATE_USER, "update user", lambda a: {"username": a.username}, _user_info)
cmd_delete_user = _edit(RequestCode.AUTH_DELETE_USER, "delete user", lambda a: {"username": a.username})


def _print_users(args, title: str, users: list[dict]) -> None:
    if args.json:
        for user in users:
            print_json_line(user)
        return
    new_console().print(table(title, USER_COLUMNS, [[u.get("username"), u.get("password"), u.get("userType"),
                                                     u.get("userStatus")] for u in users]))


def cmd_list_user(args) -> int:
    _, users = _call(args, RequestCode.AUTH_LIST_USER, {"filter": args.filter})
    _print_users(args, "listUser", users or [])
    return 0


def _acl_body(args) -> dict:
    return acl_info(args.subject, _split(args.resources), _split(args.actions), args.decision, _split(args.source_ip))


cmd_create_acl = _edit(RequestCode.AUTH_CREATE_ACL, "create acl", lambda a: {"subject": a.subject}, _acl_body)
cmd_update_acl = _edit(RequestCode.AUTH_UPDATE_ACL, "update acl", lambda a: {"subject": a.subject}, _acl_body)


def cmd_delete_acl(args) -> int:
    resources = _split(args.resources) or [None]
    for resource in resources:
        label, _ = _call(args, RequestCode.AUTH_DELETE_ACL, {"subject": args.subject, "resource": resource})
    print(f"delete acl to {label} success.")
    return 0


def _print_acls(args, title: str, acls: list[dict]) -> None:
    if args.json:
        for acl in acls:
            print_json_line(acl)
        return
    rows = []
    for acl in acls:
        entries = [(p.get("policyType"), e) for p in acl.get("policies") or [] for e in p.get("entries") or []]
        if not entries:
            rows.append([acl["subject"], "", "", "", "", ""])
        rows += [[acl["subject"], kind, e.get("resource"), ",".join(e.get("actions") or []),
                  ",".join(e.get("sourceIps") or []), e.get("decision")] for kind, e in entries]
    new_console().print(table(title, ACL_COLUMNS, rows))


def _show_one(code: int, fields_of, printer, title: str, missing):
    """getUser / getAcl: the one record as a table, or a line saying there is none (exit 1)."""
    def run(args) -> int:
        _, found = _call(args, code, fields_of(args))
        if not found:
            print(missing(args))
            return 1
        printer(args, title, [found])
        return 0
    return run


cmd_get_user = _show_one(RequestCode.AUTH_GET_USER, lambda a: {"username": a.username}, _print_users, "getUser",
                         lambda a: f"user {a.username} not found")
cmd_get_acl = _show_one(RequestCode.AUTH_GET_ACL, lambda a: {"subject": a.subject}, _print_acls, "getAcl",
                        lambda a: f"no acl of {a.subject}")


def cmd_list_acl(args) -> int:
    _, acls = _call(args, RequestCode.AUTH_LIST_ACL, {"subjectFilter": args.subject, "resourceFilter": args.resources})
    _print_acls(args, "listAcl", acls or [])
    return 0


def add_parsers(sub) -> None:
    verb = verb_factory(sub)
    for name, func, what in (("createUser", cmd_create_user, "create an ACL 2.0 user"),
                             ("updateUser", cmd_update_user, "change an ACL 2.0 user's password, type or status")):
        parser = verb(name, func, what, where=True)
        parser.add_argument("-u", "--username", required=True, help="the user's name (its AccessKey)")
        parser.add_argument("-p", "--password", required=func is cmd_create_user,
                            help="the user's password (its SecretKey)")
        parser.add_argument("-t", "--user-type", dest="user_type", help="Super or Normal (default Normal)")
        if func is cmd_update_user:
            parser.add_argument("-s", "--user-status", dest="user_status", help="enable or disable")
    for name, func, what in (("deleteUser", cmd_delete_user, "delete an ACL 2.0 user and its ACL"),
                             ("getUser", cmd_get_user, "show an ACL 2.0 user")):
        verb(name, func, what, where=True).add_argument("-u", "--username", required=True, help="the user's name")
    verb("listUser", cmd_list_user, "list ACL 2.0 users", where=True).add_argument(
        "-f", "--filter", help="only users whose name contains this")
    for name, func, what in (("createAcl", cmd_create_acl, "give a user policy entries"),
                             ("updateAcl", cmd_update_acl, "change a user's policy entries")):
        parser = verb(name, func, what, where=True)
        parser.add_argument("-s", "--subject", required=True, help="User:NAME")
        parser.add_argument("-r", "--resources", required=True,
                            help="comma list: Topic:T, Group:G, Cluster:C, Type:prefix*, Type:*, or *")
        parser.add_argument("-a", "--actions", required=True, help="comma list of All, Pub, Sub, Create, Update, "
                                                                   "Delete, Get, List")
        parser.add_argument("-i", "--source-ip", dest="source_ip", help="comma list of addresses or CIDR blocks")
        parser.add_argument("-d", "--decision", required=True, help="Allow or Deny")
    parser = verb("deleteAcl", cmd_delete_acl, "delete a user's policy entries (all without -r)", where=True)
    parser.add_argument("-s", "--subject", required=True, help="User:NAME")
    parser.add_argument("-r", "--resources", help="comma list of the entries' resources")
    verb("getAcl", cmd_get_acl, "show a user's ACL", where=True).add_argument("-s", "--subject", required=True,
                                                                              help="User:NAME")
    parser = verb("listAcl", cmd_list_acl, "list ACLs", where=True)
    parser.add_argument("-s", "--subject", help="only subjects containing this")
    parser.add_argument("-r", "--resources", help="only entries whose resource contains this")
