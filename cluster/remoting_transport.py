"""RocketMQ's remoting protocol on a TCP port, served from the process's event loop.

The door real RocketMQ clients knock on (the C++ client, Java 4.x/5.x remoting clients,
mqadmin): frames from ``remoting_format``, requests to the same handler table as the ZeroMQ
door (``request_dispatch``). Knows sockets, frames and time-outs; nothing of topics.

One ``epoll`` set holds the listening socket and every connection; the event loop polls only its
descriptor, so thousands of idle connections cost nothing per turn. The answers to the requests of
one read leave together, up to 16 frames or 256 KiB a write (a client with many in flight gets
them for one system call, not one each); an answer given later (a flush wait, a long poll) is
written at once. What the socket does not take waits for EPOLLOUT. Bounds: who keeps a place and how many bytes
unfinished frames hold is ``remoting_admission`` (connections that have not proven themselves
with a request are dropped first, and within seconds); ``output_bytes_max`` unsent bytes per
connection (a client that does not read is disconnected), frames up to ``frame_bytes_max`` (a
larger length word closes the connection: the stream cannot be trusted past it), and a connection
silent for ``idle_timeout_s`` (RocketMQ's serverChannelMaxIdleTimeSeconds, 120 s), or holding half
a frame for ``partial_frame_timeout_s``, is closed. A bad header is answered SYSTEM_ERROR with the
reason; the connection stays. Warnings about peers are rate-limited.

A connection's peer key (``b"tcp:<n>"``) is what handlers see as ``reply.peer``: the broker
reaches a client over its own connection with ``notify`` (NOTIFY_CONSUMER_IDS_CHANGED,
CHECK_TRANSACTION_STATE, ...), in the serialize type the client last used.
"""

from __future__ import annotations

import collections
import errno
import logging
import select
import socket
import time
from typing import Callable

from rocketbox.cluster.fast_failure import DoorBacklog
from rocketbox.cluster.log_limit import RateLimitedLog
from rocketbox.cluster.protocol import ResponseCode
from rocketbox.cluster.remoting_admission import Admission, AdmissionLimits, Place
from rocketbox.cluster.remoting_format import (FRAME_BYTES_MAX_DEFAULT, SERIALIZE_JSON, BadFrameLength, FrameDecoder,
                                               decode_frame_payload, encode_frame)
from rocketbox.cluster.arrival_stamps import STAMP_SPACE, arrived_at, enable_arrival_stamps
from rocketbox.cluster.request_dispatch import Handler, PendingCalls, ReadPass, dispatch
from rocketbox.cluster.supervision.lifecycle import release_free_heap
from rocketbox.cluster.wire_format import (DOOR_REMOTING, FLAG_ONEWAY, FLAG_RESPONSE, Command, FrameError,
                                           next_opaque)
from rocketbox.cluster.zmq_transport import Reply

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)

TCP_PEER_PREFIX = b"tcp:"
RECV_BYTES = 256 * 1024
# Reads of one connection per readiness event: a busy client cannot starve the others.
RECV_ROUNDS_MAX = 16
# A connection that has not proven itself (remoting_admission.py) gets one read an event, and those
# in the middle of a frame this many bytes a pass in all: a flood of half frames costs each turn of
# the loop about a millisecond, and the clients' requests wait for no more.
UNPROVEN_BYTES_PER_PASS = 1 << 20
# Answers held back to leave in one write with those after them, at most: past either they go at once.
CORKED_FRAMES_MAX = 16
CORKED_BYTES_MAX = 256 * 1024
ACCEPTS_PER_EVENT_MAX = 64
EVENTS_PER_TURN_MAX = 512
# A closed connection that held this much of unfinished frames has the heap trimmed (a buffer grown piece by piece lives on the
# heap once glibc raised its mmap threshold: a flood of half frames kept ~90 MB after its connections closed,
# tests/integration/test_native_flood.py).
TRIM_AFTER_BYTES = 1 << 20
# When the process is out of descriptors, stop accepting this long instead of spinning on EMFILE.
ACCEPT_PAUSE_S = 0.1
_READ = select.EPOLLIN | select.EPOLLRDHUP


