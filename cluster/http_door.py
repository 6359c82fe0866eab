"""An HTTP door that a flood from the same host slows down but does not lock out:
uvicorn's h11 protocol with the deadlines and bounds uvicorn lacks, served on a thread of its own.
The console and the metrics endpoint are served through it.

uvicorn bounds a request head's size (``h11_max_incomplete_event_size``) and closes a connection idle
after an answer (``timeout_keep_alive``), but has no deadline for a head or a body once its first byte
has come, and its one bound on connections (``limit_concurrency``) answers 503 to every request while
it is reached, counting connections that never sent one: 70 half-sent requests locked the console.
Here each connection is, at any moment, in one stage:

- ``head``: the client owes a request line and headers (a new connection, or one idle between requests);
- ``body``: the client owes the rest of a request's body;
- ``drain``: the client owes reading an answer (the transport stopped taking writes);
- ``server``: the request is whole and the server works on it.

The first three wait on the client, each with a deadline counted from the moment the stage began, not
from the last byte (a byte every few seconds does not extend it): at the deadline the connection is
closed, a partial head answered 408 first. Connections are bounded, in all and per client address.
A new connection past a bound pushes out a connection that waits on its client: the one waiting
longest of the client holding the most connections (of its own client, past the per-client bound),
answered 503 when it had sent part of a request; the new connection is refused (503) only when every
other connection is the server's. A real client sends its request as soon as it connects, so it waits
for a moment only; a flood holding slots by sending slowly loses them first. All clients on loopback
share one address, which is why the per-client bound pushes out rather than refuses.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from dataclasses import dataclass, field

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from rocketbox.cluster.log_limit import RateLimitedLog

log = logging.getLogger(__name__)
_limited = RateLimitedLog(log)
START_TIMEOUT_S = 15.0

HEAD, BODY, DRAIN, SERVER = "head", "body", "drain", "server"


@dataclass(frozen=True)
class DoorLimits:
    # A request's line and headers arrive whole within this, counted from the connection's start or
    # the end of its previous answer.
    head_timeout_s: float = 10.0
    # A request's body arrives whole, and an answer is read, within this.
    body_timeout_s: float = 20.0
    # Between requests a connection is kept this long (uvicorn's keep-alive; whole seconds).
    idle_timeout_s: int = 5
    connections_max: int = 256
    connections_per_client_max: int = 128
    # A request line and headers together (h11 answers 400 past it).
    head_bytes_max: int = 16 * 1024

    def validate(self) -> None:
        if min(self.head_timeout_s, self.body_timeout_s, self.idle_timeout_s) <= 0:
            raise ValueError("the HTTP door's time-outs must be positive")
        if not 0 < self.connections_per_client_max <= self.connections_max:
            raise ValueError("connections_per_client_max must be positive and at most connections_max")


@dataclass
class DoorCounters:
    """Connections the door closed, by why (read by tests and logged)."""
    timed_out: dict = field(default_factory=lambda: {HEAD: 0, BODY: 0, DRAIN: 0})
    pushed_out: int = 0
    refused: int = 0


def _plain_answer(status: int, reason: str, text: str) -> bytes:
    """An answer written straight to the socket, for a connection h11 has no request on."""
    body = text.encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\nretry-after: 1\r\n\r\n").encode() + body


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus the stages above; ``limits``, ``counters`` and ``door`` are set on
    the subclass ``HttpDoor`` makes for each door."""
    limits: DoorLimits
    counters: DoorCounters
    door: str

    stage: str | None = None
    waiting_since: float = 0.0
    _deadline: asyncio.TimerHandle | None = None

    @property
    def client_host(self) -> str:
        return self.client[0] if self.client else ""

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        if self._admitted():
            self._settle()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._settle()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._settle()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._settle()

    def connection_lost(self, exc) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    # ------------------------------------------------------------------ stages

    def _current_stage(self) -> str:
        if self.flow.write_paused:
            return DRAIN
        state = self.conn.their_state
        if state is h11.IDLE:
            return HEAD
        if state is h11.SEND_BODY:
            return BODY
        return SERVER

    def _settle(self) -> None:
        """Moves to the stage the connection is in now; a new waiting stage starts its deadline."""
        if self.transport.is_closing():
            self._cancel_deadline()
            return
        stage = self._current_stage()
        if stage == self.stage:
            return
        self.stage = stage
        self._cancel_deadline()
        if stage != SERVER:
            self.waiting_since = time.monotonic()
            timeout = self.limits.head_timeout_s if stage == HEAD else self.limits.body_timeout_s
            self._deadline = self.loop.call_later(timeout, self._expired)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _owes_an_answer(self) -> bool:
        """Part of a request came and no answer has begun: a closing may say why. An idle connection
        just ends, as uvicorn's keep-alive does; a begun answer is not followed by another."""
        if self.stage == HEAD:
            return bool(self.conn.trailing_data[0])
        return self.stage == BODY and self.cycle is not None and not self.cycle.response_started

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        stage = self.stage
        self.counters.timed_out[stage] += 1
        owed = self._owes_an_answer()
        if stage != HEAD or owed:
            _limited.warning(f"{self.door}:timeout:{stage}", "%s: closed a connection from %s that did not %s "
                             "within %g s", self.door, self.client_host, _OWED[stage],
                             self.limits.head_timeout_s if stage == HEAD else self.limits.body_timeout_s)
        self._end(_plain_answer(408, "Request Timeout", "the request did not arrive in time\n") if owed else b"")

    def _end(self, answer: bytes) -> None:
        self._cancel_deadline()
        if answer:
            self.transport.write(answer)
        self.transport.abort()   # never waits on a client that does not read

    # ------------------------------------------------------------------ bounds

    def _admitted(self) -> bool:
        """Within the bounds, or made room by pushing out a connection that waits on its client;
        else refused (503) and closed."""
        others = [c for c in self.connections if c is not self and not c.transport.is_closing()]
        held: dict[str, int] = {}
        for c in others:
            held[c.client_host] = held.get(c.client_host, 0) + 1
        if held.get(self.client_host, 0) >= self.limits.connections_per_client_max:
            candidates = [c for c in others if c.client_host == self.client_host]
        elif len(others) >= self.limits.connections_max:
            candidates = others
        else:
            return True
        waiting = [c for c in candidates if c.stage not in (None, SERVER)]
        if not waiting:
            self.counters.refused += 1
            _limited.warning(f"{self.door}:refused", "%s: refused a connection from %s: %d connections, every "
                             "one a request being served", self.door, self.client_host, len(others))
            self._end(_plain_answer(503, "Service Unavailable", "too many requests being served; retry\n"))
            return False
        victim = min(waiting, key=lambda c: (-held[c.client_host], c.waiting_since))
        self.counters.pushed_out += 1
        _limited.warning(f"{self.door}:pushed-out", "%s: %d connections (%d from %s): closed one from %s that "
                         "waited %.1f s in its %s stage", self.door, len(others), held.get(self.client_host, 0),
                         self.client_host, victim.client_host, time.monotonic() - victim.waiting_since, victim.stage)
        victim._end(_plain_answer(503, "Service Unavailable", "too many connections; retry\n")
                    if victim._owes_an_answer() else b"")
        return True


