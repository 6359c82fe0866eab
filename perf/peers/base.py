"""What every peer provides, and the measures run on each, the same as ours (perf/scenarios/).

A peer (``Peer``) knows its server binary, its Python client and how to start the server on
a free 127.0.0.1 port in a temporary directory; ``missing()`` says why it cannot run (binary
or client not installed). Its client (``PeerClient``) does five things with that client's best
batching: create a stream with a consumer group, produce ``total`` messages, time single
publishes that wait for their ack, consume (and acknowledge) until told to stop, and produce
at a fixed rate with stamped bodies (``Pacer``). ``measure`` runs the comparison's measures on
one peer with the same sizes, counts and process layout as ours: the consumer in this process,
the producer of the end-to-end runs in a spawned process.

Every loop is bounded by a count and by a deadline; servers are stopped in ``finally``
(terminate, then kill).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import threading
import time
from collections import defaultdict
from contextlib import contextmanager

from rocketbox.cluster.topology import free_ports
from rocketbox.perf.harness import BATCH_SIZE, PACED_RATE_MSG_S, ChildProcess, Pacer, Settings, Tally, serve_parent
from rocketbox.perf.report import percentile

BODY_BYTES = 100
READY_S_MAX = 15.0
STOP_S_MAX = 5.0
GROUP = "bench"
# Where Debian puts server binaries that a non-root PATH may lack (nats-server is in /usr/sbin).
EXTRA_BIN_DIRS = ("/usr/sbin", "/usr/local/sbin", "/sbin")


def find_binary(name: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *EXTRA_BIN_DIRS])
    return shutil.which(name, path=path)


def tcp_probe(port: int, send: bytes, expect: bytes) -> bool:
    """Connect to 127.0.0.1:``port``, send ``send``, and see whether the first answer holds ``expect``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            if send:
                sock.sendall(send)
            return expect in sock.recv(65536)
    except OSError:
        return False


class PeerClient:
    """One connection (or a few) to a peer's server, in one process. See the module docstring."""

    def setup(self, stream: str) -> None:
        """Create ``stream`` and its consumer group ``GROUP``, reading from the beginning."""
        raise NotImplementedError

    def produce(self, stream: str, total: int, threads: int, deadline: float) -> int:
        """Send ``total`` ``BODY_BYTES`` bodies, batched, every ack awaited; how many were acked."""
        raise NotImplementedError

    def publish_latencies(self, stream: str, count: int, deadline: float) -> list[float]:
        """``count`` single publishes, each waiting for its ack: microseconds each."""
        raise NotImplementedError

    def consume(self, stream: str, tally: Tally, stop: threading.Event, deadline: float) -> None:
        """Read and acknowledge batches of ``GROUP`` into ``tally`` until it is reached, ``stop`` or the deadline."""
        raise NotImplementedError

    def paced(self, stream: str, total: int, rate: int, time_s_max: float) -> dict:
        """``total`` stamped bodies at ``rate`` msg/s (``Pacer``); {"sent", "elapsed_s", "failed"}."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class Peer:
    """A system users would pick instead of ours; subclasses fill in the class attributes and two methods."""

    name = ""             # key in perf.peers.PEERS and in compare.json
    label = ""            # column title
    binary = ""           # server executable
    client_module = ""    # the Python client's import name
    client_package = ""   # and its PyPI name
    client_class = PeerClient
    probe_send = b""      # the server is ready once it answers this
    probe_expect = b""    # with this

    def missing(self) -> str | None:
        """Why this peer cannot be measured here (not installed), or None."""
        if not find_binary(self.binary):
            return f"{self.binary} not found on PATH or in {', '.join(EXTRA_BIN_DIRS)}"
        if importlib.util.find_spec(self.client_module) is None:
            return f"Python package {self.client_package} not installed in this interpreter"
        return None

    def server_argv(self, binary: str, port: int, data_dir: str) -> list[str]:
        raise NotImplementedError

    def probe(self, port: int) -> bool:
        """True once the server answers on ``port``."""
        return tcp_probe(port, self.probe_send, self.probe_expect)

    def client(self, port: int) -> PeerClient:
        return self.client_class(port)

    def describe(self) -> str:
        """Server version and how the client batches, for the report."""
        raise NotImplementedError

    def server_version(self) -> str:
        """What ``binary --version`` prints."""
        return subprocess.run([find_binary(self.binary), "--version"], capture_output=True, text=True,
                              timeout=10).stdout.strip()

    @contextmanager
    def server(self, tmp: str):
        """The server on a free 127.0.0.1 port with its data in a directory under ``tmp``; yields the port."""
        data_dir = os.path.join(tmp, self.name)
        os.makedirs(data_dir, exist_ok=True)
        port = free_ports(1)[0]
        log_path = os.path.join(data_dir, "server.log")
        with open(log_path, "wb") as log:
            process = subprocess.Popen(self.server_argv(find_binary(self.binary), port, data_dir), cwd=data_dir,
                                       stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + READY_S_MAX
            while not self.probe(port):
                if process.poll() is not None or time.monotonic() >= deadline:
                    with open(log_path, "rb") as f:
                        tail = f.read()[-2000:].decode(errors="replace")
                    state = f"exited {process.returncode}" if process.poll() is not None else "not ready"
                    raise RuntimeError(f"{self.binary} {state} within {READY_S_MAX} s: {tail}")
                time.sleep(0.02)
            yield port
        finally:
            stop_process(process)


def stop_process(process: subprocess.Popen) -> None:
    """Terminate, then kill if it is still there after ``STOP_S_MAX``."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_S_MAX)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_S_MAX)


