"""Redis Streams (Debian ``redis-server``) through redis-py with hiredis: pipelining and consumer groups.

The server: ``--bind 127.0.0.1 --port P --save '' --appendonly no`` (no persistence: Redis
keeps the stream in memory), its directory in the run's temporary directory.

Batching, each the client's best measured here:

- produce: ``BATCH_SIZE`` (256) XADDs a round trip, pipelined on one connection per producer
  thread (as many threads as our producer, ``--producer-threads``). The pipeline is packed and
  read with the connection's own ``pack_commands`` / ``send_packed_command`` /
  ``read_response``: what ``Pipeline.execute`` does, without its per-command bookkeeping
  (~220k msg/s through ``Pipeline``, ~300k this way, on this 2-core machine);
- consume: ``XREADGROUP COUNT 1024 BLOCK 100`` with the previous batch's ``XACK`` (all its ids
  in one command) pipelined in front of it, one consumer;
- publish latency: one ``XADD`` a round trip; paced: each tick's due messages in one pipeline.
"""

from __future__ import annotations

import threading
import time

from rocketbox.perf.harness import BATCH_SIZE, message_body, split_evenly
from rocketbox.perf.peers.base import BODY_BYTES, GROUP, Peer, PeerClient, paced_batches

READ_COUNT = 1024
BLOCK_MS = 100
FIELD = b"b"


class RedisStreamsClient(PeerClient):
    def __init__(self, port: int):
        import redis
        self.port = port
        self._redis = redis
        self.conn = self._connection()

    def _connection(self):
        conn = self._redis.Connection(host="127.0.0.1", port=self.port, protocol=2, socket_timeout=30,
                                      socket_connect_timeout=5)
        conn.connect()
        return conn

    @staticmethod
    def _pipeline(conn, commands: list) -> list:
        """One round trip: every command sent, then every reply read (an error reply raises)."""
        conn.send_packed_command(conn.pack_commands(commands))
        return [conn.read_response() for _ in commands]

    def setup(self, stream: str) -> None:
        self._pipeline(self.conn, [("XGROUP", "CREATE", stream, GROUP, "0", "MKSTREAM")])

    def produce(self, stream: str, total: int, threads: int, deadline: float) -> int:
        body = message_body(BODY_BYTES)
        shares = split_evenly(total, threads)
        sent = [0] * threads
        errors: list[BaseException] = []
        conns = [self._connection() for _ in range(threads)]

        def work(i: int) -> None:
            try:
                while sent[i] < shares[i] and time.monotonic() < deadline:
                    k = min(BATCH_SIZE, shares[i] - sent[i])
                    self._pipeline(conns[i], [("XADD", stream, "*", FIELD, body)] * k)
                    sent[i] += k
            except BaseException as exc:  # noqa: BLE001 - raised below
                errors.append(exc)

        workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
        try:
            for w in workers:
                w.start()
            for w in workers:
                w.join(max(0.0, deadline - time.monotonic()) + 30)
        finally:
            for conn in conns:
                conn.disconnect()
        if errors:
            raise RuntimeError(f"XADD failed: {errors[0]!r}") from errors[0]
        return sum(sent)

    def publish_latencies(self, stream: str, count: int, deadline: float) -> list[float]:
        body = message_body(BODY_BYTES)
        lat = []
        for _ in range(count):
            if time.monotonic() >= deadline:
                break
            t0 = time.perf_counter()
            self._pipeline(self.conn, [("XADD", stream, "*", FIELD, body)])
            lat.append((time.perf_counter() - t0) * 1e6)
        return lat

    def consume(self, stream, tally, stop, deadline) -> None:
        read = ("XREADGROUP", "GROUP", GROUP, "consumer", "COUNT", READ_COUNT, "BLOCK", BLOCK_MS, "STREAMS",
                stream, ">")
        ids: list[bytes] = []
        while not (tally.reached.is_set() or stop.is_set()) and time.monotonic() < deadline:
            reply = self._pipeline(self.conn, ([("XACK", stream, GROUP, *ids)] if ids else []) + [read])[-1]
            entries = reply[0][1] if reply else []
            ids = [entry[0] for entry in entries]
            # An entry is [id, [field, value]]: the body is the value.
            tally.add(len(entries), [entry[1][1] for entry in entries])
        if ids:
            self._pipeline(self.conn, [("XACK", stream, GROUP, *ids)])

    def paced(self, stream, total, rate, time_s_max) -> dict:
        return paced_batches(lambda bodies: self._pipeline(self.conn, [("XADD", stream, "*", FIELD, b)
                                                                       for b in bodies]),
                             total, rate, time_s_max)

    def close(self) -> None:
        self.conn.disconnect()


class RedisStreams(Peer):
    name = "redis_streams"
    label = "Redis Streams"
    binary = "redis-server"
    client_module = "redis"
    client_package = "redis"
    client_class = RedisStreamsClient
    probe_send, probe_expect = b"PING\r\n", b"+PONG"

    def server_argv(self, binary: str, port: int, data_dir: str) -> list[str]:
        return [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
                "--dir", data_dir, "--daemonize", "no", "--loglevel", "warning"]

    def describe(self) -> str:
        import redis
        from redis.utils import HIREDIS_AVAILABLE
        version = self.server_version().split(" v=")[-1].split()[0]
        return (f"redis-server {version}, no persistence; redis-py {redis.__version__}"
                f"{' with hiredis' if HIREDIS_AVAILABLE else ''}: XADD pipelined {BATCH_SIZE} a round trip, "
                f"XREADGROUP COUNT {READ_COUNT} with XACK pipelined")
