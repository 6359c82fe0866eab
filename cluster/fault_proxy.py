"""A fault-injecting TCP proxy for partition tests: ZeroMQ connections between processes go
through it, and ``cut()`` partitions them (open connections reset, new ones refused until
``heal()``). This kernel has no netem; a proxy needs no privileges.

Listens on 127.0.0.1 only and forwards to one fixed upstream address: a test tool, bounded by
the connections its test makes.
"""

from __future__ import annotations

import selectors
import socket
import threading

CHUNK_BYTES = 64 * 1024


class PartitionProxy:
    def __init__(self, upstream_host: str, upstream_port: int, listen_port: int = 0):
        self.upstream = (upstream_host, upstream_port)
        self.listener = socket.create_server(("127.0.0.1", listen_port))
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.cut_now = False
        self.connections_cut = 0
        self._pairs: dict[socket.socket, socket.socket] = {}
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.listener, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"proxy-{self.port}", daemon=True)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "PartitionProxy":
        self._thread.start()
        return self

    def cut(self) -> None:
        """Partition: reset every open connection and refuse new ones."""
        with self._lock:
            self.cut_now = True
            for sock in list(self._pairs):
                self._close(sock, reset=True)

    def heal(self) -> None:
        with self._lock:
            self.cut_now = False

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            for sock in list(self._pairs):
                self._close(sock)
        self.listener.close()
        self._selector.close()

    def _run(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(0.05):
                with self._lock:
                    if key.fileobj is self.listener:
                        self._accept()
                    elif key.fileobj in self._pairs:
                        self._pump(key.fileobj)

    def _accept(self) -> None:
        try:
            client, _ = self.listener.accept()
        except BlockingIOError:
            return
        if self.cut_now:
            _reset(client)
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=1.0)
        except OSError:
            _reset(client)
            return
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._selector.register(sock, selectors.EVENT_READ)
        self._pairs[client], self._pairs[upstream] = upstream, client

    def _pump(self, source: socket.socket) -> None:
        try:
            data = source.recv(CHUNK_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(source)
            return
        try:
            self._pairs[source].setblocking(True)   # simple back-pressure: wait for the peer to take it
            self._pairs[source].sendall(data)
            self._pairs[source].setblocking(False)
        except OSError:
            self._close(source)

    def _close(self, sock: socket.socket, reset: bool = False) -> None:
        peer = self._pairs.pop(sock, None)
        for s in (sock, peer):
            if s is None:
                continue
            self._pairs.pop(s, None)
            try:
                self._selector.unregister(s)
            except (KeyError, ValueError):
                pass
            if reset:
                self.connections_cut += 1
                _reset(s)
            else:
                s.close()


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer sees the connection die, as in a partition."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    except OSError:
        pass
    sock.close()