_OWED = {HEAD: "send a whole request head", BODY: "send the request's body", DRAIN: "read the answer"}


class _UvicornWarnings(logging.Filter):
    """uvicorn warns once per malformed request ("Invalid HTTP request received."): through the rate
    limit, so a flood of junk does not become a flood of log lines; named by the door whose thread
    wrote it (one process serves the console and the metrics endpoint, each on its own thread)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING:
            return True
        door = record.threadName.removesuffix(_THREAD_SUFFIX)
        _limited.warning(f"uvicorn:{door}:{record.msg}", "%s: uvicorn: %s", door, record.getMessage())
        return False


_UVICORN_WARNINGS = _UvicornWarnings()
_THREAD_SUFFIX = "-http"


class HttpDoor:
    """``app`` (ASGI) served on ``host:port``: the socket is bound here first (a taken port fails the
    boot with "Address already in use", which the supervisor reports), uvicorn runs on a thread of
    its own with the bounds above."""

    def __init__(self, app, host: str, port: int, name: str, limits: DoorLimits = DoorLimits()):
        limits.validate()
        self.app = app
        self.host = host
        self.port = port
        self.name = name
        self.limits = limits
        self.counters = DoorCounters()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Listen and serve; OSError when the address is taken, RuntimeError when uvicorn does not start."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        logging.getLogger("uvicorn.error").addFilter(_UVICORN_WARNINGS)   # once: the same filter is not added twice
        protocol = type("BoundedH11Protocol", (BoundedH11Protocol,),
                        {"limits": self.limits, "counters": self.counters, "door": self.name})
        config = uvicorn.Config(self.app, http=protocol, ws="none", loop="asyncio", log_config=None, access_log=False,
                                lifespan="off", server_header=False, timeout_graceful_shutdown=2,
                                timeout_keep_alive=self.limits.idle_timeout_s,
                                h11_max_incomplete_event_size=self.limits.head_bytes_max)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name=f"{self.name}{_THREAD_SUFFIX}",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name}'s HTTP server did not start (see the log above)")
            time.sleep(0.01)

    def close(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5.0)
