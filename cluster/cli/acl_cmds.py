"""``cluster acl keygen ACCOUNT`` and ``cluster acl check``: the files of access control.

``keygen`` makes an account's ZeroMQ CURVE key pair in ``curve/clients/`` beside the ACL file
(``ACCOUNT.key``, the public half the cluster reads; ``ACCOUNT.key_secret``, for the client), and
the cluster's own pair if missing; the account is the ACL file's accessKey of that name. ``check``
reads the ACL file as the processes will and prints its accounts (never a secret). The file is
``--acl-file``, else the one the data dir was started with.
"""

from __future__ import annotations

import os
import sys

from rocketbox.cluster.cli import up_settings
from rocketbox.cluster.cli.common import print_json


def _acl_file(args) -> str | None:
    """The ACL file the command means (--acl-file, or the one the data dir was started with); None,
    said on stderr, when there is none."""
    path = os.path.abspath(args.acl_file) if args.acl_file else None
    if path is None:
        try:
            path = up_settings.access_file(args.data_dir)
        except (OSError, ValueError):
            path = None
    if not path:
        print("error: which ACL file? --acl-file PATH (or a --data-dir started with one)", file=sys.stderr)
    return path


# The ACL modules (YAML, CURVE) are imported by these commands only: every other command of the CLI,
# `cluster up` first, starts without them.

def cmd_keygen(args) -> int:
    from rocketbox.cluster.acl.acl_file import read_acl_file
    from rocketbox.cluster.acl.auth_model import AuthStore
    from rocketbox.cluster.acl.curve import CLIENTS_DIR, curve_dir, make_key_pair, server_key_pair
    acl_file = _acl_file(args)
    if not acl_file:
        return 2
    config = read_acl_file(acl_file)
    if args.account not in (config.users if isinstance(config, AuthStore) else config.accounts):
        print(f"warning: {acl_file} has no account {args.account!r} yet: the key acts as nobody until it does",
              file=sys.stderr)
    server = server_key_pair(acl_file, create=True)
    directory = os.path.join(curve_dir(acl_file), CLIENTS_DIR)
    pair = make_key_pair(directory, args.account)
    print(f"account {args.account}: public key {pair.public.decode()}")
    print(f"  client key pair: {os.path.join(directory, args.account + '.key_secret')}")
    print(f"  the cluster's public key: {server.public.decode()} ({os.path.join(curve_dir(acl_file), 'server.key')})")
    return 0


def cmd_check(args) -> int:
    from rocketbox.cluster.acl.acl_file import read_acl_file, secret_exposures
    from rocketbox.cluster.acl.auth_model import AuthStore
    from rocketbox.cluster.acl.curve import account_keys
    from rocketbox.cluster.acl.permissions import describe
    acl_file = _acl_file(args)
    if not acl_file:
        return 2
    config = read_acl_file(acl_file)
    keys, problems = account_keys(acl_file)
    by_account = {account: key.decode() for key, account in keys.items()}
    if isinstance(config, AuthStore):   # ACL 2.0: its users (no password) and ACLs
        users = [{"username": u["username"], "userType": u["userType"], "userStatus": u["userStatus"],
                  "curveKey": by_account.get(u["username"], "")} for u in config.users.values()]
        print_json({"file": acl_file, "users": users, "acls": config.list_acls(None, None),
                    "warnings": [*problems, *secret_exposures(acl_file)]})
        return 0
    rows = [{"accessKey": a.access_key, "admin": a.admin, "whiteRemoteAddress": a.white_address,
             "defaultTopicPerm": describe(a.default_topic_perm), "defaultGroupPerm": describe(a.default_group_perm),
             "resources": {r: describe(p) for r, p in sorted(a.resource_perms.items())},
             "curveKey": by_account.get(a.access_key, "")} for a in config.accounts.values()]
    print_json({"file": acl_file, "globalWhiteRemoteAddresses": [p for p, _ in config.global_white],
                "accounts": rows, "warnings": [*config.warnings, *problems, *secret_exposures(acl_file)]})
    return 0


def add_parsers(sub) -> None:
    acl = sub.add_parser("acl", help="access control's files: an account's CURVE keys, the ACL file read back")
    verbs = acl.add_subparsers(dest="action", required=True)
    keygen = verbs.add_parser("keygen", help="an account's ZeroMQ CURVE key pair (curve/clients/ACCOUNT.key*)")
    keygen.add_argument("account", help="the accessKey the key acts as")
    keygen.set_defaults(func=cmd_keygen)
    check = verbs.add_parser("check", help="read the ACL file as the cluster does; its accounts as JSON")
    check.set_defaults(func=cmd_check)
    for verb in (keygen, check):
        verb.add_argument("--acl-file", help="the plain_acl.yml (default: the one the data dir was started with)")
