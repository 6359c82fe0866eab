"""A flood of connections that never prove themselves, at remoting doors, in a
process of its own (``flood_process``: ``python tests/door_flood.py run '<json spec>'``).

Per door (``{"port", "idle", "half", "declared", "half_bytes", "drip"}``): ``idle`` connections that
send nothing; ``half`` that send a length word declaring ``declared`` bytes and then ``half_bytes``
of them, as fast as the door takes them; ``drip`` that declare ``declared`` bytes and send one
byte every 100 ms. A door with ``"zmtp": true`` is a native (ZeroMQ) one: there the half and
dripping frames follow a ZMTP 3.0 greeting and READY (NULL mechanism), as a DEALER's would, and
are ZMTP long frames; idle connections send not even the greeting. Idle connections come from the loopback addresses ``sources`` in turn (every
address of 127.0.0.0/8 is this machine: one process looks like several hosts). A connection the
door closes is opened again (at most ``reconnects_per_s`` a second over all doors, at most
``connects_max`` in all), so the flood keeps the table as full as it can until told to stop (a
line on stdin, or its end) or ``duration_s`` passes. Then it opens nothing more, waits up to
``drain_s`` for the doors to close what is left, and reports. One JSON object a line:
``{"started": true, ...}`` once every first connection opened or was closed, a report a second,
``{"done": true, ...}`` last.
Only 127.0.0.1 is ever connected to (from 127.0.0.x).
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


def zmtp_opening(declared: int) -> bytes:
    """A ZMTP 3.0 peer's first bytes (greeting, READY as a DEALER, NULL mechanism), then the head
    of a long frame of ``declared`` bytes (rfc.zeromq.org/spec/23)."""
    greeting = b"\xff" + bytes(8) + b"\x7f" + bytes([3, 0]) + b"NULL".ljust(20, b"\0") + bytes(32)
    ready = b"\x05READY" + bytes([11]) + b"Socket-Type" + struct.pack(">I", 6) + b"DEALER"
    return greeting + bytes([0x04, len(ready)]) + ready + b"\x02" + struct.pack(">Q", declared)


class PeakRss:
    """The largest resident size each process reached while sampled (every 100 ms, on a thread)."""

    def __init__(self, pids: dict[str, int]):
        import threading

        import psutil
        self._error = psutil.Error
        self.processes = {name: psutil.Process(pid) for name, pid in pids.items()}
        self.baseline = {name: p.memory_info().rss for name, p in self.processes.items()}
        self.peak = dict(self.baseline)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            try:
                for name, process in self.processes.items():
                    self.peak[name] = max(self.peak[name], process.memory_info().rss)
            except self._error:   # the cluster stopped (a failed test's teardown)
                return

    def now(self) -> dict[str, int]:
        """Each process's resident size now, above its baseline."""
        return {name: p.memory_info().rss - self.baseline[name] for name, p in self.processes.items()}

    def growth(self) -> dict[str, int]:
        """The peak above the baseline; sampling ends."""
        self._stop.set()
        self._thread.join(5)
        return {name: self.peak[name] - self.baseline[name] for name in self.processes}


class Flood:
    def __init__(self, spec: dict):
        self.spec = spec
        self.selector = selectors.DefaultSelector()
        self.conns: dict[int, dict] = {}
        self.reopen: list[tuple[int, str]] = []
        self.stats = {"connects": 0, "closed_by_door": 0, "declared_bytes": 0, "sent_bytes": 0, "refused": 0,
                      "lived_max_s": {}}   # kind -> the longest a connection of it lived before the door closed it
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
        conn = {"sock": sock, "door": door, "kind": kind, "out": memoryview(b""), "connected": False,
                "opened": time.monotonic()}
        cfg = self.spec["doors"][door]
        if kind in ("half", "drip"):
            declared = cfg["declared"]
            self.stats["declared_bytes"] += declared
            # A length word the door accepts, then a header length and junk that never ends the frame.
            head = zmtp_opening(declared) if cfg.get("zmtp") else struct.pack(">ii", declared, 0x10)
            conn["out"] = memoryview(head + b"\0" * (cfg["half_bytes"] - len(head)) if kind == "half" else head)
        self.conns[sock.fileno()] = conn
        self.selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def closed(self, conn: dict) -> None:
        self.selector.unregister(conn["sock"])
        self.conns.pop(conn["sock"].fileno(), None)
        conn["sock"].close()
        self.stats["closed_by_door"] += 1
        if conn["connected"]:
            lived = self.stats["lived_max_s"]
            lived[conn["kind"]] = round(max(lived.get(conn["kind"], 0), time.monotonic() - conn["opened"]), 2)
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
            if not conn["connected"]:
                conn["connected"], conn["opened"] = True, time.monotonic()
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
        # Connections still waiting for the door to accept them (its backlog was full) are not its to close.
        waiting = [c for c in self.conns.values() if not c["connected"]]
        for conn in waiting:
            self.selector.unregister(conn["sock"])
            conn["sock"].close()
        self.emit(done=True, still_open=len(self.conns) - len(waiting), never_accepted=len(waiting))


def flood_process(spec: dict, home):
    """The flood as a child process of the test (its JSON lines collected as they come)."""
    import pathlib

    from tests.child_driver import DriverProcess
    process = DriverProcess(pathlib.Path(sys.executable), pathlib.Path(__file__), "run", spec, home)
    process.label = "flood"
    return process


if __name__ == "__main__":
    Flood(json.loads(sys.argv[2])).run()
