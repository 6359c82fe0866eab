"""``python -m rocketbox.perf.public_api_latency``: one message's latency as a user meets it, through
the public API only, beside Redis Streams in the same run (issue 33 item 4).

RocketBox: a ``LocalCluster`` with its defaults, a topic of one queue; a fresh producer process with a
default ``Producer`` (``Producer(group, namesrv=cluster.namesrv)``) makes ``--sends`` sync sends of
100 B, each timed, from its first; end to end, a fresh producer process sends one message at a time
(``Producer.send``) paced at 10k msg/s, and a default ``PushConsumer`` in this process receives
them (receive - send of stamped bodies, the first 5 % skipped). Redis Streams: the same shapes with
redis-py's own API (``Redis.xadd`` a message, ``Redis.xread(block=)`` in a loop).

The ``perf`` package's own latency rows (perf/scenarios/latency.py) differ from this in several ways
(the door, warm-up, the config, batching per tick, the consumer): each is a variant here, so that
its effect alone is measured in the same run. Variants run interleaved, round by round; medians.

    python -m rocketbox.perf.public_api_latency --rounds 3
    python -m rocketbox.perf.public_api_latency --sends-variants default,remoting --e2e-variants default
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack

from rocketbox.cluster import ClientConfig, Message, Producer, PullConsumer, PushConsumer
from rocketbox.cluster.config import namesrv_endpoints
from rocketbox.cluster.testing import LocalCluster, wait_until
from rocketbox.perf.harness import (PACED_RATE_MSG_S, ChildProcess, Tally, client_config, create_topic, message_body,
                                    serve_parent, turned)
from rocketbox.perf.peers.base import paced_batches
from rocketbox.perf.report import percentile

BODY_BYTES = 100
WARM_UP = 200
PULL_LOOP_SUSPEND_MS = 500
REDIS_BLOCK_MS = 1000


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way of driving RocketBox: what the public API does by default, or what perf/ does."""
    door: str = "native"            # native (the default Producer's) or remoting (perf's latency rows)
    warm_up: int = 0                # untimed sends first (perf: 200)
    perf_config: bool = False       # perf/harness.client_config (longer time-outs) instead of the defaults
    batch_per_tick: bool = False    # e2e: a tick's due messages in one send_batch (perf) or one send each
    consumer: str = "push"          # e2e: push (a default PushConsumer), push0 (no consume pool), pull (a loop)
    libzmq: bool = False            # the native door through libzmq's sockets (ClientConfig.native_direct off)
    spin_us: int | None = None      # ClientConfig.sync_call_spin_us (None: the default)


SENDS_VARIANTS = {
    "default": Variant(),
    "warm": Variant(warm_up=WARM_UP),
    "remoting": Variant(door="remoting"),
    "perf": Variant(door="remoting", warm_up=WARM_UP, perf_config=True),
    "libzmq": Variant(libzmq=True),
}
E2E_VARIANTS = {
    "default": Variant(),
    "remoting": Variant(door="remoting"),
    "batch": Variant(batch_per_tick=True),
    "libzmq": Variant(libzmq=True),
    "push0": Variant(consumer="push0"),
    "nospin": Variant(spin_us=0),
    "pull": Variant(consumer="pull"),
    # perf's "pull loop" row: remoting, a batch a tick, a PullConsumer loop
    "perf-pull": Variant(door="remoting", perf_config=True, batch_per_tick=True, consumer="pull"),
}


def _config(cluster_namesrv: dict, variant: Variant) -> ClientConfig:
    namesrv = cluster_namesrv[variant.door]
    if variant.perf_config:
        return client_config(namesrv, transport=variant.door)
    # What Producer(group, namesrv=...) builds: the defaults, the door (and libzmq) aside.
    cfg = ClientConfig(namesrv_endpoints=namesrv_endpoints(namesrv), transport=variant.door)
    if variant.spin_us is not None:
        cfg = dataclasses.replace(cfg, sync_call_spin_us=variant.spin_us)
    return dataclasses.replace(cfg, native_direct=False) if variant.libzmq else cfg


# ---------------------------------------------------------------- the children (spawned)

