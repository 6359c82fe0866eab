"""Who keeps a place at a remoting door, and how many bytes of unfinished frames it may hold there.

Pure bookkeeping (no sockets, no clock of its own: callers pass ``now``); ``remoting_transport``
asks it at accept, after each read, when a request proves its connection, and once a second.

A connection is *unproven* until it sent a complete request that counts: with access control one
the guard let through (``Command.access_granted``), without it any complete request the process
serves (a known request code). Until then it is a stranger, and strangers are cheap to drop:

- it has ``unproven_timeout_s`` (10 s) from its accept to prove itself, however it spends them
  (silent, dripping a byte a second, or holding half a frame);
- one host holds at most ``unproven_per_host_max`` unproven connections; a newcomer over that
  takes the place of that host's unproven connection idle longest;
- when the table is full (``connections_max``) a newcomer takes the place of the unproven
  connection idle longest, else of a proven one with no request unanswered and quiet for
  ``proven_quiet_s`` (10 s), else it is refused: a proven connection in use is never dropped;
- the bytes buffered in unfinished frames are bounded twice: ``unproven_bytes_max`` (64 MiB) over
  every unproven connection, ``buffered_bytes_max`` (256 MiB) over all; past either, the
  connection whose unfinished frame is oldest (of the unproven, for the first) is dropped.

Why eviction, never a per-address cap alone: on loopback every peer is 127.0.0.1, so a cap that
refuses newcomers would refuse the legitimate client with the attacker. A stranger's connection
lives at most ``unproven_timeout_s`` and is dropped before any proven one, and a real client proves
its connection with its first request (sent at once, whole within milliseconds on loopback), so
an attacker slows the door down but cannot lock a client out. Frames from strangers are not held
to a small size: a RocketMQ producer's first request on a broker connection is often SEND_MESSAGE
with a body up to 4 MiB (its heartbeat only follows once it has routes), and a registration's first
frame can be larger; the byte budgets bound them instead. Without access control a peer that keeps
thousands of connections busy with valid requests is a client by every test a door can make.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Iterator

MIB = 1024 * 1024

# Why a connection was dropped (the door's counters, by kind).
EVICTED_HOST_CAP = "unprovenPerHost"
EVICTED_TABLE_FULL = "tableFull"
EVICTED_BYTES = "bufferedBytes"
EVICTED_DEADLINE = "unprovenTimeout"


@dataclass(frozen=True)
class AdmissionLimits:
    connections_max: int = 4096
    unproven_timeout_s: float = 10.0
    unproven_bytes_max: int = 64 * MIB
    buffered_bytes_max: int = 256 * MIB
    # 0: a quarter of the table.
    unproven_per_host_max: int = 0
    proven_quiet_s: float = 10.0

    @classmethod
    def of(cls, cfg) -> "AdmissionLimits":
        """The limits a NamesrvConfig's or BrokerConfig's ``remoting_*`` settings name."""
        return cls(connections_max=cfg.remoting_connections_max,
                   unproven_timeout_s=cfg.remoting_unproven_timeout_ms / 1000,
                   unproven_bytes_max=cfg.remoting_unproven_bytes_max,
                   buffered_bytes_max=cfg.remoting_buffered_bytes_max)

    @property
    def per_host_max(self) -> int:
        return self.unproven_per_host_max or max(1, self.connections_max // 4)


class Place:
    """One connection's place at the door. ``owner`` is the door's key for the connection (its peer
    key: not the connection object, which holds its place: no reference cycle keeps a dropped
    connection's buffers alive until a garbage collection); ``last_active`` and ``unanswered`` are
    kept by the door (a read or an answer; requests taken and not yet answered: a parked pull is
    a connection in use)."""

    __slots__ = ("owner", "host", "accepted_at", "last_active", "proven", "held", "unanswered", "present")

    def __init__(self, owner, host: str, now: float):
        self.owner = owner
        self.host = host
        self.accepted_at = now
        self.last_active = now
        self.proven = False
        self.held = 0   # bytes of an unfinished frame buffered for it
        self.unanswered = 0
        self.present = True


class Admission:
    def __init__(self, limits: AdmissionLimits = AdmissionLimits()):
        self.limits = limits
        self._count = 0
        # Unproven places: in accept order (deadlines), idle-longest first (eviction), per host (its cap).
        self._unproven_by_age: dict[Place, None] = {}
        self._unproven_idle: collections.OrderedDict[Place, None] = collections.OrderedDict()
        self._unproven_by_host: dict[str, collections.OrderedDict[Place, None]] = {}
        self._proven: dict[Place, None] = {}
        # Places holding part of a frame, oldest unfinished frame first.
        self._holding: collections.OrderedDict[Place, None] = collections.OrderedDict()
        self.unproven_bytes = 0
        self.buffered_bytes = 0
        self.evicted: collections.Counter = collections.Counter()
        self._no_quiet_proven_until = 0.0

    def __len__(self) -> int:
        return self._count

    # ------------------------------------------------------------ changes

    def admit(self, owner, host: str, now: float) -> tuple[Place | None, list[Place]]:
        """A place for a connection just accepted (None: refused, every place is in use) and the
        places it takes (their connections are to be closed; they have left already)."""
        victims = []
        same_host = self._unproven_by_host.get(host)
        if same_host is not None and len(same_host) >= self.limits.per_host_max:
            victims.append(self._evict(next(iter(same_host)), EVICTED_HOST_CAP))
        if self._count >= self.limits.connections_max:
            victim = next(iter(self._unproven_idle), None) or self._quiet_proven(now)
            if victim is None:
                return None, victims
            victims.append(self._evict(victim, EVICTED_TABLE_FULL))
        place = Place(owner, host, now)
        self._count += 1
        self._unproven_by_age[place] = None
        self._unproven_idle[place] = None
        self._unproven_by_host.setdefault(host, collections.OrderedDict())[place] = None
        return place, victims

    def active(self, place: Place, now: float) -> None:
        """Bytes arrived for ``place``."""
        place.last_active = now
        if not place.proven and place.present:
            self._unproven_idle.move_to_end(place)
            self._unproven_by_host[place.host].move_to_end(place)

    def prove(self, place: Place) -> None:
        if place.proven or not place.present:
            return
        self._forget_unproven(place)
        place.proven = True
        self._proven[place] = None
        self.unproven_bytes -= place.held

    def holding(self, place: Place, held: int, frame_done: bool) -> list[Place]:
        """``place`` now buffers ``held`` bytes of an unfinished frame (``frame_done``: a frame
        was completed since the last call, so what it holds now is a new frame). The places to drop
        to keep within both budgets; ``place`` itself may be one."""
        if held == place.held and (held == 0 or not frame_done) or not place.present:
            return []   # the common case: whole frames only, nothing held before or after
        delta = held - place.held
        place.held = held
        self.buffered_bytes += delta
        if not place.proven:
            self.unproven_bytes += delta
        if held == 0:
            self._holding.pop(place, None)
        elif frame_done or place not in self._holding:
            self._holding[place] = None
            self._holding.move_to_end(place)
        victims = []
        while self.unproven_bytes > self.limits.unproven_bytes_max:
            victims.append(self._evict(next(p for p in self._holding if not p.proven), EVICTED_BYTES))
        while self.buffered_bytes > self.limits.buffered_bytes_max:
            victims.append(self._evict(next(iter(self._holding)), EVICTED_BYTES))
        return victims

    def overdue(self, now: float) -> list[Place]:
        """Unproven places past their deadline (they have left)."""
        deadline = now - self.limits.unproven_timeout_s
        late = []
        for place in self._unproven_by_age:
            if place.accepted_at > deadline:
                break
            late.append(place)
        return [self._evict(place, EVICTED_DEADLINE) for place in late]

    def leave(self, place: Place) -> None:
        """The connection closed (idempotent)."""
        if not place.present:
            return
        place.present = False
        self._count -= 1
        if place.proven:
            self._proven.pop(place, None)
        else:
            self._forget_unproven(place)
            self.unproven_bytes -= place.held
        self.buffered_bytes -= place.held
        self._holding.pop(place, None)

    # ------------------------------------------------------------ choices

    def _evict(self, place: Place, why: str) -> Place:
        self.evicted[why] += 1
        self.leave(place)
        return place

    def _quiet_proven(self, now: float) -> Place | None:
        """The proven place quiet longest, if quiet for ``proven_quiet_s`` with nothing unanswered.
        A full scan, so a table full of busy connections is not rescanned on every accept."""
        if now < self._no_quiet_proven_until:
            return None
        quiet = [p for p in self._proven if p.unanswered == 0 and now - p.last_active >= self.limits.proven_quiet_s]
        if not quiet:
            self._no_quiet_proven_until = now + 0.5
            return None
        return min(quiet, key=lambda p: p.last_active)

    def _forget_unproven(self, place: Place) -> None:
        self._unproven_by_age.pop(place, None)
        self._unproven_idle.pop(place, None)
        same_host = self._unproven_by_host.get(place.host)
        if same_host is not None:
            same_host.pop(place, None)
            if not same_host:
                del self._unproven_by_host[place.host]

    def places(self) -> Iterator[Place]:
        yield from self._unproven_by_age
        yield from self._proven

    def info(self) -> dict:
        return {"unprovenConnections": len(self._unproven_by_age), "unprovenBytes": self.unproven_bytes,
                "bufferedBytes": self.buffered_bytes, "connectionsEvicted": dict(self.evicted)}
