"""A flood of connections that never prove themselves, at remoting doors (issue 30 item 8), in a
process of its own: ``python tests/remoting/flood.py run '<json spec>'``.

Per door (``{"port", "idle", "half", "declared", "half_bytes", "drip"}``): ``idle`` connections that
send nothing, from the loopback addresses ``sources`` in turn (127.0.0.2, ...: every one of
127.0.0.0/8 is this machine, so one process looks like several hosts); ``half`` that send a length word declaring ``declared`` bytes and then ``half_bytes``
of them, as fast as the door takes them; ``drip`` that declare ``declared`` bytes and send one
byte every 100 ms. A connection the door closes is opened again (at most ``reconnects_per_s``
a second over all doors, at most ``connects_max`` in all), so the flood keeps the table as full as
it can until told to stop (a line on stdin) or ``duration_s`` passes. Then it opens nothing more,
waits up to ``drain_s`` for the door to close what is left, and reports. One JSON object a line:
``{"started": ...}`` once every first connection is open, ``{"done": true, ...}`` last.
Only 127.0.0.1 is ever connected to.
"""

from __future__ import annotations

import errno
import json
import selectors
import socket
import struct
import sys
import time

DRIP_INTERVAL_S = 0.1


class Flood:
    def __init__(self, spec: dict):
        self.spec = spec
        self.selector = selectors.DefaultSelector()
        self.conns: dict[int, dict] = {}
        self.reopen: list[tuple[int, str]] = []
        self.stats = {"connects": 0, "closed_by_door": 0, "declared_bytes": 0, "sent_bytes": 0, "refused": 0}
        self.stopping = False
        self.next_source = 0
        self.selector.register(sys.stdin, selectors.EVENT_READ, "stdin")

    def open(self, door: int, kind: str) -> None:
        if self.stats["connects"] >= self.spec.get("connects_max", 100_000):
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sources = self.spec.get("sources") or ["127.0.0.1"]
        if kind == "idle":
            self.next_source += 1
            sock.bind((sources[self.next_source % len(sources)], 0))
        sock.setblocking(False)
        err = sock.connect_ex(("127.0.0.1", self.spec["doors"][door]["port"]))
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            self.stats["refused"] += 1
            self.reopen.append((door, kind))
            return
        self.stats["connects"] += 1
        conn = {"sock": sock, "door": door, "kind": kind, "out": memoryview(b""), "connected": False}
        cfg = self.spec["doors"][door]
        if kind in ("half", "drip"):
            declared = cfg["declared"]
            self.stats["declared_bytes"] += declared
            # A length word the door accepts, then a header length and junk that never ends the frame.
            head = struct.pack(">ii", declared, 0x10)
            conn["out"] = memoryview(head + b"\0" * (cfg["half_bytes"] - len(head)) if kind == "half" else head)
        self.conns[sock.fileno()] = conn
        self.selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def closed(self, conn: dict) -> None:
        self.selector.unregister(conn["sock"])
        self.conns.pop(conn["sock"].fileno(), None)
        conn["sock"].close()
        self.stats["closed_by_door"] += 1
        if not self.stopping:
            self.reopen.append((conn["door"], conn["kind"]))

    def on_event(self, conn: dict, mask: int) -> None:
        sock = conn["sock"]
        if mask & selectors.EVENT_READ:
            try:
                data = sock.recv(65536)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data == b"":
                self.closed(conn)
                return
        if mask & selectors.EVENT_WRITE:
            conn["connected"] = True
            if conn["out"]:
                try:
                    sent = sock.send(conn["out"])
                except BlockingIOError:
                    sent = 0
                except OSError:
                    self.closed(conn)
                    return
                self.stats["sent_bytes"] += sent
                conn["out"] = conn["out"][sent:]
            if not conn["out"]:
                self.selector.modify(sock, selectors.EVENT_READ, conn)

    def drip(self) -> None:
        for conn in list(self.conns.values()):
            if conn["kind"] == "drip" and conn["connected"]:
                try:
                    self.stats["sent_bytes"] += conn["sock"].send(b"\0")
                except (BlockingIOError, OSError):
                    pass

    def emit(self, **extra) -> None:
        sys.stdout.write(json.dumps({**extra, **self.stats, "open": len(self.conns)}) + "\n")
        sys.stdout.flush()

    def run(self) -> None:
        for door, cfg in enumerate(self.spec["doors"]):
            for kind in ("idle", "half", "drip"):
                for _ in range(cfg.get(kind, 0)):
                    self.open(door, kind)
        first_round = set(self.conns)   # started once each of these connected or was closed
        end = time.monotonic() + self.spec.get("duration_s", 120)
        next_drip = next_report = time.monotonic()
        budget, refilled = 0.0, time.monotonic()
        while time.monotonic() < end:
            for key, mask in self.selector.select(DRIP_INTERVAL_S / 2):
                if key.data == "stdin":
                    sys.stdin.readline()
                    end = time.monotonic()   # told to stop
                    continue
                if key.fd in self.conns:
                    self.on_event(key.data, mask)
            now = time.monotonic()
            if first_round:
                first_round = {fd for fd in first_round if fd in self.conns and not self.conns[fd]["connected"]}
                if not first_round:
                    self.emit(started=True)
            if now >= next_drip:
                self.drip()
                next_drip = now + DRIP_INTERVAL_S
            budget = min(budget + (now - refilled) * self.spec.get("reconnects_per_s", 500), 100.0)
            refilled = now
            while self.reopen and budget >= 1:
                budget -= 1
                self.open(*self.reopen.pop(0))
            if now >= next_report:
                self.emit(report=True)
                next_report = now + 1.0
        self.stopping = True
        self.reopen.clear()
        drain_end = time.monotonic() + self.spec.get("drain_s", 30)
        while self.conns and time.monotonic() < drain_end:
            for key, mask in self.selector.select(DRIP_INTERVAL_S):
                if key.data != "stdin" and key.fd in self.conns:
                    self.on_event(key.data, mask)
            self.drip()
        self.emit(done=True, still_open=len(self.conns))


if __name__ == "__main__":
    Flood(json.loads(sys.argv[2])).run()
