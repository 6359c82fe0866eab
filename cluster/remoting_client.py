"""RocketBox's client over RocketMQ's remoting protocol: the ``RpcClient`` interface on TCP.

With ``ClientConfig(transport="remoting")`` the producers, consumers and admin of
``cluster.client`` reach a cluster through its remoting door (NameServer 9876, brokers 10911)
instead of ZeroMQ: the same requests, framed by ``remoting_format`` with JSON headers (the C++
client's serialization). It lets the benchmarks measure both doors with one client, and reaches
a real RocketMQ too.

``call`` runs on a connection owned by the calling thread (blocking send, then read until the
answer with its opaque): no hand-off between threads on the sync path. ``call_async`` and
``oneway`` go through one I/O thread (a selector over non-blocking connections); requests a
server sends (NOTIFY_CONSUMER_IDS_CHANGED, ...) arriving on any connection go to
``server_request_handlers``. A connection that times out or breaks is closed and its waiting
requests fail at once (RocketMQ's clients close a channel whose call timed out).

With ``tls`` (an ``ssl.SSLContext``, ``tls.client_context``: ClientConfig's tls_* settings) every
connection is TLS from its first byte, its handshake done while connecting; the I/O thread's
non-blocking reads and writes read OpenSSL's "wants more" as "not now".
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import selectors
import socket
import ssl
import time

from rocketbox.cluster.acl.signature import sign_remoting
from rocketbox.cluster.remoting_format import SERIALIZE_JSON, FrameDecoder, decode_frame_payload, encode_frame
from rocketbox.cluster.wire_format import FLAG_ONEWAY, Command, FrameError, next_opaque
from rocketbox.cluster.request_dispatch import settle
from rocketbox.cluster.client_transport import (ClientTransport, IoThreadBase, RequestTimeout, TransportError,
                                                serve_server_request)

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
RECV_BYTES = 256 * 1024


def _host_port(endpoint: str) -> tuple[str, int]:
    address = endpoint[len("tcp://"):] if endpoint.startswith("tcp://") else endpoint
    host, _, port = address.rpartition(":")
    return host, int(port)


def _connect(endpoint: str, timeout_s: float, tls: ssl.SSLContext | None = None) -> socket.socket:
    try:
        host, port = _host_port(endpoint)
        sock = socket.create_connection((host, port), timeout=min(timeout_s, CONNECT_TIMEOUT_S))
    except (OSError, ValueError) as exc:
        raise TransportError(f"cannot connect to {endpoint}: {exc}") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if tls is not None:
        try:
            sock = tls.wrap_socket(sock, server_hostname=host)   # the handshake, within the time-out
        except OSError as exc:   # ssl.SSLError (a certificate not trusted, ...) included
            sock.close()
            raise TransportError(f"TLS with {endpoint} failed: {exc}") from None
    return sock


def _received(sock: socket.socket) -> bytes | None:
    """What a non-blocking socket has now (b"": closed), or None; a TLS socket's whole records
    (what OpenSSL holds already is read too: no readiness event would say it is there)."""
    try:
        data = sock.recv(RECV_BYTES)
    except (BlockingIOError, InterruptedError, ssl.SSLWantReadError):
        return None
    if data and isinstance(sock, ssl.SSLSocket):
        while sock.pending():
            data += sock.recv(RECV_BYTES)
    return data


class _SyncConnection:
    __slots__ = ("sock", "decoder", "frames")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.decoder = FrameDecoder()
        self.frames: collections.deque = collections.deque()


def request_encoder(credentials: tuple[str, str] | None):
    """How a client frames its requests: signed with ``(accessKey, secretKey)`` as RocketMQ's
    AclClientRPCHook signs them (a cluster with access control), or as they are."""
    if credentials is None:
        return lambda request: encode_frame(request, SERIALIZE_JSON)
    access_key, secret_key = credentials

    def encode(request: Command) -> bytes:
        fields = sign_remoting(request.fields, request.body, access_key, secret_key)
        return encode_frame(dataclasses.replace(request, fields=fields), SERIALIZE_JSON)
    return encode


class RemotingRpcClient(ClientTransport):
    """Requests to many endpoints over remoting TCP; thread-safe and fork-safe. ``credentials``:
    an account's (accessKey, secretKey) every request is signed with."""

    def __init__(self, default_timeout_ms: int = 3000, spin_max_s: float = 0.0, tls: ssl.SSLContext | None = None,
                 credentials: tuple[str, str] | None = None):
        super().__init__(default_timeout_ms, spin_max_s)
        self.tls = tls
        self._encode = request_encoder(credentials)

    def _new_io_thread(self) -> "_IoThread":
        return _IoThread(self.server_request_handlers, self.tls, self._encode)

    def _drop(self, endpoint: str) -> None:
        conn = self._thread_connections().pop(endpoint, None)
        if conn is not None:
            conn.sock.close()

    def call(self, endpoint: str, request: Command, timeout_ms: int | None = None) -> Command:
        timeout_ms, deadline = self._begin_call(request, timeout_ms)
        connections = self._thread_connections()
        conn = connections.get(endpoint)
        if conn is None:
            conn = connections[endpoint] = _SyncConnection(_connect(endpoint, timeout_ms / 1000, self.tls))
        try:
            conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
            conn.sock.sendall(self._encode(request))
            sent_at = time.monotonic()
            # Poll first (spin_wait.py), then sleep: once per call, late answers to earlier calls aside.
            conn.sock.settimeout(0.0)
            data = self.spin.poll(lambda: _received(conn.sock), deadline)
            while True:
                if data is not None:
                    if not data:
                        raise ConnectionResetError("closed by the server")
                    conn.frames.extend(conn.decoder.feed(data))
                while conn.frames:
                    response, _ = decode_frame_payload(conn.frames.popleft())
                    if not response.is_response:
                        answer = serve_server_request(self.server_request_handlers, response)
                        if answer is not None:
                            conn.sock.settimeout(max(0.001, deadline - time.monotonic()))
                            conn.sock.sendall(encode_frame(answer, SERIALIZE_JSON))
                    elif response.opaque == request.opaque:
                        self.spin.answered(time.monotonic() - sent_at)
                        return response
                left = deadline - time.monotonic()
                if left <= 0:
                    raise socket.timeout()
                conn.sock.settimeout(left)
                data = conn.sock.recv(RECV_BYTES)
        except socket.timeout:
            self._drop(endpoint)   # a late answer would confuse the next call on this connection
            raise RequestTimeout(f"no answer from {endpoint} to request code {request.code} "
                                 f"within {timeout_ms} ms") from None
        except (OSError, FrameError) as exc:
            self._drop(endpoint)
            raise TransportError(f"connection to {endpoint} failed: {exc}") from None

    def oneway(self, endpoint: str, request: Command) -> None:
        request.opaque = next_opaque()
        request.flag |= FLAG_ONEWAY
        self._io_thread().submit(endpoint, request, None, time.monotonic())

    def close(self) -> None:
        self._stop_io_thread()
        connections = self._thread_connections()
        for conn in connections.values():
            conn.sock.close()
        connections.clear()


