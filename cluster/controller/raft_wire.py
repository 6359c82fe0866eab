"""What a controller node takes off its Raft port: PySyncObj's frames, bounded, holding no pickle.

PySyncObj frames its messages as a length and a zlib'd payload, Fernet-encrypted when a password is
set (raft.py always sets the cluster's controller secret, so a peer that does not hold it fails
the decryption and is disconnected before anything is decoded). Two more guards sit behind that,
so that even a peer holding the secret, or a bug in that path, cannot run code or exhaust memory:

- the payload is tagged JSON (``raft_codec.py``, installed for every message, command, journal and
  dump PySyncObj writes or reads), never a pickle;
- ``BoundedTransport`` caps what an incoming connection may buffer: a connection that has not yet
  finished PySyncObj's key exchange and named itself a member (``_unknownConnections``) at most
  ``UNPROVEN_BUFFER_BYTES`` and at most ``UNPROVEN_CONNECTIONS_MAX`` of them (the oldest is dropped
  for a new one), a member's connection ``MEMBER_BUFFER_BYTES``.

PySyncObj is pinned below 0.4 (setup.py): the transport reaches two of its private names
(``_TcpConnection__processRead``, ``_TcpConnection__readBuffer``), which the controller's tests
exercise.
"""

from __future__ import annotations

import _socket
import logging
import socket

from pysyncobj.transport import TCPTransport

from rocketbox.cluster.log_limit import RateLimitedLog

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

# PySyncObj 0.3.17 replaces socket.inet_ntop with a Windows-only function on every platform
# (pysyncobj/win_inet_pton.py), which breaks it for the whole process (psutil, among others).
socket.inet_ntop = _socket.inet_ntop

# A member's frames are append-entries batches (64 KiB by default) and dump chunks of the same
# size; a controller's state is small.
MEMBER_BUFFER_BYTES = 16 * 1024 * 1024
# Before the key exchange a connection sends one encrypted 32-byte key, ~150 bytes on the wire.
UNPROVEN_BUFFER_BYTES = 4096
UNPROVEN_CONNECTIONS_MAX = 32

class BoundedTransport(TCPTransport):
    """PySyncObj's TCP transport with the buffer and connection caps above."""

    def __init__(self, syncObj, selfNode, otherNodes):
        super().__init__(syncObj, selfNode, otherNodes)
        self._unprovenOrder: dict = {}   # incoming connections not yet members, oldest first

    def _onNewIncomingConnection(self, conn):
        super()._onNewIncomingConnection(conn)
        self._capRead(conn)
        for old in [c for c in self._unprovenOrder if c not in self._unknownConnections]:
            del self._unprovenOrder[old]   # became members, or left
        if len(self._unprovenOrder) >= UNPROVEN_CONNECTIONS_MAX:
            _limited.warning("controller:unproven", "controller: %d connections have not proven themselves "
                             "members; dropping the oldest", len(self._unprovenOrder) + 1)
            self._drop(next(iter(self._unprovenOrder)))
        self._unprovenOrder[conn] = None

    def _drop(self, conn) -> None:
        conn.disconnect()
        self._unknownConnections.discard(conn)
        self._unprovenOrder.pop(conn, None)

    def _capRead(self, conn) -> None:
        read = conn._TcpConnection__processRead

        def bounded_read():
            if not read():
                return False
            buffered = len(conn._TcpConnection__readBuffer)
            unproven = conn in self._unknownConnections
            limit = UNPROVEN_BUFFER_BYTES if unproven else MEMBER_BUFFER_BYTES
            if buffered <= limit:
                return True
            _limited.warning("controller:oversized", "controller: a connection %s buffered %d bytes, over %d; "
                             "disconnected", "not yet proven a member" if unproven else "of a member",
                             buffered, limit)
            self._drop(conn)
            return False
        conn._TcpConnection__processRead = bounded_read