def _rocketbox_sends_child(conn, cfg: ClientConfig, topic: str, count: int, warm_up: int) -> None:
    try:
        producer = Producer("PublicApiProducer", config=cfg)

        def run() -> dict:
            body = message_body(BODY_BYTES)
            for _ in range(warm_up):
                producer.send(Message(topic, body))
            took = []
            for _ in range(count):
                t0 = time.perf_counter()
                producer.send(Message(topic, body))
                took.append((time.perf_counter() - t0) * 1e6)
            return {"latencies_us": took}

        try:
            serve_parent(conn, run)
        finally:
            producer.shutdown()
    except BaseException as exc:  # noqa: BLE001 - the parent reports it
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def _rocketbox_paced_child(conn, cfg: ClientConfig, topic: str, total: int, duration_s: float,
                           batch_per_tick: bool) -> None:
    try:
        producer = Producer("PublicApiPacedProducer", config=cfg)

        def send(bodies: list[bytes]) -> None:
            if batch_per_tick:
                producer.send_batch([Message(topic, body) for body in bodies])
            else:
                for body in bodies:
                    producer.send(Message(topic, body))

        try:
            serve_parent(conn, lambda: _paced(send, total, duration_s, 256 if batch_per_tick else 1))
        finally:
            producer.shutdown()
    except BaseException as exc:  # noqa: BLE001
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def _redis_sends_child(conn, port: int, stream: str, count: int) -> None:
    try:
        import redis
        client = redis.Redis(host="127.0.0.1", port=port)

        def run() -> dict:
            body = message_body(BODY_BYTES)
            took = []
            for _ in range(count):
                t0 = time.perf_counter()
                client.xadd(stream, {b"b": body})
                took.append((time.perf_counter() - t0) * 1e6)
            return {"latencies_us": took}

        serve_parent(conn, run)
        client.close()
    except BaseException as exc:  # noqa: BLE001
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def _redis_paced_child(conn, port: int, stream: str, total: int, duration_s: float) -> None:
    try:
        import redis
        client = redis.Redis(host="127.0.0.1", port=port)

        def send(bodies: list[bytes]) -> None:
            for body in bodies:
                client.xadd(stream, {b"b": body})

        serve_parent(conn, lambda: _paced(send, total, duration_s, 1))
        client.close()
    except BaseException as exc:  # noqa: BLE001
        conn.send({"error": f"{type(exc).__name__}: {exc}"})


def _paced(send, total: int, duration_s: float, per_send: int) -> dict:
    """``send(bodies)`` of stamped bodies as they fall due at 10k msg/s, ``per_send`` at most a call."""
    return paced_batches(send, total, PACED_RATE_MSG_S, duration_s * 3, per_send)


def _child_result(target, args: tuple, name: str, time_s_max: float) -> dict:
    child = ChildProcess(target, args, name, time_s_max)
    try:
        child.start()
        child.go()
        return child.result()
    finally:
        child.stop()


# ---------------------------------------------------------------- one measure each

def rocketbox_sends(namesrvs: dict, variant: Variant, topic: str, count: int) -> list[float]:
    cfg = _config(namesrvs, variant)
    create_topic(cfg, topic, 1)
    return _child_result(_rocketbox_sends_child, (cfg, topic, count, variant.warm_up), "public-api-sends",
                         120)["latencies_us"]


def redis_sends(port: int, stream: str, count: int) -> list[float]:
    return _child_result(_redis_sends_child, (port, stream, count), "redis-sends", 120)["latencies_us"]


def rocketbox_e2e(namesrvs: dict, variant: Variant, topic: str, group: str, duration_s: float) -> list[float]:
    cfg = _config(namesrvs, variant)
    create_topic(cfg, topic, 1)
    total = int(PACED_RATE_MSG_S * duration_s)
    tally = Tally(total, stamped=True)
    stop = threading.Event()
    with ExitStack() as stack:
        if variant.consumer == "pull":
            stack.callback(stop.set)
            _start_pull_loop(stack, cfg, topic, group, tally, stop)
        else:
            kwargs = {"consume_threads": 0} if variant.consumer == "push0" else {}
            consumer = PushConsumer(group, config=cfg, **kwargs)
            consumer.subscribe(topic)
            consumer.register_listener(tally.listener)
            consumer.start()
            stack.callback(consumer.shutdown)
            wait_until(lambda: consumer.assigned_queues(), 30, what="the queue assigned")
        result = _child_result(_rocketbox_paced_child, (cfg, topic, total, duration_s, variant.batch_per_tick),
                               "public-api-paced", duration_s * 3)
        tally.retarget(result["sent"])
        tally.reached.wait(30)
    return tally.steady_latencies(total)


def _start_pull_loop(stack: ExitStack, cfg: ClientConfig, topic: str, group: str, tally: Tally,
                     stop: threading.Event) -> None:
    consumer = PullConsumer(group, config=cfg)
    stack.callback(consumer.shutdown)
    mq = consumer.queues(topic)[0]
    offset = [consumer.max_offset(mq)]

    def read_loop() -> None:
        while not stop.is_set():
            result = consumer.pull(mq, offset[0], 1024, "*", suspend_ms=PULL_LOOP_SUSPEND_MS)
            tally.add(len(result.messages), [m.body for m in result.messages])
            offset[0] = result.next_begin_offset

    reader = threading.Thread(target=read_loop, name="pull-loop", daemon=True)
    reader.start()
    stack.callback(reader.join, PULL_LOOP_SUSPEND_MS / 1000 + 5)


