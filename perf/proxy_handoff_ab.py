"""The gRPC proxy's hand-off of broker calls (proxy/handoff.py), A/B in one process: CPU a call and calls
a second with 64 in flight, one ``asyncio.wrap_future(rpc.call_async(...))`` a call (before) against
``BatchedCalls`` (after), to a real RpcServer in a child process, rounds interleaved; the CPU is the
caller's process time (its loop and the RpcClient's I/O thread).

    .venv/bin/python perf/proxy_handoff_ab.py ROUNDS CALLS      (e.g. 5 5000)
"""
import asyncio
import multiprocessing
import statistics
import sys
import time

from rocketbox.cluster.proxy.handoff import BatchedCalls
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import EventLoop, RpcClient, RpcServer

WINDOW = 64
WARMUP_CALLS = 500


def serve(conn) -> None:
    """An echo RpcServer; its endpoint sent back through ``conn``."""
    loop = EventLoop()
    server = RpcServer("tcp://127.0.0.1:0", {1: lambda request, reply: request.response(0, body=request.body)},
                       name="echo")
    server.attach(loop)
    conn.send(server.endpoint)
    loop.run()


async def drive(call, endpoint: str, count: int) -> None:
    window = asyncio.Semaphore(WINDOW)

    async def one() -> None:
        async with window:
            await call(endpoint, Command(1, {"topic": "T", "queueId": "0"}, b"x" * 100))
    await asyncio.gather(*(one() for _ in range(count)))


def measure(kind: str, endpoint: str, count: int) -> tuple[float, float]:
    """(CPU us a call, calls a second) after a warm-up."""
    rpc = RpcClient(5000)
    batched = BatchedCalls(rpc)
    call = (lambda e, r: asyncio.wrap_future(rpc.call_async(e, r))) if kind == "before" else batched.call

    async def timed() -> tuple[float, float]:
        await drive(call, endpoint, WARMUP_CALLS)
        cpu, wall = time.process_time(), time.perf_counter()
        await drive(call, endpoint, count)
        return time.process_time() - cpu, time.perf_counter() - wall
    try:
        cpu_s, wall_s = asyncio.run(timed())
    finally:
        rpc.close()
    return cpu_s / count * 1e6, count / wall_s


def main() -> None:
    rounds, count = int(sys.argv[1]), int(sys.argv[2])
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.Process(target=serve, args=(child,), daemon=True)
    server.start()
    endpoint = parent.recv()
    rows: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    try:
        for _ in range(rounds):
            for kind in rows:
                rows[kind].append(measure(kind, endpoint, count))
    finally:
        server.kill()
    for kind, values in rows.items():
        cpu = [round(c) for c, _ in values]
        rate = [round(r) for _, r in values]
        print(f"{kind}: CPU us a call {cpu} median {statistics.median(cpu)}; "
              f"calls/s {rate} median {statistics.median(rate)}")


if __name__ == "__main__":
    main()