# ---------------------------------------------------------------- the measures

def _producer_child(conn, peer_class: type, port: int, stream: str, mode: str, total: int, threads: int,
                    rate: int, time_s_max: float) -> None:
    """A peer's producer in a spawned process: ``batched`` (``produce``) or ``paced``; ``serve_parent`` protocol."""
    try:
        client = peer_class().client(port)
        try:
            if mode == "batched":
                def batched() -> dict:
                    t0 = time.perf_counter()
                    sent = client.produce(stream, total, threads, time.monotonic() + time_s_max)
                    return {"sent": sent, "elapsed_s": time.perf_counter() - t0}
                serve_parent(conn, batched)
            else:
                serve_parent(conn, lambda: client.paced(stream, total, rate, time_s_max))
        finally:
            client.close()
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def _consume_while_producing(peer: Peer, port: int, stream: str, mode: str, total: int, s: Settings,
                             rate: int = 0) -> tuple[Tally, dict, float]:
    """A producer process sends ``total`` while a consumer thread here reads; (tally, producer result, seconds).

    The seconds run from "go" to the last message consumed, as in ours (``scenario_e2e``).
    """
    time_s_max = s.paced_s * 3 if mode == "paced" else s.measure_s_max
    tally = Tally(total, stamped=mode == "paced")
    stop = threading.Event()
    errors: list[BaseException] = []

    def consume() -> None:
        client = peer.client(port)
        try:
            client.consume(stream, tally, stop, time.monotonic() + time_s_max + 60)
        except BaseException as exc:  # noqa: BLE001 - raised below
            errors.append(exc)
        finally:
            client.close()

    consumer = threading.Thread(target=consume, name=f"{peer.name}-consumer", daemon=True)
    consumer.start()
    producer = ChildProcess(_producer_child, (type(peer), port, stream, mode, total, s.producer_threads, rate,
                                              time_s_max), f"{peer.name}-producer-{mode}", time_s_max)
    try:
        producer.start()
        t0 = time.perf_counter()
        producer.go()
        result = producer.result()
        tally.retarget(result["sent"] - result.get("failed", 0))
        tally.reached.wait(30 if mode == "paced" else s.measure_s_max)
        elapsed = tally.last_s - t0
    finally:
        stop.set()
        producer.stop()
        consumer.join(30)
    if errors:
        raise RuntimeError(f"{peer.label} consumer failed: {errors[0]!r}") from errors[0]
    if tally.count < tally.target:
        raise RuntimeError(f"{peer.label}: consumed {tally.count} of {tally.target}")
    return tally, result, elapsed


def measure(peer: Peer, s: Settings, tmp: str) -> dict[str, list[float]]:
    """The comparison's measures on ``peer`` (keys of perf.compare.MEASURES), ``s.runs`` values each."""
    values: dict[str, list[float]] = defaultdict(list)
    paced_total = int(PACED_RATE_MSG_S * s.paced_s)
    with peer.server(tmp) as port:
        client = peer.client(port)
        try:
            for run in range(s.runs):
                # produce, batched; then drain that pre-filled stream with the consumer group
                stream = f"produce{run}"
                client.setup(stream)
                t0 = time.perf_counter()
                sent = client.produce(stream, s.messages, s.producer_threads, time.monotonic() + s.measure_s_max)
                values["produce"].append(sent / (time.perf_counter() - t0))
                tally = Tally(sent)
                t0 = time.perf_counter()
                client.consume(stream, tally, threading.Event(), time.monotonic() + s.measure_s_max)
                if tally.count < sent:
                    raise RuntimeError(f"{peer.label}: drained {tally.count} of {sent}")
                values["consume"].append(tally.count / (tally.last_s - t0))
                # produce and consume at once
                stream = f"e2e{run}"
                client.setup(stream)
                tally, _, elapsed = _consume_while_producing(peer, port, stream, "batched", s.messages, s)
                values["e2e"].append(tally.count / elapsed)
                # single publishes, each waiting for its ack (200 warm-up, as ours)
                stream = f"latency{run}"
                client.setup(stream)
                client.publish_latencies(stream, 200, time.monotonic() + s.measure_s_max)
                lat = client.publish_latencies(stream, s.latency_sends(), time.monotonic() + s.measure_s_max)
                values["publish_p50"].append(percentile(lat, 0.50))
                values["publish_p99"].append(percentile(lat, 0.99))
                # end to end at a fixed rate: receive - send of stamped bodies
                stream = f"paced{run}"
                client.setup(stream)
                tally, result, _ = _consume_while_producing(peer, port, stream, "paced", paced_total, s,
                                                            rate=PACED_RATE_MSG_S)
                lat = tally.steady_latencies(paced_total)
                values["e2e_p50"].append(percentile(lat, 0.50))
                values["e2e_p99"].append(percentile(lat, 0.99))
                values["paced_rate"].append(result["sent"] / result["elapsed_s"])
        finally:
            client.close()
    return dict(values)


def paced_batches(client_send, total: int, rate: int, time_s_max: float, per_call: int = BATCH_SIZE) -> dict:
    """A blocking paced producer: ``client_send(bodies)`` for each tick's due bodies (``per_call`` at most)."""
    pacer = Pacer(total, rate, time_s_max)
    while not pacer.done():
        bodies = pacer.take(per_call, BODY_BYTES)
        if bodies:
            client_send(bodies)
        else:
            time.sleep(pacer.wait_s())
    return {"sent": pacer.sent, "elapsed_s": pacer.elapsed_s(), "failed": 0}