class _Peer:
    __slots__ = ("endpoint", "sock", "decoder", "out")

    def __init__(self, endpoint: str, sock: socket.socket):
        self.endpoint = endpoint
        self.sock = sock
        self.decoder = FrameDecoder()
        self.out = bytearray()


class _IoThread(IoThreadBase):
    """The remoting client's I/O thread: non-blocking connections under one selector."""

    THREAD_NAME = "remoting-io"

    def __init__(self, server_request_handlers: dict | None = None, tls: ssl.SSLContext | None = None,
                 encode=request_encoder(None)):
        self._tls = tls
        self._encode = encode
        super().__init__(server_request_handlers)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake_r, selectors.EVENT_READ)
        peers: dict[str, _Peer] = {}
        pending = self._pending

        def fail(peer: _Peer, why: str) -> None:
            selector.unregister(peer.sock)
            peer.sock.close()
            peers.pop(peer.endpoint, None)
            pending.fail_key(peer.endpoint, TransportError(f"connection to {peer.endpoint} lost: {why}"))

        def write(peer: _Peer) -> None:
            try:
                sent = peer.sock.send(peer.out)
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                sent = 0
            except OSError as exc:
                fail(peer, str(exc))
                return
            del peer.out[:sent]
            selector.modify(peer.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if peer.out else 0), peer)

        while not self._stopping:
            for key, events in selector.select(self._wait_s()):
                if key.fileobj == self._wake_r:
                    self._drain_wake_pipe()
                    continue
                peer = key.data
                if peer.endpoint not in peers:
                    continue
                if events & selectors.EVENT_WRITE:
                    write(peer)
                    if peer.endpoint not in peers:
                        continue
                if events & selectors.EVENT_READ:
                    try:
                        data = _received(peer.sock)
                        if data is None:
                            continue
                        if not data:
                            raise ConnectionResetError("closed by the server")
                        for payload in peer.decoder.feed(data):
                            response, _ = decode_frame_payload(payload)
                            if not response.is_response:
                                answer = self._serve_request(response)
                                if answer is not None:
                                    peer.out += encode_frame(answer, SERIALIZE_JSON)
                                    write(peer)
                                continue
                            pending.answer(response)
                    except (OSError, FrameError) as exc:
                        fail(peer, str(exc))
            self._wake_pending = False
            while self._submitted:
                endpoint, request, future, deadline = self._submitted.popleft()
                peer = peers.get(endpoint)
                if peer is None:
                    try:
                        sock = _connect(endpoint, CONNECT_TIMEOUT_S, self._tls)
                    except TransportError as exc:
                        if future is not None:
                            future.set_exception(exc)
                        continue
                    sock.setblocking(False)
                    peer = peers[endpoint] = _Peer(endpoint, sock)
                    selector.register(sock, selectors.EVENT_READ, peer)
                peer.out += self._encode(request)
                if future is not None:
                    pending.add(request.opaque, endpoint, deadline, settle(future))
                write(peer)
            self._expire_due()
        pending.fail_all(TransportError("client is closed"))
        for peer in peers.values():
            peer.sock.close()
        selector.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