def redis_e2e(port: int, stream: str, duration_s: float) -> list[float]:
    import redis
    total = int(PACED_RATE_MSG_S * duration_s)
    tally = Tally(total, stamped=True)
    stop = threading.Event()
    client = redis.Redis(host="127.0.0.1", port=port)
    client.xadd(stream, {b"b": b"start"})
    last_id = [client.xinfo_stream(stream)["last-generated-id"]]

    def read_loop() -> None:
        while not stop.is_set():
            reply = client.xread({stream: last_id[0]}, block=REDIS_BLOCK_MS, count=1024)
            for _name, entries in reply or ():
                tally.add(len(entries), [fields[b"b"] for _id, fields in entries])
                last_id[0] = entries[-1][0]

    reader = threading.Thread(target=read_loop, name="redis-read", daemon=True)
    reader.start()
    try:
        result = _child_result(_redis_paced_child, (port, stream, total, duration_s), "redis-paced",
                               duration_s * 3)
        tally.retarget(result["sent"])
        tally.reached.wait(30)
    finally:
        stop.set()
        reader.join(REDIS_BLOCK_MS / 1000 + 5)
        client.close()
    return tally.steady_latencies(total)


# ---------------------------------------------------------------- the run

def _summary(latencies: list[float]) -> dict:
    return {"p50": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99), "count": len(latencies)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sends", type=int, default=5000)
    parser.add_argument("--paced-seconds", type=float, default=5.0)
    parser.add_argument("--sends-variants", default="default",
                        help=f"comma-separated, of {','.join(SENDS_VARIANTS)} ('' for none)")
    parser.add_argument("--e2e-variants", default="default",
                        help=f"comma-separated, of {','.join(E2E_VARIANTS)} ('' for none)")
    parser.add_argument("--json", help="write every round's figures here")
    args = parser.parse_args(argv)
    sends_variants = [v for v in args.sends_variants.split(",") if v]
    e2e_variants = [v for v in args.e2e_variants.split(",") if v]
    rows: dict[str, list[dict]] = {}
    from rocketbox.perf.peers.redis_streams import RedisStreams
    peer = RedisStreams()
    if peer.missing() is not None:
        print(f"Redis Streams not measured: {peer.missing()}")
    with tempfile.TemporaryDirectory(prefix="rocketbox-public-api-") as tmp, ExitStack() as stack:
        cluster = stack.enter_context(LocalCluster(os.path.join(tmp, "cluster")))
        namesrvs = {"native": cluster.namesrv, "remoting": cluster.remoting_namesrv}
        port = stack.enter_context(peer.server(tmp)) if peer.missing() is None else None
        for rnd in range(args.rounds):
            order = [("sends", name) for name in (["redis", *sends_variants] if sends_variants else [])]
            order += [("e2e", name) for name in (["redis", *e2e_variants] if e2e_variants else [])]
            order = turned(order, rnd)
            for kind, name in order:
                key = f"{kind} {name}"
                if name == "redis":
                    if port is None:
                        continue
                    lat = (redis_sends(port, f"sends{rnd}", args.sends) if kind == "sends"
                           else redis_e2e(port, f"paced{rnd}", args.paced_seconds))
                elif kind == "sends":
                    lat = rocketbox_sends(namesrvs, SENDS_VARIANTS[name], f"PublicSends{rnd}{name}", args.sends)
                else:
                    lat = rocketbox_e2e(namesrvs, E2E_VARIANTS[name], f"PublicE2e{rnd}{name}",
                                        f"PublicE2eGroup{rnd}{name}", args.paced_seconds)
                rows.setdefault(key, []).append(_summary(lat))
                print(f"round {rnd + 1} {key}: p50 {rows[key][-1]['p50']:.0f} us, p99 {rows[key][-1]['p99']:.0f} us",
                      flush=True)
    print()
    print("| measure | variant | p50 us (median) | p99 us (median) | p50 each round | p99 each round |")
    print("| --- | --- | ---: | ---: | --- | --- |")
    for key, runs in rows.items():
        kind, name = key.split(" ", 1)
        p50s = [round(r["p50"]) for r in runs]
        p99s = [round(r["p99"]) for r in runs]
        print(f"| {'sync send' if kind == 'sends' else 'e2e at 10k msg/s'} | {name} | {statistics.median(p50s):.0f} "
              f"| {statistics.median(p99s):.0f} | {p50s} | {p99s} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
