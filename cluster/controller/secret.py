"""The cluster's controller secret: the key every controller node proves it holds before any of
its Raft messages is read (PySyncObj's encryption, raft.py).

One file, made once by ``cluster up`` (or LocalCluster) with owner-only permissions, beside the
ACL file when access control is on (the hosts of a cluster share that directory's keys already),
else in the data directory; ``cluster up --controller-secret FILE`` names another (copy the same
file to every host whose NameServers form one controller). The file holds 64 hex digits and a
newline; nothing else reads it.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import tempfile

log = logging.getLogger(__name__)

SECRET_FILE_NAME = "controller.secret"
_SECRET_BYTES = 32


class ControllerSecretError(ValueError):
    """The secret file is missing, unreadable or malformed: the reason names the file."""


def default_secret_path(data_dir: str, acl_file: str = "") -> str:
    directory = os.path.dirname(os.path.abspath(acl_file)) if acl_file else os.path.abspath(data_dir)
    return os.path.join(directory, SECRET_FILE_NAME)


def make_secret(path: str) -> None:
    """Writes a new secret to ``path`` unless a file is there already (then it is kept: every node
    of a cluster must hold the same one). Made whole or not at all, owner-only from the start."""
    if os.path.exists(path):
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".controller-secret-")   # mkstemp: mode 0600
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(_SECRET_BYTES) + "\n")
        os.link(tmp, path)   # fails when another process made it first: theirs holds
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def read_secret(path: str) -> str:
    """The secret in ``path``; ControllerSecretError when it cannot be had. A file that others
    may read is used, with a warning: whoever reads it can join the controller and run code in it."""
    try:
        with open(path) as f:
            mode = os.fstat(f.fileno()).st_mode
            text = f.read(4 * _SECRET_BYTES).strip()
    except OSError as exc:
        raise ControllerSecretError(f"cannot read the controller secret {path}: {exc.strerror}; "
                                    f"`cluster up` makes it, or copy the cluster's own to every host") from None
    if len(text) < 2 * _SECRET_BYTES or any(c not in "0123456789abcdef" for c in text):
        raise ControllerSecretError(f"{path} is not a controller secret (64 hex digits)")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning("the controller secret %s may be read by other users (mode %o): anyone who reads it can "
                    "join the controller; chmod 600 it", path, stat.S_IMODE(mode))
    return text
