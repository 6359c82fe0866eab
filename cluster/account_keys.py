"""Where an account's ZeroMQ CURVE keys are, and reading them for a client (``ClientConfig.for_account``,
``cluster --account``): ``curve/`` beside the ACL file holds the cluster's pair (``server.key``,
``server.key_secret``) and each account's (``clients/<accessKey>.key``, ``.key_secret``), as
``acl/curve.py`` writes them. Settings layer: no import of ours, so ``config.py`` can use it."""

from __future__ import annotations

import os

ACL_ACCOUNT_ENV = "ROCKETBOX_ACCOUNT"
# ACL 2.0's users and ACLs (acl/auth_store.py): the file's name is here so that finding it (the CLI, the
# topology) loads none of the ACL modules.
AUTH_FILE_NAME = "auth.json"
ACL_FILE_ENV = "ROCKETBOX_ACL_FILE"
SECRET_SUFFIX = ".key_secret"


def curve_key_dir(acl_file: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(acl_file)), "curve")


def account_key_path(account: str, acl_file: str | None) -> str:
    """The secret key file of ``account`` (an accessKey beside ``acl_file``, else
    $ROCKETBOX_ACL_FILE), or ``account`` itself when it names a key file; ValueError when neither says."""
    if account.endswith(SECRET_SUFFIX) or os.sep in account:
        return os.path.abspath(os.path.expanduser(account))
    acl_file = acl_file or os.environ.get(ACL_FILE_ENV, "")
    if not acl_file:
        raise ValueError(f"which cluster is account {account!r} of? give the cluster's ACL file "
                         f"(acl_file=..., or {ACL_FILE_ENV}), or the path of its {SECRET_SUFFIX} file")
    return os.path.join(curve_key_dir(acl_file), "clients", account + SECRET_SUFFIX)


def account_curve_fields(account: str, acl_file: str | None) -> dict[str, str]:
    """ClientConfig's curve_* fields for ``account``: its pair and the cluster's public key
    (``server.key`` in the ``curve/`` directory above the pair). ValueError naming the file and the
    command that makes it when a key is missing."""
    import zmq.auth

    secret_path = account_key_path(account, acl_file)
    server_path = os.path.join(os.path.dirname(os.path.dirname(secret_path)), "server.key")
    name = os.path.basename(secret_path)[:-len(SECRET_SUFFIX)]
    if not os.path.isfile(secret_path):
        raise ValueError(f"account {name!r} has no CURVE keys ({secret_path} does not exist): "
                         f"`cluster acl keygen {name}` makes them beside the cluster's ACL file")
    try:
        public, secret = zmq.auth.load_certificate(secret_path)
        server, _ = zmq.auth.load_certificate(server_path)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the CURVE keys of account {name!r}: {exc}") from None
    if not secret:
        raise ValueError(f"{secret_path} holds no secret key: it is a public key file")
    return {"curve_server_key": server.decode(), "curve_public_key": public.decode(),
            "curve_secret_key": secret.decode()}
