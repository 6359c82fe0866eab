"""NATS JetStream (Debian ``nats-server``) through nats-py (asyncio, one event loop a client).

The server: ``nats-server -js -a 127.0.0.1 -p P --store_dir TMP``: file storage, as JetStream
does by default (written to the page cache, synced every two minutes: like our async flush).
A stream per run with one subject, and a durable pull consumer with ``AckPolicy.ALL`` (acking
a message acks every one before it: JetStream's batch acknowledgement).

Batching, each the client's best measured here. nats-py's own helpers do per-message work in
Python that dominates at these rates (``js.publish_async``: a future, a semaphore wait and a
token each, ~44k msg/s here; ``fetch``: a timed queue wait each, ~45k msg/s), so the bulk paths
use nats-py's core API the way the JetStream wire protocol and the Go client do:

- produce: every message published with one reply subject on which a subscription counts the
  PubAcks (``js.publish_async`` without the per-message future), up to ``WINDOW`` acks in
  flight; ~3x ``publish_async`` here;
- consume: pull requests of ``PULL_BATCH`` on ``$JS.API.CONSUMER.MSG.NEXT``, two in flight,
  a new one as each ends; the last message of each acknowledged (``+ACK``), ~6x ``fetch``;
- publish latency: ``js.publish`` (request, wait for the PubAck); paced: each tick's due
  messages published at once, acks counted as above.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time

from rocketbox.perf.harness import BATCH_SIZE, Pacer, message_body
from rocketbox.perf.peers.base import BODY_BYTES, GROUP, Peer, PeerClient

WINDOW = 4096              # PubAcks in flight at most
PULL_BATCH = 2048          # messages a pull request
PULLS_IN_FLIGHT = 2
PULL_EXPIRES_NS = 1_000_000_000  # a pull request waits at most this long for messages
PENDING_BYTES = 64 * 2**20       # client-side buffer of outgoing data


async def _quiet(_error) -> None:
    """nats-py prints every connection error by default; the runner reports failures itself."""


class NatsJetStreamClient(PeerClient):
    def __init__(self, port: int):
        import nats
        self.loop = asyncio.new_event_loop()
        self.nc = self._run(nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False, connect_timeout=5,
                                         error_cb=_quiet, pending_size=PENDING_BYTES))
        self.js = self.nc.jetstream(timeout=10)

    def _run(self, coro):
        return self.loop.run_until_complete(coro)

    def setup(self, stream: str) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType

        async def create() -> None:
            await self.js.add_stream(name=stream, subjects=[stream], storage=StorageType.FILE)
            await self.js.add_consumer(stream, ConsumerConfig(durable_name=GROUP, ack_policy=AckPolicy.ALL,
                                                              deliver_policy=DeliverPolicy.ALL,
                                                              max_ack_pending=-1))
        self._run(create())

    async def _publish(self, subject: str, deadline: float, total: int = 0,
                       pacer: Pacer | None = None) -> tuple[int, int, float]:
        """``total`` bodies in batches, or the ``pacer``'s due ones; (acked, failed, seconds of publishing).

        Every publish carries the one ack subject as its reply; at most ``WINDOW`` acks in flight;
        returns once every ack is in (or at the deadline).
        """
        body = message_body(BODY_BYTES)
        inbox = self.nc.new_inbox()
        state = {"sent": 0, "acked": 0, "failed": 0}
        room = asyncio.Event()

        async def on_ack(msg) -> None:
            state["acked"] += 1
            if b'"error"' in msg.data:
                state["failed"] += 1
            if state["sent"] - state["acked"] <= WINDOW // 2:
                room.set()

        async def wait_room(limit: int) -> None:
            while state["sent"] - state["acked"] > limit and time.monotonic() < deadline + 10:
                room.clear()
                try:
                    await asyncio.wait_for(room.wait(), 0.1)
                except asyncio.TimeoutError:
                    pass

        sub = await self.nc.subscribe(inbox, cb=on_ack, pending_msgs_limit=4 * WINDOW)
        t0 = time.perf_counter()
        try:
            while time.monotonic() < deadline:
                if pacer is None:
                    if state["sent"] >= total:
                        break
                    bodies = [body] * min(BATCH_SIZE, total - state["sent"])
                else:
                    if pacer.done():
                        break
                    bodies = pacer.take(BATCH_SIZE, BODY_BYTES)
                    if not bodies:
                        await asyncio.sleep(pacer.wait_s())
                        continue
                await wait_room(WINDOW - len(bodies))
                for b in bodies:
                    await self.nc.publish(subject, b, reply=inbox)
                state["sent"] += len(bodies)
            publishing_s = time.perf_counter() - t0
            await self.nc.flush()
            await wait_room(0)
        finally:
            await sub.unsubscribe()
        return state["acked"], state["failed"], publishing_s

    def produce(self, stream: str, total: int, threads: int, deadline: float) -> int:
        acked, failed, _ = self._run(self._publish(stream, deadline, total=total))
        if failed:
            raise RuntimeError(f"{failed} publishes refused")
        return acked

    def publish_latencies(self, stream: str, count: int, deadline: float) -> list[float]:
        async def measure() -> list[float]:
            body = message_body(BODY_BYTES)
            lat = []
            for _ in range(count):
                if time.monotonic() >= deadline:
                    break
                t0 = time.perf_counter()
                await self.js.publish(stream, body)
                lat.append((time.perf_counter() - t0) * 1e6)
            return lat
        return self._run(measure())

    def consume(self, stream, tally, stop, deadline) -> None:
        self._run(self._pull(stream, tally, stop, deadline))

    async def _pull(self, stream, tally, stop, deadline) -> None:
        prefix = self.nc.new_inbox()
        next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{GROUP}"
        request = json.dumps({"batch": PULL_BATCH, "expires": PULL_EXPIRES_NS}).encode()
        received: dict[str, int] = {}  # open pull request (its reply subject) -> messages so far
        numbers = itertools.count()
        last = {"reply": None}

        def finished() -> bool:
            return tally.reached.is_set() or stop.is_set() or time.monotonic() >= deadline

        async def pull() -> None:
            reply = f"{prefix}.{next(numbers)}"
            received[reply] = 0
            await self.nc.publish(next_subject, request, reply=reply)

        async def ack() -> None:
            if last["reply"]:
                await self.nc.publish(last["reply"], b"+ACK")
                last["reply"] = None

        async def on_message(msg) -> None:
            if not msg.data and msg.headers and msg.headers.get("Status"):
                ended = True  # 404 no messages, 408 expired, 409: this request is over
            else:
                tally.add(1, (msg.data,))
                last["reply"] = msg.reply
                received[msg.subject] = received.get(msg.subject, 0) + 1
                ended = received[msg.subject] >= PULL_BATCH
            if ended:
                received.pop(msg.subject, None)
                await ack()
                if not finished():
                    await pull()

        sub = await self.nc.subscribe(f"{prefix}.*", cb=on_message, pending_msgs_limit=4 * PULL_BATCH * PULLS_IN_FLIGHT)
        try:
            for _ in range(PULLS_IN_FLIGHT):
                await pull()
            while not finished():
                await asyncio.sleep(0.002)
        finally:
            await sub.unsubscribe()
            await ack()
            await self.nc.flush()

    def paced(self, stream, total, rate, time_s_max) -> dict:
        pacer = Pacer(total, rate, time_s_max)
        _, failed, publishing_s = self._run(self._publish(stream, time.monotonic() + time_s_max + 1, pacer=pacer))
        return {"sent": pacer.sent, "elapsed_s": publishing_s, "failed": failed}

    def close(self) -> None:
        try:
            self._run(self.nc.close())
        finally:
            self.loop.close()


class NatsJetStream(Peer):
    name = "nats_jetstream"
    label = "NATS JetStream"
    binary = "nats-server"
    client_module = "nats"
    client_package = "nats-py"
    client_class = NatsJetStreamClient
    # The server's INFO line on connect says whether JetStream is up.
    probe_send, probe_expect = b"", b'"jetstream":true'

    def server_argv(self, binary: str, port: int, data_dir: str) -> list[str]:
        return [binary, "-js", "-a", "127.0.0.1", "-p", str(port), "--store_dir", data_dir]

    def describe(self) -> str:
        from importlib.metadata import version
        server = self.server_version().split()[-1]
        return (f"nats-server {server}, JetStream file storage; nats-py {version('nats-py')}: publishes with "
                f"{WINDOW:,} acks in flight, pull requests of {PULL_BATCH} ({PULLS_IN_FLIGHT} in flight), "
                f"AckPolicy.ALL")
