"""TLS on the remoting doors (NameServers' and brokers' ``RemotingServer``), the gRPC proxy, and
RocketBox's own remoting client, with RocketMQ's settings (TlsSystemConfig):

- ``tls.server.mode``: ``disabled`` (plain TCP only: a TLS handshake's first bytes read as an
  impossible frame length and the connection is closed, as RocketMQ rejects it), ``permissive``
  (both on one port: a connection whose first byte is 0x16, a TLS handshake record, is TLS, any
  other is plain; a remoting frame starts with its length word, whose first byte is 0x16 only for
  frames of 352 MiB and more, larger than any door takes) or ``enforcing`` (TLS only: a plain
  connection is closed). RocketMQ's default is permissive with a throw-away certificate (its "test
  mode"); ours is disabled, since a certificate nobody can check protects nothing.
- ``tls.server.certPath`` / ``tls.server.keyPath``: PEM files (``cluster tls`` makes a
  self-signed pair: ``make_self_signed``).
- client side (``ClientConfig.tls_*``): RocketMQ's ``tls.enable``; the server's certificate is
  checked against ``tls.client.trustCertPath`` (else the system's CAs), or not at all when
  ``tls_verify_server`` is off, as RocketMQ's clients do in their default test mode.

A door's connections are non-blocking sockets under one epoll loop: ``ServerTls.wrap`` gives each
accepted socket a ``TlsStream`` that decides plain or TLS on its first byte (MSG_PEEK: nothing is
consumed), drives the handshake from the loop's readiness events (``SSLWantRead/WriteError`` read
as "not yet") and then reads and writes through OpenSSL with the socket's own ``recv``/``send``
contract, so the door's code does not change for it. Pure parts (``parse_mode``,
``starts_tls``) do no I/O; certificate making imports ``cryptography`` only when called.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
import os
import socket
import ssl

from rocketbox.cluster.config import TLS_DISABLED as DISABLED, TLS_ENFORCING as ENFORCING, TLS_MODES as MODES
from rocketbox.cluster.config import check_tls
from rocketbox.cluster.file_modes import exposure

log = logging.getLogger(__name__)

# The first byte of every TLS connection: a handshake record (ContentType 22).
HANDSHAKE_RECORD = 0x16
CERT_FILE, KEY_FILE = "server.crt", "server.key"
TLS_DIR = "tls"
CERT_DAYS_DEFAULT = 825
# How many records one recv call drains at most (each at most 16 KiB of plaintext).
RECORDS_PER_RECV_MAX = 64


class TlsSettingsError(ValueError):
    """A TLS setting or file that does not work, with the reason."""


def parse_mode(text: str) -> str:
    """``tls.server.mode``'s value (case and spaces as RocketMQ's TlsMode.parse forgives them)."""
    mode = (text or "").strip().lower()
    if mode not in MODES:
        raise TlsSettingsError(f"tls.server.mode={text!r}: one of {', '.join(MODES)}")
    return mode


def starts_tls(first: bytes) -> bool:
    """Whether a connection's first bytes begin a TLS handshake."""
    return bool(first) and first[0] == HANDSHAKE_RECORD


