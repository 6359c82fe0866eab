"""ZeroMQ CURVE keys of the native door: where they live, and the socket options that use them.

Files, in the directory ``curve/`` next to the ACL file (ZeroMQ's certificate format, as
``zmq.auth.create_certificates`` writes it; ``cluster acl keygen ACCOUNT`` makes an account's pair,
``cluster up`` the cluster's):

| file | what |
| --- | --- |
| ``curve/server.key_secret`` (and ``server.key``) | the cluster's key pair: every NameServer and broker serves CURVE with it, and the cluster's own processes (brokers, proxy, console, metrics, the CLI) use it as their client key too, which gives them every right (they hold the server's secret anyway) |
| ``curve/clients/<accessKey>.key`` | a client's public key; a connection made with it acts as that account of the ACL file |

Clients need the server's public key (``curve/server.key``) and a key pair of their own.
``use_for_process`` makes a key set the default of every client socket the process makes
afterwards (the cluster's processes call it at start); ``ClientConfig.curve_*`` gives one client
its own.
"""

from __future__ import annotations

import os
import tempfile
from typing import NamedTuple

import zmq
import zmq.auth

from rocketbox.cluster.account_keys import account_key_path, curve_key_dir

CLIENTS_DIR = "clients"
SERVER_NAME = "server"
PUBLIC_SUFFIX = ".key"
SECRET_SUFFIX = ".key_secret"


class CurveKeyError(ValueError):
    """A key file is missing or unreadable: the reason names the file."""


class KeyPair(NamedTuple):
    public: bytes   # z85, 40 bytes
    secret: bytes


class ClientKeys(NamedTuple):
    server_public: bytes
    public: bytes
    secret: bytes


def curve_dir(acl_file: str) -> str:
    return curve_key_dir(acl_file)


def _write_certificate(path: str, public: bytes, secret: bytes | None) -> None:
    """A certificate file made whole or not at all; never replaces one already there."""
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".cert-")
    try:
        with os.fdopen(fd, "w") as out:
            out.write("#   ZeroMQ CURVE certificate (RocketBox)\ncurve\n")
            out.write(f'    public-key = "{public.decode()}"\n')
            if secret is not None:
                out.write(f'    secret-key = "{secret.decode()}"\n')
        os.chmod(tmp, 0o600 if secret is not None else 0o644)
        os.link(tmp, path)   # fails when another process made it first: theirs holds
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def make_key_pair(directory: str, name: str) -> KeyPair:
    """``<name>.key_secret`` and ``<name>.key`` in ``directory`` (made if missing, else read)."""
    os.makedirs(directory, exist_ok=True)
    secret_path = os.path.join(directory, name + SECRET_SUFFIX)
    if not os.path.exists(secret_path):
        public, secret = zmq.curve_keypair()
        _write_certificate(secret_path, public, secret)
    pair = load_key_pair(secret_path)
    _write_certificate(os.path.join(directory, name + PUBLIC_SUFFIX), pair.public, None)
    return pair


def load_key_pair(secret_path: str) -> KeyPair:
    try:
        public, secret = zmq.auth.load_certificate(secret_path)
    except (OSError, ValueError) as exc:
        raise CurveKeyError(f"cannot read the CURVE key pair {secret_path}: {exc}") from None
    if not secret:
        raise CurveKeyError(f"{secret_path} holds no secret key")
    return KeyPair(public, secret)


def load_public_key(path: str) -> bytes:
    try:
        public, _ = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise CurveKeyError(f"cannot read the CURVE public key {path}: {exc}") from None
    return public


def server_key_pair(acl_file: str, create: bool = False) -> KeyPair:
    directory = curve_dir(acl_file)
    if create:
        return make_key_pair(directory, SERVER_NAME)
    return load_key_pair(os.path.join(directory, SERVER_NAME + SECRET_SUFFIX))