class _Connection:
    __slots__ = ("sock", "fd", "peer", "host", "port", "decoder", "out", "out_bytes", "last_active", "partial_since",
                 "serialize_type", "closed", "behind_since", "place", "corked", "corked_bytes")

    def __init__(self, sock: socket.socket, peer: bytes, host: str, decoder, now: float, port: int = 0):
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.host = host
        self.port = port
        self.decoder = decoder
        self.out: collections.deque = collections.deque()
        self.out_bytes = 0
        self.last_active = now
        self.partial_since: float | None = None
        self.serialize_type = SERIALIZE_JSON
        self.closed = False
        # Set while bytes are left unread (its reads ran out of rounds): when it was last empty.
        self.behind_since: float | None = None
        self.place: Place | None = None
        # While the requests of one read are served: their answers, written together after them.
        self.corked: list | None = None
        self.corked_bytes = 0


class TcpReply(Reply):
    """Answers one request on its connection, in the request's serialize type."""

    __slots__ = ("_conn", "_serialize_type")

    def __init__(self, server: "RemotingServer", conn: _Connection, opaque: int, oneway: bool, serialize_type: int):
        super().__init__(server, conn.peer, opaque, oneway)
        self._conn = conn
        self._serialize_type = serialize_type
        if not oneway:
            conn.place.unanswered += 1   # a connection waiting for an answer is in use

    def _deliver(self, response: Command) -> None:
        place = self._conn.place
        place.unanswered -= 1
        place.last_active = time.monotonic()
        self._server.write(self._conn, self._server.encode(response, self._serialize_type))


