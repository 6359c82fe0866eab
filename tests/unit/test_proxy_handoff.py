"""The proxy's batched hand-off of broker answers (proxy/handoff.py) against a real ZeroMQ server:
every answer reaches its own caller, answers settled together cost the loop one wake-up, time-outs
and cancelled callers behave."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from rocketbox.cluster.proxy.handoff import BatchedCalls
from rocketbox.cluster.topology import free_ports
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import EventLoop, RpcClient, RpcServer, TransportError

ECHO = 1


@pytest.fixture
def echo_server():
    loop = EventLoop()
    server = RpcServer("tcp://127.0.0.1:0", {ECHO: lambda request, reply: request.response(0, body=request.body)},
                       name="echo")
    server.attach(loop)
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    try:
        yield server.endpoint
    finally:
        loop.stopping = True
        thread.join(5)
        server.close()


@pytest.fixture
def calls():
    rpc = RpcClient(default_timeout_ms=5000)
    try:
        yield BatchedCalls(rpc)
    finally:
        rpc.close()


def test_every_answer_reaches_its_own_caller(echo_server, calls):
    async def scenario():
        bodies = [f"message {i}".encode() for i in range(300)]
        answers = await asyncio.gather(*(calls.call(echo_server, Command(ECHO, {}, body)) for body in bodies))
        return bodies, [answer.body for answer in answers]

    bodies, echoed = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert echoed == bodies


def test_answers_settled_together_wake_the_loop_once(echo_server, calls):
    deliveries = []
    deliver = calls._deliver
    calls._deliver = lambda: (deliveries.append(len(calls._answered)), deliver())

    async def scenario():
        waiters = [calls.call(echo_server, Command(ECHO, {}, b"x")) for _ in range(50)]
        # The loop is kept busy (not yielding) until the I/O thread has settled every answer.
        deadline = time.monotonic() + 20
        while len(calls._answered) < 50 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert len(calls._answered) == 50
        return await asyncio.gather(*waiters)

    answers = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert [a.code for a in answers] == [0] * 50
    assert deliveries == [50]


def test_a_silent_peer_times_out_and_a_cancelled_caller_leaves_the_others(echo_server, calls):
    silent = f"tcp://127.0.0.1:{free_ports(1)[0]}"

    async def scenario():
        with pytest.raises(TransportError):
            await calls.call(silent, Command(ECHO, {}, b"x"), timeout_ms=200)
        left = asyncio.ensure_future(calls.call(echo_server, Command(ECHO, {}, b"left")))
        stayed = asyncio.ensure_future(calls.call(echo_server, Command(ECHO, {}, b"stayed")))
        left.cancel()
        return (await stayed).body, left.cancelled()

    assert asyncio.run(asyncio.wait_for(scenario(), 30)) == (b"stayed", True)