def account_keys(acl_file: str) -> tuple[dict[bytes, str], list[str]]:
    """``(public key -> accessKey, problems)`` from ``curve/clients/<accessKey>.key``."""
    directory = os.path.join(curve_dir(acl_file), CLIENTS_DIR)
    keys, problems = {}, []
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return keys, problems
    for name in names:
        if not name.endswith(PUBLIC_SUFFIX):
            continue
        try:
            keys[load_public_key(os.path.join(directory, name))] = name[:-len(PUBLIC_SUFFIX)]
        except CurveKeyError as exc:
            problems.append(str(exc))
    return keys, problems


def keys_fingerprint(acl_file: str) -> tuple:
    """What changes when a client key file is added, removed or rewritten (cheap to compare)."""
    directory = os.path.join(curve_dir(acl_file), CLIENTS_DIR)
    try:
        with os.scandir(directory) as entries:
            return tuple(sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in entries))
    except FileNotFoundError:
        return ()


def client_keys_for(acl_file: str, account: str | None = None) -> ClientKeys:
    """The keys a client on this host uses: the cluster's own pair (``account`` None), or an
    account's pair in ``curve/clients/<account>.key_secret``."""
    server = server_key_pair(acl_file)
    if account is None:
        return ClientKeys(server.public, server.public, server.secret)
    pair = load_key_pair(account_key_path(account, acl_file))
    return ClientKeys(server.public, pair.public, pair.secret)


def client_config_fields(keys: ClientKeys) -> dict[str, str]:
    """``ClientConfig`` fields that make a client connect with ``keys``."""
    return {"curve_server_key": keys.server_public.decode(), "curve_public_key": keys.public.decode(),
            "curve_secret_key": keys.secret.decode()}


_process_client_keys: ClientKeys | None = None


def use_for_process(keys: ClientKeys | None) -> None:
    """Every client socket this process makes from now on connects with ``keys`` (None: plain)."""
    global _process_client_keys
    _process_client_keys = keys


def use_cluster_keys(acl_file: str) -> None:
    """This process is one of the cluster's: its client sockets use the cluster's own pair."""
    use_for_process(client_keys_for(acl_file))


def effective_client_keys(keys: ClientKeys | None) -> ClientKeys | None:
    """The keys a client socket made with ``keys`` connects with (``keys``, else the process's)."""
    return keys or _process_client_keys


HOW_TO_CONNECT = ("connect as an account of its ACL file: ClientConfig.for_account(NAME, acl_file=...) in Python, "
                  "`cluster --account NAME ...` (or ROCKETBOX_ACCOUNT=NAME) on the command line; "
                  "`cluster acl keygen NAME` makes an account's keys beside the ACL file")


def handshake_refusal(endpoint: str, mechanism_mismatch: bool, has_keys: bool) -> str:
    """Why a door refused this client's ZeroMQ handshake, in words, and what to give instead. A
    client without keys meets a CURVE door (the server closes at the greeting, which libzmq reports
    either as a mechanism mismatch or without detail); one with keys meets a plain door (a
    mismatch) or a CURVE door with another server key."""
    if not has_keys:
        return (f"access control refused this client at {endpoint}: that door takes only ZeroMQ CURVE connections "
                f"(the cluster runs with an ACL file) and this client has no keys; {HOW_TO_CONNECT}")
    if mechanism_mismatch:
        return (f"access control is off at {endpoint} (that door takes plain connections) and this client "
                f"connects with CURVE keys: leave its keys out")
    return (f"access control refused this client at {endpoint}: its CURVE handshake failed, so the server key it "
            f"was given is not that door's (keys of another cluster, or read before the cluster's "
            f"curve/server.key was made); {HOW_TO_CONNECT}")


def secure_client(sock: zmq.Socket, keys: ClientKeys | None = None) -> None:
    """CURVE options of a client socket, before it connects: ``keys``, else the process's, else none."""
    keys = keys or _process_client_keys
    if keys is None:
        return
    sock.curve_serverkey = keys.server_public
    sock.curve_publickey = keys.public
    sock.curve_secretkey = keys.secret


def secure_server(sock: zmq.Socket, pair: KeyPair, domain: str) -> None:
    """CURVE options of a server socket, before it binds; ``domain`` tells the ZAP handler which door."""
    sock.zap_domain = domain.encode()
    sock.curve_server = True
    sock.curve_secretkey = pair.secret
    sock.curve_publickey = pair.public