def server_context(cert_path: str, key_path: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # A renegotiation would let a peer make the server redo the dear part of a handshake at will.
    context.options |= getattr(ssl, "OP_NO_RENEGOTIATION", 0)
    try:
        context.load_cert_chain(cert_path, key_path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsSettingsError(f"cannot use the certificate {cert_path} with the key {key_path}: {exc}") from None
    return context


def client_context(trust_cert_path: str = "", verify_server: bool = True) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not verify_server:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif trust_cert_path:
        try:
            context.load_verify_locations(trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise TlsSettingsError(f"cannot read the trusted certificate {trust_cert_path}: {exc}") from None
    else:
        context.load_default_certs()
    return context


# ---------------------------------------------------------------- a door's connections

class ServerTls:
    """A door's TLS: its mode and context, and what it counted."""

    def __init__(self, mode: str, cert_path: str, key_path: str):
        check_tls(mode, cert_path, key_path)
        self.mode = mode
        self.context = server_context(cert_path, key_path)
        exposed = exposure(key_path, "the TLS key")
        if exposed:
            log.warning("%s", exposed)
        self.handshakes = 0
        self.plain_refused = 0

    @classmethod
    def of(cls, cfg) -> "ServerTls | None":
        """The door of a NamesrvConfig or BrokerConfig: None without TLS (its sockets stay bare,
        nothing changes on its path); TlsSettingsError when the files do not work."""
        if cfg.tls_server_mode == DISABLED:
            return None
        return cls(cfg.tls_server_mode, cfg.tls_server_cert_path, cfg.tls_server_key_path)

    def wrap(self, sock: socket.socket) -> "TlsStream":
        return TlsStream(self, sock)


class TlsStream:
    """One accepted non-blocking connection of a door with TLS, used as its socket: ``recv`` and
    ``send`` raise BlockingIOError for "not now", return b"" at the end, raise OSError (SSLError
    included) when it cannot go on; ``recvmsg`` has no kernel stamps to give (fast failure then
    estimates, as for an unstamped read)."""

    __slots__ = ("_door", "_sock", "_tls", "_ready", "_fd")

    def __init__(self, door: ServerTls, sock: socket.socket):
        self._door = door
        self._sock = sock
        self._fd = sock.fileno()
        self._tls: ssl.SSLSocket | None = None
        self._ready = False   # plain decided, or the handshake done

    def fileno(self) -> int:
        return self._fd

    @property
    def handshaking(self) -> bool:
        """Not yet plain nor through its handshake (the door times it out as half a frame)."""
        return not self._ready

    @property
    def encrypted(self) -> bool:
        return self._tls is not None and self._ready

    def _decide(self) -> bool:
        """False when the peer left before sending a byte."""
        first = self._sock.recv(1, socket.MSG_PEEK)   # BlockingIOError: nothing yet
        if not first:
            return False
        if not starts_tls(first):
            if self._door.mode == ENFORCING:
                self._door.plain_refused += 1
                raise ConnectionRefusedError("a plain TCP connection to a door that enforces TLS "
                                             "(tls.server.mode=enforcing)")
            self._ready = True
            return True
        self._tls = self._door.context.wrap_socket(self._sock, server_side=True, do_handshake_on_connect=False)
        self._sock = self._tls
        return True

    def _advance(self) -> bool:
        """Move the connection on to plain or through its handshake (BlockingIOError while it waits);
        False when the peer left before its first byte."""
        if self._tls is None:
            if not self._decide():
                return False
            if self._ready:
                return True
        try:
            self._tls.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise BlockingIOError("TLS handshake under way") from None
        self._ready = True
        self._door.handshakes += 1
        return True

    def recv(self, size: int) -> bytes:
        if not self._ready:
            if not self._advance():
                return b""
            if self._tls is None:
                return self._sock.recv(size)
        elif self._tls is None:
            return self._sock.recv(size)
        chunks, total = [], 0
        # Until OpenSSL wants more bytes: what it already holds (pending) is read here, since epoll
        # cannot say it is there.
        for _ in range(RECORDS_PER_RECV_MAX):
            try:
                chunk = self._tls.recv(size - total)
            except ssl.SSLWantReadError:
                break
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):   # closed, with or without close_notify
                chunk = b""
            if not chunk:
                if chunks:
                    break   # the end shows on the next call
                return b""
            chunks.append(chunk)
            total += len(chunk)
            if total >= size:
                break
        if not chunks:
            raise BlockingIOError("no whole TLS record yet")
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def recvmsg(self, size: int, _ancillary_size: int = 0):
        return self.recv(size), [], 0, None

    def send(self, data) -> int:
        if not self._ready:
            try:
                if not self._advance():
                    raise BrokenPipeError("the peer left")
            except BlockingIOError:
                return 0
        if self._tls is None:
            return self._sock.send(data)
        # A TLS write takes one record (16 KiB) at a time: as many as the socket takes now.
        view, sent = memoryview(data), 0
        while sent < len(view):
            try:
                sent += self._tls.send(view[sent:])
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError):
                # OpenSSL keeps what it encrypted of the record and takes the same bytes again
                # (moving-buffer mode): the caller's next send starts at ``sent``.
                if not sent:
                    raise BlockingIOError("TLS record waits for the socket") from None
                break
        return sent

    def close(self) -> None:
        self._sock.close()


# ---------------------------------------------------------------- certificates (cluster tls)

def tls_directory(data_dir: str) -> str:
    """Where ``cluster tls`` keeps a data dir's certificate and key."""
    return os.path.join(os.path.abspath(data_dir), TLS_DIR)


def _host_name(host: str):
    from cryptography import x509
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def make_self_signed(directory: str, hosts: tuple[str, ...] = (), days: int = CERT_DAYS_DEFAULT,
                     overwrite: bool = False) -> tuple[str, str]:
    """A self-signed certificate and its key (EC P-256: a handshake costs a fraction of RSA's) in
    ``directory`` as ``server.crt`` and ``server.key`` (0600), valid for 127.0.0.1, localhost and
    ``hosts``; their paths. FileExistsError when a pair is there and ``overwrite`` is off."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    cert_path, key_path = os.path.join(directory, CERT_FILE), os.path.join(directory, KEY_FILE)
    if not overwrite and (os.path.exists(cert_path) or os.path.exists(key_path)):
        raise FileExistsError(f"{cert_path} or {key_path} exists (--force replaces them)")
    names = list(dict.fromkeys(("127.0.0.1", "localhost", *(h for h in hosts if h))))
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[-1]),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "RocketBox")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([_host_name(h) for h in names]), critical=False)
            # Its own trust anchor: clients load this very file as the CA that signed it.
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    key_bytes = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption())
    _write(key_path, key_bytes, 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return cert_path, key_path


def _write(path: str, data: bytes, mode: int) -> None:
    """Written whole under a temporary name with ``mode`` from the start, then renamed over ``path``."""
    temporary = f"{path}.tmp{os.getpid()}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)   # the umask must not widen nor narrow it
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(temporary, path)
