"""The proxy's calls on its loop's own ZMTP connections (proxy/loop_calls.py) against real doors: a
cluster's NameServer and broker (many calls in flight on one connection, each answered by its own
opaque), a door that does not speak NULL (its calls go through the RpcClient), a door that never
greets (RequestTimeout at the deadline) and one that closes mid-call (TransportError at once)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from rocketbox.cluster import zmtp_format as zf
from rocketbox.cluster.client.routes import normalize_endpoint
from rocketbox.cluster.client_transport import RequestTimeout, TransportError
from rocketbox.cluster.protocol import RequestCode
from rocketbox.cluster.proxy.handoff import BatchedCalls
from rocketbox.cluster.proxy.loop_calls import LoopCalls
from rocketbox.cluster.testing import LocalCluster
from rocketbox.cluster.wire_format import Command
from rocketbox.cluster.zmq_transport import RpcClient

IN_FLIGHT = 64


def _calls(timeout_ms: int = 3000) -> tuple[LoopCalls, RpcClient]:
    rpc = RpcClient(timeout_ms)
    return LoopCalls(BatchedCalls(rpc), rpc.server_request_handlers, timeout_ms), rpc


@pytest.mark.timeout(60)
def test_calls_in_flight_on_one_connection_are_each_answered(tmp_path):
    with LocalCluster(str(tmp_path / "c")) as cluster:
        async def main():
            calls, rpc = _calls()
            try:
                namesrv = normalize_endpoint(cluster.namesrv.split(";")[0])
                info = json.loads((await calls.call(namesrv, Command(RequestCode.GET_BROKER_CLUSTER_INFO, {}))).body)
                broker = normalize_endpoint(info["brokerAddrTable"]["broker-a"]["brokerAddrs"]["0"])
                requests = [Command(RequestCode.GET_BROKER_RUNTIME_INFO, {}) for _ in range(IN_FLIGHT)]
                answers = await asyncio.wait_for(asyncio.gather(*(calls.call(broker, r) for r in requests)), 20)
                assert [a.opaque for a in answers] == [r.opaque for r in requests]
                assert len({r.opaque for r in requests}) == IN_FLIGHT
                assert all(a.code == 0 for a in answers)
                assert calls.calls_made == IN_FLIGHT + 1
            finally:
                calls.close()
                rpc.close()
        asyncio.run(main())


class _Door:
    """A TCP listener on 127.0.0.1 whose connections ``behave(conn)`` on a thread."""

    def __init__(self, behave):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.listener.settimeout(0.2)
        self.stopping = False
        self.behave = behave
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopping:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self.behave, args=(conn,), daemon=True).start()

    def close(self):
        self.stopping = True
        self.thread.join(5)
        self.listener.close()


def _closes_at_once(conn):
    conn.close()


def _never_greets(conn):
    time.sleep(5)
    conn.close()


def _greets_then_closes_at_the_request(conn):
    """Greeting and READY, then the client's greeting, READY and request read (however the reads cut
    them: until it has been quiet for a while), then a close without an answer."""
    conn.sendall(zf.greeting(as_server=True) + zf.ready(b"ROUTER"))
    conn.settimeout(0.5)
    try:
        while conn.recv(65536):
            pass
    except socket.timeout:
        pass
    conn.close()


def _one_call(behave, timeout_ms: int) -> tuple[BaseException | None, float, bool]:
    """One call to a door that ``behave``s: what it raised, after how long, whether the door is asked
    through the RpcClient from then on."""
    door = _Door(behave)

    async def main():
        calls, rpc = _calls(timeout_ms)
        started = time.monotonic()
        try:
            await asyncio.wait_for(calls.call(door.endpoint, Command(RequestCode.GET_BROKER_RUNTIME_INFO, {})), 15)
            return None, time.monotonic() - started, door.endpoint in calls._via_fallback
        except (TransportError, RequestTimeout) as exc:
            return exc, time.monotonic() - started, door.endpoint in calls._via_fallback
        finally:
            calls.close()
            rpc.close()
    try:
        return asyncio.run(main())
    finally:
        door.close()


@pytest.mark.timeout(30)
def test_a_door_that_closes_at_the_greeting_is_asked_through_the_rpc_client():
    error, _elapsed, via_rpc = _one_call(_closes_at_once, timeout_ms=500)
    assert isinstance(error, TransportError) and via_rpc


@pytest.mark.timeout(30)
def test_a_door_that_never_answers_times_the_call_out():
    error, elapsed, via_rpc = _one_call(_never_greets, timeout_ms=300)
    assert isinstance(error, RequestTimeout) and not via_rpc
    assert elapsed < 3


@pytest.mark.timeout(30)
def test_a_connection_lost_mid_call_fails_the_call_at_once():
    error, elapsed, via_rpc = _one_call(_greets_then_closes_at_the_request, timeout_ms=10_000)
    assert isinstance(error, TransportError) and "lost" in str(error) and not via_rpc
    assert elapsed < 5   # not at the 10 s deadline