class RemotingServer:
    """The door's connections, bounds and answers; its framing (RocketMQ's) is in the methods a
    subclass replaces to serve another protocol on the same machinery (``zmtp_door.ZmtpServer``):
    ``new_decoder``, ``decode``, ``encode``, ``opened``, ``after_feed``, ``stream_errors``."""

    peer_prefix = TCP_PEER_PREFIX
    door = DOOR_REMOTING
    stream_errors: tuple = (BadFrameLength,)
    tells_peer_port = True   # requests carry the peer's port (born hosts, consumerConnection)

    def __init__(self, host: str, port: int, handlers: dict[int, Handler], *, name: str,
                 frame_bytes_max: int = FRAME_BYTES_MAX_DEFAULT, limits: AdmissionLimits = AdmissionLimits(),
                 authenticated_only: bool = False, idle_timeout_s: float = 120.0,
                 partial_frame_timeout_s: float = 30.0, output_bytes_max: int = 64 * 1024 * 1024,
                 on_disconnect: Callable[[bytes], None] | None = None, wait_bounds=None, tls=None,
                 read_lane: Callable[[list, str, int], bytes | None] | None = None):
        """``wait_bounds`` (``fast_failure.WaitBounds``): answer SYSTEM_BUSY to requests that waited longer;
        ``read_lane(payloads, peer address, peer port)``: a handler's fast path for a read of one or more
        requests (the broker's plain sends, ``broker/send_lane.py``), which serves them all and returns
        their answers, or returns None having done nothing (each request is then served as usual);
        ``authenticated_only`` (access control is on): only a request the guard let through proves a
        connection (``remoting_admission``). ``tls`` (``tls.ServerTls``): every connection's I/O goes
        through its TLS stream."""
        self.tls = tls
        self.read_lane = read_lane
        self.name = name
        self.handlers = handlers
        self.frame_bytes_max = frame_bytes_max
        self.admission = Admission(limits)
        self.authenticated_only = authenticated_only
        self.idle_timeout_s = idle_timeout_s
        self.partial_frame_timeout_s = partial_frame_timeout_s
        self.output_bytes_max = output_bytes_max
        self.on_disconnect = on_disconnect
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.listener.bind((host, port))
        except OSError:
            self.listener.close()
            raise
        self.listener.listen(1024)
        self.listener.setblocking(False)
        # Accepted connections inherit the option.
        self.arrival_stamps = wait_bounds is not None and enable_arrival_stamps(self.listener)
        self.address = f"{host}:{self.listener.getsockname()[1]}"
        self._epoll = select.epoll()
        self._epoll.register(self.listener.fileno(), select.EPOLLIN)
        self._connections: dict[int, _Connection] = {}
        self._by_peer: dict[bytes, _Connection] = {}
        self._serial = 0
        self._loop = None
        self.requests_served = 0
        self.peer_calls = PendingCalls()
        self.malformed_frames = 0
        self.connections_refused = 0
        self.connections_timed_out = 0
        self.connections_slow_reader = 0
        self.socket_writes = 0
        self.backlog = DoorBacklog(self._epoll.fileno(), wait_bounds, name) if wait_bounds is not None else None
        self._polled_at = time.monotonic()   # the previous readiness pass: every connection not behind was empty then
        self._unproven_bytes_left = UNPROVEN_BYTES_PER_PASS
        self._trim_due = False
        # Run after a read's requests were served and before their answers leave (the broker answers
        # the pulls parked for what the read stored: BrokerService.answer_parked_pulls).
        self.before_answers: Callable[[], None] | None = None

    # ------------------------------------------------------------ event loop

    def attach(self, loop) -> None:
        self._loop = loop
        loop.add_reader(self._epoll.fileno(), self.on_events)
        if self.backlog is not None:
            loop.watch_backlog(self.backlog)
        loop.call_every(1.0, self.close_stale)

    def on_events(self) -> None:
        listener_fd = self.listener.fileno()
        polled_at = time.monotonic()   # before the poll: see event_loop._poll_once
        ready = self._epoll.poll(0, EVENTS_PER_TURN_MAX)
        # A request read now arrived after its connection was last empty (fast_failure.py): at the
        # previous pass, unless its reads ran out of rounds then.
        since = self._polled_at if self.backlog is None else max(self._polled_at, self.backlog.drained_at)
        drained = len(ready) < EVENTS_PER_TURN_MAX
        if drained:
            self._polled_at = polled_at
        self._unproven_bytes_left = UNPROVEN_BYTES_PER_PASS
        for fd, events in ready:
            if fd == listener_fd:
                self._accept(since)
                continue
            conn = self._connections.get(fd)
            if conn is None:
                continue
            if events & select.EPOLLOUT:
                self._flush(conn)
            if events & (select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR) and not conn.closed:
                conn_since = since if conn.behind_since is None else conn.behind_since
                if self._unproven_bytes_left <= 0 and conn.decoder.buffered_bytes and _reads_shaped(conn):
                    emptied = False   # a stranger's frame past this pass's share: epoll reports it again
                else:
                    emptied = self._read(conn, conn_since)
                conn.behind_since = None if emptied else conn_since
                drained = emptied and drained
        if drained and self.backlog is not None:
            self.backlog.drained(polled_at)

    def _accept(self, since: float) -> None:
        """Accept waiting connections; what they carry arrived after ``since`` (when the listener was
        last seen empty), however long they waited to be accepted."""
        for _ in range(ACCEPTS_PER_EVENT_MAX):
            try:
                sock, (host, port) = self.listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    _limited.warning(f"accept:{self.name}", "%s: cannot accept a connection: %s", self.name, exc)
                    self._pause_accepting()
                return
            now = time.monotonic()
            peer = self.peer_prefix + str(self._serial + 1).encode()
            place, taken = self.admission.admit(peer, host, now)
            self._close_places(taken)
            if place is None:
                self.connections_refused += 1
                _limited.warning(f"full:{self.name}", "%s: refused a connection from %s: %d connections open, "
                                 "every one in use", self.name, host, len(self._connections))
                sock.close()
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.tls.wrap(sock)   # plain or TLS, decided on its first byte
            self._serial += 1
            conn = _Connection(sock, peer, host, self.new_decoder(), now, port if self.tells_peer_port else 0)
            conn.place = place
            self._connections[conn.fd] = conn
            self._by_peer[conn.peer] = conn
            conn.behind_since = since
            self._epoll.register(conn.fd, _READ)
            self.opened(conn)

    def _pause_accepting(self) -> None:
        fd = self.listener.fileno()
        self._epoll.modify(fd, 0)
        if self._loop is not None:
            self._loop.call_at(time.monotonic() + ACCEPT_PAUSE_S, lambda: self._epoll.modify(fd, select.EPOLLIN))

    def _read(self, conn: _Connection, since: float) -> bool:
        """Read and serve what ``conn`` has; False when bytes may be left unread (the rounds ran out)."""
        emptied = True
        stamps, arrived = self.arrival_stamps, since
        for _ in range(1 if _reads_shaped(conn) else RECV_ROUNDS_MAX):
            try:
                # The kernel's stamp can only spare a request a refusal the estimate would give it:
                # while the estimate is below every bound, a recv does (recvmsg and reading its stamp
                # cost ~0.8 us a read more).
                if stamps and self.backlog.late(since, time.monotonic()):
                    data, ancillary, _flags, _address = conn.sock.recvmsg(RECV_BYTES, STAMP_SPACE)
                    arrived = arrived_at(ancillary, since)
                else:
                    data = conn.sock.recv(RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                self.close_connection(conn, f"receive failed: {exc}")
                return True
            if not data:
                self.close_connection(conn, None)
                return True
            if not conn.place.proven:
                self._unproven_bytes_left -= len(data)
            conn.last_active = time.monotonic()
            self.admission.active(conn.place, conn.last_active)
            try:
                payloads = conn.decoder.feed(data)
                self.after_feed(conn)
            except self.stream_errors as exc:
                # The frames that arrived whole before the fault are answered first.
                self._serve_all(conn, _whole_before(exc), arrived)
                if conn.closed:
                    return True
                self.malformed_frames += 1
                if getattr(exc, "zeromq_greeting", False):   # a wrong door, not an attack: said plainly, below warning
                    _limited.info(f"zmtp:{self.name}", "%s: closed the connection from %s: a ZeroMQ greeting, "
                                  "not a RocketMQ frame (a RocketBox native client, or cluster's door probe, "
                                  "at the remoting port)", self.name, conn.host)
                self.close_connection(conn, f"unusable frame: {exc}", quiet=getattr(exc, "zeromq_greeting", False))
                return True
            if payloads:
                self._serve_all(conn, payloads, arrived)
                if conn.closed:
                    return True
            self._close_places(self.admission.holding(conn.place, conn.decoder.buffered_bytes, bool(payloads)))
            if conn.closed:
                return True
            if len(data) < RECV_BYTES:
                break
        else:
            emptied = False
        if conn.decoder.buffered_bytes == 0 and not (self.tls is not None and conn.sock.handshaking):
            conn.partial_since = None
        elif conn.partial_since is None:
            conn.partial_since = conn.last_active
        return emptied

    def _serve_all(self, conn: _Connection, payloads: list, since: float) -> None:
        """Serve the requests of one read; the answers ready by the end leave in one write (a client
        with many requests in flight gets them for one system call, not one each). Several requests
        share a ``ReadPass``: what their handlers deferred (one append for all the sends) runs
        before the write."""
        if self.read_lane is not None and self._lane(conn, payloads, since):
            return
        conn.corked = []
        read_pass = ReadPass() if len(payloads) > 1 else None
        try:
            for payload in payloads:
                self._serve(conn, payload, since, read_pass)
                if conn.closed:
                    return
        finally:
            if read_pass is not None:
                read_pass.finish()
            if self.before_answers is not None and conn.corked:
                self.before_answers()
            self._uncork(conn)

    def _lane(self, conn: _Connection, payloads: list, since: float) -> bool:
        """Whether ``read_lane`` served the read (its answers written in one write)."""
        if self.backlog is not None and not self.backlog.unhurried(since, len(payloads)):
            return False   # some may have waited past a bound: each is served, or refused, as usual
        try:
            answers = self.read_lane(payloads, conn.host, conn.port)
        except Exception:   # a bug in the fast path: it stores nothing before it is sure, so serve as usual
            _limited.error(f"lane:{self.name}", "%s: the read lane failed", self.name, exc_info=True)
            return False
        if answers is None:
            return False
        self.requests_served += len(payloads)
        conn.serialize_type = payloads[-1][0]   # the last request's (its word's top byte), as _serve keeps it
        conn.place.last_active = time.monotonic()
        if not conn.place.proven:
            self.admission.prove(conn.place)
        if self.before_answers is not None:
            self.before_answers()
        self.write(conn, answers)
        return True

    def _uncork(self, conn: _Connection) -> None:
        frames, conn.corked, conn.corked_bytes = conn.corked, None, 0
        if frames:
            self.write(conn, frames[0] if len(frames) == 1 else b"".join(frames))

    def _serve(self, conn: _Connection, payload: bytes, since: float, read_pass: ReadPass | None = None) -> None:
        """``since``: when the request arrived, or a moment before it (fast_failure.py)."""
        try:
            request, serialize_type = self.decode(payload)
        except FrameError as exc:
            self.malformed_frames += 1
            _limited.warning(f"malformed:{self.name}", "%s: malformed frame from %s: %s", self.name, conn.host, exc)
            self.write(conn, self.encode(Command(ResponseCode.SYSTEM_ERROR, {}, b"", 0, FLAG_RESPONSE,
                                                 f"malformed frame: {exc}"), conn.serialize_type))
            return
        conn.serialize_type = serialize_type
        if request.is_response:
            self.peer_calls.answer(request)   # else an answer to a one-way request of ours: nothing waits
            return
        self.requests_served += 1
        request.peer_address = conn.host
        request.peer_port = conn.port
        request.door = self.door
        request.read_pass = read_pass
        reply = TcpReply(self, conn, request.opaque, request.is_oneway, serialize_type)
        busy = self.backlog.refusal(request, since) if self.backlog is not None else None
        if busy is not None:
            reply(busy)
            return
        dispatch(self.handlers, request, reply, self.name)
        if not conn.place.proven and (request.access_granted if self.authenticated_only else
                                      request.code in self.handlers):
            self.admission.prove(conn.place)

    # ------------------------------------------------------------ the protocol

    def new_decoder(self):
        """A new connection's reader: ``feed(bytes)`` gives whole frames, ``buffered_bytes`` the rest."""
        return FrameDecoder(self.frame_bytes_max)

    @staticmethod
    def decode(payload) -> tuple[Command, int]:
        """(request, serialize type to answer in) of one whole frame; FrameError when it is malformed."""
        return decode_frame_payload(payload)

    @staticmethod
    def encode(cmd: Command, serialize_type: int) -> bytes:
        return encode_frame(cmd, serialize_type)

    def opened(self, conn: _Connection) -> None:
        """A connection was accepted (RocketMQ's protocol: the client speaks first)."""

    def after_feed(self, conn: _Connection) -> None:
        """Bytes were fed to the connection's reader (the protocol may owe the peer some now)."""

    # ------------------------------------------------------------ writing

    def write(self, conn: _Connection, frame: bytes) -> None:
        if conn.closed:
            return
        corked = conn.corked
        if corked is not None:
            corked.append(frame)
            conn.corked_bytes += len(frame)
            # The first answers do not wait for many more: the client works on them meanwhile; big
            # answers (pulls) go on without waiting for the rest.
            if len(corked) >= CORKED_FRAMES_MAX or conn.corked_bytes >= CORKED_BYTES_MAX:
                self._uncork(conn)
                conn.corked = []
            return
        if conn.out:
            self._queue(conn, memoryview(frame))
            return
        sent = self._send_some(conn, frame)
        if sent is None:
            return
        if sent < len(frame):
            self._queue(conn, memoryview(frame)[sent:])
            self._epoll.modify(conn.fd, _READ | select.EPOLLOUT)

    def _send_some(self, conn: _Connection, data) -> int | None:
        """Bytes of ``data`` the socket took now (0 when full); None when the connection broke."""
        self.socket_writes += 1
        try:
            return conn.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return 0
        except OSError as exc:
            self.close_connection(conn, f"send failed: {exc}")
            return None

    def _queue(self, conn: _Connection, rest: memoryview) -> None:
        conn.out.append(rest)
        conn.out_bytes += len(rest)
        if conn.out_bytes > self.output_bytes_max:
            self.connections_slow_reader += 1
            self.close_connection(conn, f"{conn.out_bytes} bytes of answers unread")

    def _flush(self, conn: _Connection) -> None:
        while conn.out:
            head = conn.out[0]
            sent = self._send_some(conn, head)
            if not sent:
                return
            conn.out_bytes -= sent
            if sent < len(head):
                conn.out[0] = head[sent:]
                return
            conn.out.popleft()
        self._epoll.modify(conn.fd, _READ)

    # ------------------------------------------------------------ server -> client

    def notify(self, peer: bytes, cmd: Command) -> None:
        """A one-way request to the client on connection ``peer`` (gone: dropped)."""
        conn = self._by_peer.get(peer)
        if conn is None:
            return
        cmd.flag |= FLAG_ONEWAY
        cmd.opaque = next_opaque()
        self.write(conn, self.encode(cmd, conn.serialize_type))

    def call_peer(self, peer: bytes, cmd: Command, on_answer, timeout_s: float) -> None:
        """A request to the client on connection ``peer`` whose answer (or an exception: no answer
        within ``timeout_s``, or the connection is gone) goes to ``on_answer``."""
        conn = self._by_peer.get(peer)
        if conn is None:
            on_answer(ConnectionError("the client's connection is gone"))
            return
        cmd.opaque = next_opaque()
        self.peer_calls.add(cmd.opaque, peer, time.monotonic() + timeout_s, on_answer)
        self.write(conn, self.encode(cmd, conn.serialize_type))

    def reachable(self, peer: bytes) -> bool:
        return peer in self._by_peer

    @classmethod
    def owns(cls, peer) -> bool:
        return isinstance(peer, bytes) and peer.startswith(cls.peer_prefix)

    # ------------------------------------------------------------ closing

    def info(self) -> dict:
        return {"address": self.address, "connections": len(self._connections),
                "requestsServed": self.requests_served, "malformedFrames": self.malformed_frames,
                "connectionsRefused": self.connections_refused, "connectionsTimedOut": self.connections_timed_out,
                "connectionsSlowReader": self.connections_slow_reader, "socketWrites": self.socket_writes,
                **self.admission.info()}

    def _close_places(self, places: list[Place]) -> None:
        """Close the connections ``remoting_admission`` dropped (their places are gone already)."""
        for place in places:
            conn = self._by_peer.get(place.owner)
            if conn is not None:
                self.close_connection(conn, "its place went to a newcomer" if place.proven else
                                      "dropped before it proved itself with a request", quiet=True)

    def close_stale(self) -> None:
        if self._trim_due:
            self._trim_due = False
            release_free_heap()
        now = time.monotonic()
        self.peer_calls.expire(now, lambda _peer: TimeoutError("the client did not answer in time"))
        late = self.admission.overdue(now)
        self.connections_timed_out += len(late)
        self._close_places(late)
        for conn in list(self._connections.values()):
            if now - conn.last_active > self.idle_timeout_s:
                self.connections_timed_out += 1
                self.close_connection(conn, f"idle for {self.idle_timeout_s:g} s", quiet=True)
            elif conn.partial_since is not None and now - conn.partial_since > self.partial_frame_timeout_s:
                self.connections_timed_out += 1
                self.close_connection(conn, f"half a frame ({conn.decoder.buffered_bytes} bytes) for "
                                            f"{self.partial_frame_timeout_s:g} s")

    def close_connection(self, conn: _Connection, why: str | None, quiet: bool = False) -> None:
        if conn.closed:
            return
        conn.closed = True
        if why and not quiet:
            _limited.warning(f"close:{self.name}", "%s: closed the connection from %s: %s", self.name, conn.host, why)
        try:
            self._epoll.unregister(conn.fd)
        except (OSError, ValueError):
            pass
        conn.sock.close()
        conn.out.clear()
        self._trim_due = self._trim_due or conn.decoder.buffered_bytes >= TRIM_AFTER_BYTES
        if conn.place is not None:
            self.admission.leave(conn.place)
        self._connections.pop(conn.fd, None)
        self._by_peer.pop(conn.peer, None)
        self.peer_calls.fail_key(conn.peer, ConnectionError("the client's connection closed"))
        if self.on_disconnect is not None:
            self.on_disconnect(conn.peer)

    def close(self) -> None:
        self.on_disconnect = None
        for conn in list(self._connections.values()):
            self.close_connection(conn, None)
        self.listener.close()
        self._epoll.close()


def _whole_before(exc: Exception) -> list:
    """The frames (or messages) one read completed before its stream went bad."""
    return getattr(exc, "frames", None) or getattr(exc, "messages", None) or []


def _reads_shaped(conn: _Connection) -> bool:
    """A stranger's reads are held to one an event and a share of each pass; not through TLS, whose
    stream may hold decrypted bytes epoll cannot see (they would wait for a readiness never reported)."""
    return not conn.place.proven and not getattr(conn.sock, "encrypted", False)
